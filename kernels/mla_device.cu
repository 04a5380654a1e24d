// MLA and prefill-workspace kernels: one thread per piece (kernels/mla_kernels.hpp, the same
// code the CPU twins run), grid-stride.
#include <cuda_runtime.h>

#include "kernels/mla_kernels.hpp"

namespace kvq::kernels {
namespace {

constexpr int kThreads = 128;

int grid_of(std::int64_t work) {
  int device = 0, sms = 0;
  cudaGetDevice(&device);
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  const std::int64_t wanted = (work + kThreads - 1) / kThreads, cap = static_cast<std::int64_t>(sms > 0 ? sms : 1) * 32;
  return static_cast<int>(wanted < cap ? wanted : cap);
}

std::string launched() {
  const cudaError_t e = cudaGetLastError();
  return e == cudaSuccess ? std::string() : std::string(cudaGetErrorString(e));
}

__device__ inline std::int64_t first_item() { return blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; }
__device__ inline std::int64_t item_stride() { return static_cast<std::int64_t>(gridDim.x) * blockDim.x; }

__global__ void requantize_576_to_656_kernel(std::int64_t slots, std::int64_t block_size, const std::uint8_t* src,
                                             float k_scale, KScale mode, std::uint8_t* dst) {
  for (std::int64_t k = first_item(); k < slots * kRequantPieces; k += item_stride())
    requantize_576_to_656_piece(block_size, src, k_scale, mode, dst, k / kRequantPieces, static_cast<int>(k % kRequantPieces));
}

template <MlaLayoutId L>
__global__ void quantize_kernel(MlaCacheShape c, const std::uint16_t* x, const std::int64_t* slot_mapping,
                                std::int64_t num_tokens, std::uint8_t* cache) {
  c.layout = L;  // the layout a constant: offsets fold at compile time
  constexpr int pieces = mla_quantize_pieces(mla_layout(L));
  for (std::int64_t k = first_item(); k < num_tokens * pieces; k += item_stride()) {
    const std::int64_t row = k / pieces, slot = slot_mapping[row];
    if (slot >= 0 && slot < c.slots()) mla_quantize_piece(c, x, row, cache, slot, static_cast<int>(k % pieces));
  }
}

template <MlaLayoutId L>
__global__ void dequantize_kernel(MlaCacheShape c, const std::uint8_t* cache, float k_scale, DType output, void* y) {
  c.layout = L;
  constexpr int pieces = mla_dequantize_pieces(mla_layout(L));
  for (std::int64_t k = first_item(); k < c.slots() * pieces; k += item_stride())
    mla_dequantize_piece(c, cache, k_scale, output, y, k / pieces, static_cast<int>(k % pieces));
}

__global__ void workspace_kernel(WorkspaceBatch w, const std::uint8_t* cache, const std::int32_t* block_tables,
                                 const std::int32_t* cu_seq_lens, float factor_k, float factor_v, std::uint8_t* k_out,
                                 std::uint8_t* v_out) {
  for (std::int64_t k = first_item(); k < w.items(); k += item_stride())
    nvfp4_page_to_workspace_item(w, cache, block_tables, cu_seq_lens, factor_k, factor_v, k_out, v_out, k);
}

}  // namespace

namespace device {

std::string mla_requantize_576_to_656(std::int64_t num_blocks, std::int64_t block_size, const std::uint8_t* src,
                                      float k_scale, KScale mode, std::uint8_t* dst, void* stream) {
  if (auto e = validate_requantize(num_blocks, block_size, k_scale); !e.empty()) return e;
  const std::int64_t slots = num_blocks * block_size;
  if (slots == 0) return {};
  requantize_576_to_656_kernel<<<grid_of(slots * kRequantPieces), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      slots, block_size, src, k_scale, mode, dst);
  return launched();
}

std::string mla_quantize(const MlaCacheShape& c, const std::uint16_t* x, const std::int64_t* slot_mapping,
                         std::int64_t num_tokens, std::uint8_t* cache, void* stream) {
  if (auto e = validate_quantize(c, num_tokens); !e.empty()) return e;
  if (num_tokens == 0) return {};
  const auto st = static_cast<cudaStream_t>(stream);
  const int grid = grid_of(num_tokens * mla_quantize_pieces(c.desc()));
  if (c.layout == MlaLayoutId::fp8_nope_block_scale_bf16_rope)
    quantize_kernel<MlaLayoutId::fp8_nope_block_scale_bf16_rope><<<grid, kThreads, 0, st>>>(c, x, slot_mapping, num_tokens, cache);
  else
    quantize_kernel<MlaLayoutId::model1_fp8_sparse><<<grid, kThreads, 0, st>>>(c, x, slot_mapping, num_tokens, cache);
  return launched();
}

std::string mla_dequantize(const MlaCacheShape& c, const std::uint8_t* cache, float k_scale, DType output, void* y,
                           void* stream) {
  if (auto e = validate_dequantize(c, k_scale); !e.empty()) return e;
  if (c.slots() == 0) return {};
  const auto st = static_cast<cudaStream_t>(stream);
  const int grid = grid_of(c.slots() * mla_dequantize_pieces(c.desc()));
  switch (c.layout) {
    case MlaLayoutId::bf16: dequantize_kernel<MlaLayoutId::bf16><<<grid, kThreads, 0, st>>>(c, cache, k_scale, output, y); break;
    case MlaLayoutId::fp8_nope_fp8_rope:
      dequantize_kernel<MlaLayoutId::fp8_nope_fp8_rope><<<grid, kThreads, 0, st>>>(c, cache, k_scale, output, y);
      break;
    case MlaLayoutId::fp8_nope_block_scale_bf16_rope:
      dequantize_kernel<MlaLayoutId::fp8_nope_block_scale_bf16_rope><<<grid, kThreads, 0, st>>>(c, cache, k_scale, output, y);
      break;
    case MlaLayoutId::model1_fp8_sparse:
      dequantize_kernel<MlaLayoutId::model1_fp8_sparse><<<grid, kThreads, 0, st>>>(c, cache, k_scale, output, y);
      break;
  }
  return launched();
}

std::string nvfp4_paged_to_workspace(const WorkspaceBatch& w, const std::uint8_t* cache, const std::int32_t* block_tables,
                                     const std::int32_t* cu_seq_lens, float factor_k, float factor_v,
                                     std::uint8_t* k_out, std::uint8_t* v_out, void* stream) {
  if (auto e = validate(w, factor_k, factor_v); !e.empty()) return e;
  if (w.items() == 0) return {};
  workspace_kernel<<<grid_of(w.items()), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      w, cache, block_tables, cu_seq_lens, factor_k, factor_v, k_out, v_out);
  return launched();
}

}  // namespace device
}  // namespace kvq::kernels
