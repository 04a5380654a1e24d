// Built without CUDA: the paged store's GPU entry point says so (GPU properties count a skip).
#include "kernels/paged_store.hpp"

namespace kvq::kernels::device {

Status paged_store(const PagedStoreShape&, const PagedScales&, const PagedStoreArgs&, void*) {
  return "kvq was built without CUDA (nvcc not found or KVQ_CUDA=OFF)";
}

}  // namespace kvq::kernels::device
