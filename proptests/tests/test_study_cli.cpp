// `kvq study` bad input: exit status 2 and a message that names the argument, nothing written.
#include <doctest/doctest.h>

#include <filesystem>
#include <sstream>

#include "cli/commands.hpp"

namespace {

struct Run {
  int status;
  std::string out, err;
};

Run study(const std::vector<std::string>& args) {
  std::ostringstream out, err;
  const int status = kvq::cli::study_command(args, out, err);
  return {status, out.str(), err.str()};
}

std::string fresh_dir(const std::string& name) {
  const auto dir = std::filesystem::temp_directory_path() / ("kvq-study-cli-" + name);
  std::filesystem::remove_all(dir);
  return dir.string();
}

}  // namespace

TEST_CASE("cli: kvq study rejects bad arguments by name and writes nothing") {
  const std::string dir = fresh_dir("bad");
  struct Case {
    std::vector<std::string> args;
    std::string names;
  };
  for (const Case& c : std::vector<Case>{
           {{"nonsense", "--out", dir}, "unknown study 'nonsense'"},
           {{"qsnr"}, "--out DIR is required"},
           {{"qsnr", "--out", dir, "--blocks", "16,x"}, "--blocks"},
           {{"qsnr", "--out", dir, "--blocks", "24"}, "--blocks: 24"},
           {{"qsnr", "--out", dir, "--recipes", "nvfp5"}, "--recipes: unknown recipe 'nvfp5'"},
           {{"qsnr", "--out", dir, "--dist", "student-t:2"}, "2 < NU <= 1e6"},
           {{"qsnr", "--out", dir, "--shard", "2/2"}, "--shard takes I/N with 0 <= I < N"},
           {{"qsnr", "--out", dir, "--device", "tpu"}, "--device is cpu or cuda"},
           {{"crest", "--out", dir, "--device", "cuda"}, "the crest study runs on the CPU"},
           {{"attention", "--out", dir, "--seq-lens", "8", "--queries", "16"}, "--seq-lens"},
           {{"errors", "--out", dir, "--head-dim", "64"}, "--head-dim"},
           {{"merge", "--out", dir}, "no *.shardIofN.csv files"},
       }) {
    const Run r = study(c.args);
    CHECK_MESSAGE(r.status == 2, c.args[0] << " " << r.err);
    CHECK_MESSAGE(r.err.find(c.names) != std::string::npos, "expected '" << c.names << "' in: " << r.err);
  }
  CHECK_FALSE(std::filesystem::exists(dir));
}

TEST_CASE("cli: kvq study merge names a missing shard") {
  const std::string dir = fresh_dir("merge");
  REQUIRE(study({"crest", "--out", dir, "--samples", "1024", "--jobs", "1", "--shard", "0/3"}).status == 0);
  REQUIRE(study({"crest", "--out", dir, "--samples", "1024", "--jobs", "1", "--shard", "2/3"}).status == 0);
  const Run r = study({"merge", "--out", dir});
  CHECK(r.status == 2);
  CHECK_MESSAGE(r.err.find("shard 1/3 is missing") != std::string::npos, r.err);
  CHECK_FALSE(std::filesystem::exists(dir + "/crest.csv"));
  std::filesystem::remove_all(dir);
}
