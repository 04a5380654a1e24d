// The kvq subcommands. Each takes its arguments (after the subcommand name) and
// streams, and returns the process exit status: 0 ok, 1 a check failed, 2 bad usage or input.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

namespace kvq::cli {

using Args = std::vector<std::string>;

int quant_command(const Args& args, std::ostream& out, std::ostream& err);
int dequant_command(const Args& args, std::ostream& out, std::ostream& err);
int bench_command(const Args& args, std::ostream& out, std::ostream& err);
// The --case arguments `kvq bench --peers` hands kernels/bench_flashinfer_rope.py for the RoPE
// shapes of `tokens` tokens (dtype bf16 or fp16): kvq's problems in the script's terms.
std::string flashinfer_case_arguments(const std::string& dtype, std::int64_t tokens);
int recipes_command(const Args& args, std::ostream& out, std::ostream& err);
int formats_command(const Args& args, std::ostream& out, std::ostream& err);
int table_command(const Args& args, std::ostream& out, std::ostream& err);
int encode_command(const Args& args, std::istream& in, std::ostream& out, std::ostream& err);
int decode_command(const Args& args, std::istream& in, std::ostream& out, std::ostream& err);
int docs_command(const Args& args, std::ostream& out, std::ostream& err);
int check_command(const Args& args, std::ostream& out, std::ostream& err);
int study_command(const Args& args, std::ostream& out, std::ostream& err);
int layouts_command(const Args& args, std::ostream& out, std::ostream& err);
int verify_command(const Args& args, std::ostream& out, std::ostream& err);
int identify_command(const Args& args, std::ostream& out, std::ostream& err);

// The generated part of docs/formats.md.
std::string formats_markdown();

}  // namespace kvq::cli
