// kvq: the command line that ties formats, oracle and property suite together.
#include <iostream>
#include <string>

#include "cli/commands.hpp"

namespace {
constexpr const char* kUsage =
    "kvq: bit-exact ground truth for low-precision KV-cache formats\n"
    "\n"
    "  kvq formats                          list formats and conventions\n"
    "  kvq recipes                          list scale recipes\n"
    "  kvq layouts                          MLA KV-cache layouts and the NVFP4 page, with byte offsets\n"
    "  kvq quant RECIPE --in X.npy --out DIR   quantize (float32, or uint16 BF16/FP16 bits)\n"
    "  kvq dequant RECIPE --in DIR --out Y.npy [--dtype fp32|bf16|fp16]\n"
    "  kvq bench [--recipes a,b] [--mib N] [--peers]  kernel GB/s against D2D copy bandwidth (GPU), PyTorch peers\n"
    "  kvq study qsnr --out DIR [...]       quantization error per recipe x block x distribution\n"
    "  kvq study crest|scales|attention|errors|all|merge --out DIR   the other error studies (docs/studies.md)\n"
    "  kvq verify RECIPE --inputs DIR --outputs DIR   a port's tensors against a recipe (docs/ports.md;\n"
    "                                                 paged stores by recipe, RoPE: rope-quantize, rope-append)\n"
    "  kvq identify --inputs DIR --outputs DIR        which recipe and variant a port follows\n"
    "  kvq table FORMAT                     every code: hex, bits, exact value\n"
    "  kvq encode FORMAT --convention NAME [--rounding rne|rz|ru|rd|rna|rs|rnz]\n"
    "                                       FP32 inputs on stdin -> codes\n"
    "  kvq decode FORMAT                    codes on stdin -> exact values\n"
    "  kvq check [options]                  run the property suite (kvq check --help)\n"
    "  kvq docs formats                     the generated part of docs/formats.md\n";
}

namespace {
int run(const std::string& command, const kvq::cli::Args& args) {
  if (command == "formats") return kvq::cli::formats_command(args, std::cout, std::cerr);
  if (command == "quant") return kvq::cli::quant_command(args, std::cout, std::cerr);
  if (command == "dequant") return kvq::cli::dequant_command(args, std::cout, std::cerr);
  if (command == "bench") return kvq::cli::bench_command(args, std::cout, std::cerr);
  if (command == "recipes") return kvq::cli::recipes_command(args, std::cout, std::cerr);
  if (command == "table") return kvq::cli::table_command(args, std::cout, std::cerr);
  if (command == "encode") return kvq::cli::encode_command(args, std::cin, std::cout, std::cerr);
  if (command == "decode") return kvq::cli::decode_command(args, std::cin, std::cout, std::cerr);
  if (command == "docs") return kvq::cli::docs_command(args, std::cout, std::cerr);
  if (command == "check") return kvq::cli::check_command(args, std::cout, std::cerr);
  if (command == "layouts") return kvq::cli::layouts_command(args, std::cout, std::cerr);
  if (command == "study") return kvq::cli::study_command(args, std::cout, std::cerr);
  if (command == "verify") return kvq::cli::verify_command(args, std::cout, std::cerr);
  if (command == "identify") return kvq::cli::identify_command(args, std::cout, std::cerr);
  std::cerr << "kvq: unknown command '" << command << "'\n" << kUsage;
  return 2;
}
}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h") {
    std::cout << kUsage;
    return argc < 2 ? 2 : 0;
  }
  std::ios::sync_with_stdio(false);  // the streams buffer on their own (encode/decode stream millions of lines)
  const int status = run(argv[1], kvq::cli::Args(argv + 2, argv + argc));
  // A write error on standard output (a full disk, a closed pipe) is an error, not a success.
  if (!std::cout.flush()) {
    std::cerr << "kvq " << argv[1] << ": cannot write standard output\n";
    return 2;
  }
  return status;
}
