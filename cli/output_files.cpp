#include "cli/output_files.hpp"

#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace kvq::cli {

OutputFiles::~OutputFiles() {
  if (committed_) return;
  std::error_code ec;
  for (const auto& [final_path, temporary] : files_) std::filesystem::remove(temporary, ec);
  for (auto it = made_.rbegin(); it != made_.rend(); ++it) std::filesystem::remove(*it, ec);  // only if empty
}

std::string OutputFiles::folder(const std::string& path) {
  std::vector<std::string> missing;
  std::error_code ec;
  for (std::filesystem::path p = std::filesystem::absolute(path, ec); !p.empty() && !std::filesystem::exists(p, ec);
       p = p.parent_path()) {
    missing.push_back(p.string());
    if (p == p.parent_path()) break;
  }
  std::filesystem::create_directories(path, ec);
  if (ec || !std::filesystem::is_directory(path, ec)) return "cannot create the folder " + path;
  made_.insert(made_.end(), missing.rbegin(), missing.rend());
  return {};
}

std::string OutputFiles::stage(const std::string& path) {
  const std::string temporary = path + ".kvq-partial-" + std::to_string(::getpid());
  files_.emplace_back(path, temporary);
  return temporary;
}

std::string OutputFiles::commit() {
  std::error_code ec;
  for (const auto& [final_path, temporary] : files_) {
    std::filesystem::rename(temporary, final_path, ec);
    if (ec) return "cannot write " + final_path + " (" + ec.message() + ")";
  }
  committed_ = true;
  return {};
}

std::string write_file(const std::string& path, std::string_view bytes) {
  std::ofstream out(path, std::ios::binary);
  if (!out) return "cannot write " + path;
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.close();
  return out.fail() ? "cannot write " + path : std::string();
}

}  // namespace kvq::cli
