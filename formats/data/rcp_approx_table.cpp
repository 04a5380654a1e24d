// The measured sm_90 table behind rcp_approx_ftz_model (formats/reciprocal.hpp): one bit per
// FP32 mantissa m, set where rcp.approx.ftz.f32(1.m) is not the correctly rounded 1/1.m.
// Measured on an NVIDIA H100 (driver 580, CUDA 13.0) by experiments/probes/rcp_approx.cu;
// the gpu suite re-checks the model against the instruction over all 2^32 inputs.
#include <cstdint>

#include "formats/reciprocal.hpp"

// The 1 MiB bit set, embedded from the file CMake extracts from formats/data/*.tar.xz.
asm(".section .rodata\n"
    ".balign 16\n"
    ".globl kvq_rcp_approx_sm90_bits\n"
    "kvq_rcp_approx_sm90_bits:\n"
    ".incbin \"" KVQ_RCP_TABLE_FILE "\"\n"
    ".globl kvq_rcp_approx_sm90_bits_end\n"
    "kvq_rcp_approx_sm90_bits_end:\n"
    ".previous\n");
extern "C" const std::uint8_t kvq_rcp_approx_sm90_bits[];
extern "C" const std::uint8_t kvq_rcp_approx_sm90_bits_end[];

namespace kvq::reciprocal_detail {

const std::uint8_t* sm90_table() { return kvq_rcp_approx_sm90_bits; }

std::size_t sm90_table_bytes() { return static_cast<std::size_t>(kvq_rcp_approx_sm90_bits_end - kvq_rcp_approx_sm90_bits); }

}  // namespace kvq::reciprocal_detail
