// The paged store kernel template and its fixed configurations (nvcc only), shared by
// kernels/paged_store_device.cu (the launcher and the generic kernels) and the fixed
// configurations' translation units generated from kernels/paged_store_fixed.cu.in, one kernel each.
//
// Why the NVFP4 kernels are built this way (nvcc 12, -O2; measured with -ptx and -Xptxas -v):
// nvcc inlined quantize_block_packed (formats/packed_quantize.hpp) into a kernel only when both
// (1) the recipe is a compile-time constant it can read through the reference (kFixedRecipe, in
// __constant__ memory; a recipe in a local struct is not folded when inlining is weighed) and
// (2) the call is the only call of that function in the unit. Otherwise the function stays out
// of line, compiled for every recipe: 106 registers, a 192-byte stack frame, and ptxas took
// over 5 minutes on a unit holding the ten fixed NVFP4 kernels. One kernel a unit, inlined:
// 40 registers, no stack, under 4 seconds.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "formats/recipe_names.hpp"
#include "kernels/async_copy.cuh"
#include "kernels/code_table.cuh"
#include "kernels/paged_store.hpp"
#include "paged_store_fixed_recipes.inc"  // generated: #define KVQ_PAGED_FIXED(X) X(0, "nvfp4") ...

namespace kvq::kernels::paged_kernel {

// The fixed configurations: named recipes (formats/recipe_names.hpp) listed once, in
// KVQ_PAGED_FIXED_RECIPES and KVQ_PAGED_VARIANT_RECIPES (kernels/CMakeLists.txt), which also
// generate their translation units, one per configuration and 16-bit input type
// (kernels/paged_store_fixed.cu.in). The first list's run their recipe with the reference
// arithmetic (with_reference_arithmetic; for nvfp4-torchao, torchao's form with IEEE division and
// the satfinite cast), nearest-even elements and the approx_ftz reciprocal; the second list's
// (from KVQ_PAGED_FIRST_VARIANT on) run their engine variant exactly: NVFP4 through the packed
// variant route (formats/packed_quantize.hpp has_packed_variant_form) or the four-over-six
// package's usual block (has_packed_four_over_six_amax_form), per-tensor E4M3 through
// tensor_code_words on the variant's recipe as a constant. Other engine variants run the generic kernel.
constexpr int kGeneric = -1;
#define KVQ_PAGED_FIXED_NAME(i, name) name,
inline constexpr std::string_view kFixedNames[] = {KVQ_PAGED_FIXED(KVQ_PAGED_FIXED_NAME)};
#undef KVQ_PAGED_FIXED_NAME
constexpr int kFixedCount = sizeof(kFixedNames) / sizeof(kFixedNames[0]);
template <int C>
constexpr bool kVariantOf = C >= KVQ_PAGED_FIRST_VARIANT;

// Fixed configuration C as a whole recipe: its named recipe (with the reference arithmetic, but
// for an engine variant's configuration), 16 elements a block (the paged chunk).
template <int C>
constexpr Recipe fixed_recipe() {
  constexpr std::optional<NamedRecipe> named = recipe_from_name(kFixedNames[C]);
  static_assert(named.has_value(), "KVQ_PAGED_FIXED_RECIPES names a recipe of formats/recipe_names.hpp");
  static_assert(!kVariantOf<C> || has_packed_variant_form(named->recipe) ||
                    has_packed_four_over_six_amax_form(named->recipe) ||
                    (named->recipe.element == FormatId::e4m3fn && named->recipe.scale == BlockScale::tensor_only),
                "KVQ_PAGED_VARIANT_RECIPES names NVFP4 engine variants with a packed form, or per-tensor E4M3 ones");
  Recipe r = kVariantOf<C> ? named->recipe : with_reference_arithmetic(named->recipe);
  r.block = kPagedChunk;
  return r;
}
template <int C>
constexpr PagedFormat kFixedFormat = fixed_recipe<C>().element == FormatId::e2m1 ? PagedFormat::nvfp4 : PagedFormat::fp8;

// Whether fixed configuration C computes what the runtime recipe r computes in paged_store_item
// (the fields that code reads: for FP8, tensor_only reads apply, the rounding, the BF16 input flag).
template <int C>
constexpr bool matches(const Recipe& r) {
  constexpr Recipe c = fixed_recipe<C>();
  static_assert(c.element_rounding == Rounding::nearest_even && c.reciprocal == Reciprocal::approx_ftz &&
                    (c.element == FormatId::e2m1 ? c.scale == BlockScale::e4m3_two_level
                                                 : c.element == FormatId::e4m3fn && c.scale == BlockScale::tensor_only),
                "a fixed paged configuration is an NVFP4 or per-tensor E4M3 recipe, nearest-even, approx_ftz");
  if constexpr (kVariantOf<C>) {  // the variant exactly, whatever its (unused) block and decode fields
    Recipe quantized = r;
    quantized.block = c.block;
    quantized.dequantize_unsigned_zero = c.dequantize_unsigned_zero;
    return quantized == c;
  }
  if (c.element != r.element || c.apply != r.apply || r.element_rounding != Rounding::nearest_even ||
      is_engine_variant(r))
    return false;
  if (c.element == FormatId::e4m3fn) return true;
  return c.two_level == r.two_level && c.zero_guard == r.zero_guard && c.clamp_block_scale == r.clamp_block_scale &&
         r.reciprocal == Reciprocal::approx_ftz;
}
// Every listed recipe reaches a fixed kernel: some configuration matches it (a configuration its
// recipe does not match would leave it on the generic kernel, the same bytes at a fraction of the
// speed, which no property sees).
template <std::size_t... J>
constexpr bool some_configuration_matches(const Recipe& r, std::index_sequence<J...>) {
  return (matches<static_cast<int>(J)>(r) || ...);
}
template <std::size_t... I>
constexpr bool listed_recipes_reach_fixed_kernels(std::index_sequence<I...> configurations) {
  return (some_configuration_matches(recipe_from_name(kFixedNames[I])->recipe, configurations) && ...);
}
static_assert(listed_recipes_reach_fixed_kernels(std::make_index_sequence<kFixedCount>{}),
              "a KVQ_PAGED_*_RECIPES recipe that no fixed paged configuration matches");

// In constant memory, read through a reference nvcc folds: every recipe branch is decided at
// compile time (condition (1) above).
template <int C>
__constant__ constexpr Recipe kFixedRecipe = fixed_recipe<C>();

template <PagedFormat F, DType T>
__device__ inline PagedStoreShape specialise(PagedStoreShape s) {
  s.input = T;
  s.layout.format = F;
  s.recipe.element = F == PagedFormat::fp8 ? FormatId::e4m3fn : FormatId::e2m1;
  s.recipe.scale = F == PagedFormat::fp8 ? BlockScale::tensor_only : BlockScale::e4m3_two_level;
  return s;
}

constexpr int kThreads = 128;
static_assert(kThreads >= kE4m3Codes, "a thread a table entry (kernels/code_table.cuh)");

// How a kernel walks its items: plain (paged_store_items_loop), aligned (the same loop where
// aligned_items holds: loads and stores without alignment tests; the 4over6 kernel) or staged
// (paged_store_staged_loop; the other fixed NVFP4 kernels, where staged_loads holds).
enum class PagedLoop : std::uint8_t { plain, aligned, staged };

// Items blockIdx.x * blockDim.x + threadIdx.x, then a grid's stride on (paged_store_item). The
// item index in 32 bits for 32-bit indices: paged_store_narrow's items (below 2^31) and a grid's
// stride (launch::grid_for as paged_store launches it: at most 256 blocks of 128 an SM, under 2^23
// threads up to 256 SMs) stay below 2^32.
template <int C, PagedFormat F, typename Index, bool kAligned>
__device__ __forceinline__ void paged_store_items_loop(const PagedStoreShape& s, const PagedScales& scales,
                                                       const PagedStoreArgs& args, const PagedDividers& d,
                                                       const PagedTerms& terms, std::int64_t items) {
  using Counter = std::conditional_t<sizeof(Index) == 4, std::uint32_t, std::int64_t>;
  const auto last = static_cast<Counter>(items);
  for (Counter item = blockIdx.x * static_cast<Counter>(blockDim.x) + threadIdx.x; item < last;
       item += static_cast<Counter>(gridDim.x) * blockDim.x) {
    if constexpr (C == kGeneric) {
      paged_store_item<Index, false>(s, s.recipe, scales, args, static_cast<Index>(item), d, terms);
    } else {
      paged_store_item<Index, F == PagedFormat::nvfp4, kAligned>(s, kFixedRecipe<C>, scales, args,
                                                                    static_cast<Index>(item), d, terms);
    }
  }
}

// The staged loop (fixed NVFP4 kernels, 16-bit input, staged_loads): each warp copies its next 32
// items' K and V chunks and their slot into shared memory by cp.async while it quantizes the
// current ones, so a whole item's work hides the loads' latency without registers holding them
// (holding the next item in registers spills). staged_loads asks that a token's
// heads * head_dim / 16 items be a multiple of 32: a warp's 32 items are then one token's
// neighbouring chunks, whose K (and V) values are 1024 contiguous bytes, copied 16 bytes a lane
// in two instructions a side (copies of a lane's own chunk, 16 bytes at a 32-byte lane stride,
// fetch every sector twice: docs/performance.md), with one slot. A lane then reads its own item's
// chunk.
namespace staged {
constexpr int kPieces = kPagedChunk * 2 / 16;  // a chunk of 16-bit values: two 16-byte pieces
constexpr int kWarps = kThreads / 32;
struct Stage {
  uint4 k[kThreads][kPieces], v[kThreads][kPieces];  // item threadIdx.x's chunks: its warp's in a row
  std::int64_t slot[kWarps];
};
using async_copy::commit;
using async_copy::copy16;
using async_copy::copy8;
__device__ inline void wait_all_but_newest() { async_copy::wait_groups<1>(); }

// A warp's place: its items' token and the first item's index within the token's row
// (head * chunks + chunk), stepped by the grid's stride without dividing.
struct WarpRow {
  std::uint32_t token, first;
};
// The copies of a warp's 32 items at row w into stage st: they complete by a later wait, and the
// other lanes read them after a __syncwarp.
__device__ inline void copy_row(const PagedStoreShape& s, const PagedStoreArgs& a, WarpRow w, Stage& st) {
  const unsigned lane = threadIdx.x % 32, warp_first = threadIdx.x - lane;
  const std::int64_t k = chunk_first(s, KvSide::k, w.token, 0u, w.first),
                     v = chunk_first(s, KvSide::v, w.token, 0u, w.first);
  uint4* k_pieces = &st.k[warp_first][0];
  uint4* v_pieces = &st.v[warp_first][0];
  KVQ_UNROLL
  for (unsigned half = 0; half < 2; ++half) {
    const unsigned piece = 32 * half + lane;  // 16-byte piece of the warp's 1024 bytes
    copy16(k_pieces + piece, static_cast<const std::uint16_t*>(a.key) + k + 8 * piece);
    copy16(v_pieces + piece, static_cast<const std::uint16_t*>(a.value) + v + 8 * piece);
  }
  if (lane == 0) copy8(&st.slot[warp_first / 32], a.slot_mapping + w.token);
}
// This thread's chunk of side K or V in a stage, as pair words.
__device__ inline void read_chunk(const uint4 (&pieces)[kPieces], ChunkValues* out) {
  KVQ_UNROLL
  for (int p = 0; p < kPieces; ++p) io::split_words(pieces[p], out->pairs + 4 * p);
}
}  // namespace staged

// The items of paged_store_items_loop, staged (staged_loads): the same work on the same values
// (store_item). Warp by warp: a warp's lanes iterate together (every item exists: a token has a
// multiple of 32).
template <int C>
__device__ __forceinline__ void paged_store_staged_loop(const PagedStoreShape& s, const PagedScales& scales,
                                                        const PagedStoreArgs& args, const PagedDividers& d,
                                                        const PagedTerms& terms) {
  __shared__ staged::Stage stages[2];
  const auto row_items = static_cast<std::uint32_t>(s.layout.heads * (s.layout.head_dim / kPagedChunk));
  const auto tokens = static_cast<std::uint32_t>(s.tokens);
  // The grid has fewer than 2^31 threads (paged_store caps it at 256 blocks an SM): the first
  // item and the stride divide in 32 bits, by the chunks and then the heads (row_items = heads *
  // chunks).
  const auto row_of = [&](std::uint32_t item) {
    std::uint32_t row, chunk, token, head;
    d.chunks.divide(item, &row, &chunk);
    d.heads.divide(row, &token, &head);
    return staged::WarpRow{token, head * d.chunks.divisor + chunk};
  };
  const staged::WarpRow stride_rows = row_of(gridDim.x * blockDim.x);
  const std::uint32_t stride_tokens = stride_rows.token, stride_rest = stride_rows.first;
  const auto step = [&](staged::WarpRow w) {
    w.token += stride_tokens, w.first += stride_rest;
    if (w.first >= row_items) w.first -= row_items, ++w.token;
    return w;
  };
  staged::WarpRow w = row_of(blockIdx.x * blockDim.x + (threadIdx.x - threadIdx.x % 32));
  if (w.token < tokens) staged::copy_row(s, args, w, stages[0]);
  staged::commit();
  for (int b = 0; w.token < tokens; b ^= 1) {  // tokens < 2^27 (items < 2^32, 32 or more a token): no wrap
    const staged::WarpRow next = step(w);
    __syncwarp();  // every lane has read stage b ^ 1 (the previous items) before it is copied over
    if (next.token < tokens) staged::copy_row(s, args, next, stages[b ^ 1]);
    staged::commit();
    staged::wait_all_but_newest();  // this thread's copies of stage b
    __syncwarp();                   // and every lane's
    const staged::Stage& st = stages[b];
    ChunkPlace<std::uint32_t> c;
    c.token = w.token;
    d.chunks.divide(w.first + threadIdx.x % 32, &c.head, &c.chunk);
    ChunkValues values;
    staged::read_chunk(st.k[threadIdx.x], &values);
    const auto load_v = [&](const ChunkPlace<std::uint32_t>&, ChunkValues* out) {
      staged::read_chunk(st.v[threadIdx.x], out);
    };
    store_item<std::uint32_t, true, false>(s, kFixedRecipe<C>, scales, args, c, st.slot[threadIdx.x / 32], values,
                                           load_v, d, terms);
    w = next;
  }
}

// The fixed NVFP4 kernels run quantize_block_packed; the generic ones quantize_block (the same
// bytes; with a runtime recipe the packed path would carry every recipe's code).
template <int C, PagedFormat F, DType T, typename Index, PagedLoop kLoop>
__device__ __forceinline__ void paged_store_body(const PagedStoreShape& shape, const PagedScales& scales,
                                                 const PagedStoreArgs& args, const PagedDividers& d,
                                                 const PagedReciprocals& reciprocals) {
  constexpr bool kStaged = kLoop == PagedLoop::staged, kAligned = kLoop == PagedLoop::aligned;
  static_assert(!kStaged || sizeof(Index) == 4, "the staged loop divides by the 32-bit dividers");
  const PagedStoreShape s = specialise<F, T>(shape);
  const std::int64_t items = paged_store_items(s);
  // NVFP4: the per-tensor scales' code tables once a thread block, from the reciprocals the host
  // computed (kernel parameters: computed here in registers, nvcc recomputed 1/g for every chunk;
  // one thread computing them for the block costs a second barrier; docs/performance.md).
  PagedTerms terms{};
  if constexpr (F == PagedFormat::nvfp4) {
    __shared__ CodeTerms shared_codes[2 * kE4m3Codes];  // K's table, then V's
    const Recipe* recipe = &s.recipe;
    if constexpr (C != kGeneric) recipe = &kFixedRecipe<C>;
    fill_code_table(*recipe, scales.k[0], reciprocals.k, shared_codes);
    fill_code_table(*recipe, scales.v[0], reciprocals.v, shared_codes + kE4m3Codes);
    __syncthreads();
    terms = reciprocals.with(shared_codes);
  }
  // Each loop is written out at its call (a shared lambda called from both places stayed out of
  // line: a 2832-byte stack frame in the 4over6 kernel).
  if constexpr (F == PagedFormat::nvfp4 && C != kGeneric) {
    if (terms.lean && !s.per_head_scales) {  // the usual scales: the loop sees them as constants
      PagedStoreShape lean_shape = s;
      lean_shape.per_head_scales = false;
      terms.lean = true;
      if constexpr (kStaged) {
        paged_store_staged_loop<C>(lean_shape, scales, args, d, terms);
      } else {
        paged_store_items_loop<C, F, Index, kAligned>(lean_shape, scales, args, d, terms, items);
      }
      return;
    }
  }
  if constexpr (kStaged) {
    paged_store_staged_loop<C>(s, scales, args, d, terms);
  } else {
    paged_store_items_loop<C, F, Index, kAligned>(s, scales, args, d, terms, items);
  }
}

template <int C, PagedFormat F, DType T, typename Index, PagedLoop kLoop>
__global__ void paged_store_kernel(PagedStoreShape shape, PagedScales scales, PagedStoreArgs args, PagedDividers d,
                                   PagedReciprocals reciprocals) {
  paged_store_body<C, F, T, Index, kLoop>(shape, scales, args, d, reciprocals);
}
// 4over6 with at least 7 thread blocks an SM: 72 registers and 16-32 bytes of stack, the fastest
// measured; (128, 8) spills 64-80 bytes and runs slower. The same bounds on every kernel raise the
// others' registers (nvfp4 40 -> 64) and slow them. Holding V, or the next item's chunks, in
// registers spills and runs slower; so do one rolled copy of the chunk code for K and V, and one
// resident wave of thread blocks (docs/performance.md).
template <int C, PagedFormat F, DType T, typename Index, PagedLoop kLoop>
__global__ void __launch_bounds__(kThreads, 7)
    paged_store_kernel_occupied(PagedStoreShape shape, PagedScales scales, PagedStoreArgs args, PagedDividers d,
                                PagedReciprocals reciprocals) {
  paged_store_body<C, F, T, Index, kLoop>(shape, scales, args, d, reciprocals);
}
// PyTorch's E4M3 cast (the non-saturating one) with at least 12 thread blocks an SM (at most 40
// registers): unbounded it took 42 for BF16 input (62.5% occupancy, its loads' latency showing)
// and 40 for FP16. The other FP8 kernels take 32-34 unbounded; the bound raises them to 40
// (docs/performance.md).
template <int C, PagedFormat F, DType T, typename Index, PagedLoop kLoop>
__global__ void __launch_bounds__(kThreads, 12)
    paged_store_kernel_dense(PagedStoreShape shape, PagedScales scales, PagedStoreArgs args, PagedDividers d,
                             PagedReciprocals reciprocals) {
  paged_store_body<C, F, T, Index, kLoop>(shape, scales, args, d, reciprocals);
}
template <int C, PagedFormat F>
constexpr bool kDenseOf = [] {
  if constexpr (C == kGeneric) {
    return false;
  } else {
    return F == PagedFormat::fp8 && fixed_recipe<C>().element_cast == ElementCast::nonsaturating;
  }
}();
template <int C>
constexpr bool kOccupiedOf = [] {
  if constexpr (C == kGeneric) {
    return false;
  } else {
    return fixed_recipe<C>().two_level == TwoLevel::four_over_six ||
           fixed_recipe<C>().two_level == TwoLevel::four_over_six_amax;
  }
}();
// The kernels with a staged form (paged_store_staged_loop), taken where staged_loads allows: the
// fixed NVFP4 ones but 4over6, whose chunks take about 460 instructions: it is issue-bound, and the
// staged copies add more instructions than the stalls they save (docs/performance.md).
template <int C, PagedFormat F>
constexpr bool kStagedOf = C != kGeneric && F == PagedFormat::nvfp4 && !kOccupiedOf<C>;

// Launches configuration C (kGeneric: the runtime recipe) of layout F for input T with index
// type Index. The fixed NVFP4 instantiations are explicit instantiations in their own units.
template <int C, PagedFormat F, DType T, typename Index>
cudaError_t launch_kernel(const PagedStoreShape& s, const PagedScales& scales, const PagedStoreArgs& a, const PagedDividers& d,
                   int grid, cudaStream_t stream) {
  const PagedReciprocals r = paged_reciprocals(scales);  // host: IEEE quotients, as the device's
  const auto launch = [&]<PagedLoop kLoop>() {
    if constexpr (kOccupiedOf<C>) {
      paged_store_kernel_occupied<C, F, T, Index, kLoop><<<grid, kThreads, 0, stream>>>(s, scales, a, d, r);
    } else if constexpr (kDenseOf<C, F>) {
      paged_store_kernel_dense<C, F, T, Index, kLoop><<<grid, kThreads, 0, stream>>>(s, scales, a, d, r);
    } else {
      paged_store_kernel<C, F, T, Index, kLoop><<<grid, kThreads, 0, stream>>>(s, scales, a, d, r);
    }
  };
  if constexpr (kStagedOf<C, F>) {
    if (staged_loads(s, a)) {
      launch.template operator()<PagedLoop::staged>();
      return cudaGetLastError();
    }
  }
  if constexpr (kOccupiedOf<C>) {
    if (aligned_items(s, a)) {
      launch.template operator()<PagedLoop::aligned>();
      return cudaGetLastError();
    }
  }
  launch.template operator()<PagedLoop::plain>();
  return cudaGetLastError();
}

}  // namespace kvq::kernels::paged_kernel
