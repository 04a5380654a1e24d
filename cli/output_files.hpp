// A command's output files: written under temporary names beside their final paths and renamed
// into place only once every one was written, flushed and closed without error, so a command that
// fails leaves nothing behind (docs/cli.md, "Untrusted input").
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kvq::cli {

class OutputFiles {
 public:
  OutputFiles() = default;
  OutputFiles(const OutputFiles&) = delete;
  OutputFiles& operator=(const OutputFiles&) = delete;
  ~OutputFiles();  // removes what was staged and not committed, and the folders made for it

  // Makes folder `path` (and its parents) where missing; "" or a message naming it.
  std::string folder(const std::string& path);
  // The temporary path to write the file `path` to.
  std::string stage(const std::string& path);
  // Renames every staged file into place; "" or a message naming the file.
  std::string commit();

 private:
  std::vector<std::pair<std::string, std::string>> files_;  // final path, temporary path
  std::vector<std::string> made_;                           // folders made, outermost first
  bool committed_ = false;
};

// bytes to `path`, flushed and closed: "" or "cannot write PATH".
std::string write_file(const std::string& path, std::string_view bytes);

}  // namespace kvq::cli
