#include "kernels/device_grid.hpp"

namespace kvq::kernels::device {
namespace {
thread_local int override_blocks_per_sm = 0;
}

GridCapOverride::GridCapOverride(int blocks_per_sm) : previous_(override_blocks_per_sm) {
  override_blocks_per_sm = blocks_per_sm > 0 ? blocks_per_sm : 0;
}
GridCapOverride::~GridCapOverride() { override_blocks_per_sm = previous_; }

int grid_cap_override() { return override_blocks_per_sm; }

}  // namespace kvq::kernels::device
