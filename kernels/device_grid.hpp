// The grid size override of the device kernels' launches (launch::grid_for, kernels/device_launch.cuh;
// docs/performance.md "Grids"), for the properties.
#pragma once

namespace kvq::kernels::device {

// While an instance lives, every kernel launched from this host thread takes at most
// `blocks_per_sm` thread blocks an SM instead of its launch's own cap, so that a problem of any
// size has threads take several items: the properties' `-large` cases check the grid-stride loops
// with it (most launches run one item a thread on the sizes those cases can afford).
class GridCapOverride {
 public:
  explicit GridCapOverride(int blocks_per_sm);
  ~GridCapOverride();
  GridCapOverride(const GridCapOverride&) = delete;
  GridCapOverride& operator=(const GridCapOverride&) = delete;

 private:
  int previous_;
};

// The override's blocks an SM on this host thread, 0 where none is set.
int grid_cap_override();

}  // namespace kvq::kernels::device
