// A port's tensors on disk: a JSON manifest naming roles, .npy or .safetensors files
// (docs/ports.md "Manifest"). Read into ports::PortData for kvq verify / kvq identify.
#pragma once

#include <string>

#include "oracle/verify.hpp"

namespace kvq::cli {

struct PortFiles {
  std::string inputs, outputs;  // directories: x (and a given global scale) / what the port wrote
  std::string manifest;         // empty: OUTPUTS/manifest.json, else INPUTS/manifest.json
};

struct LoadedPort {
  ports::PortData data;
  std::string recipe;    // the manifest's "recipe", if any
  std::string manifest;  // the path read
};

// "" on success, else a message naming the file and the role.
std::string load_port(const PortFiles& files, LoadedPort* out);

}  // namespace kvq::cli
