// Shared helpers for dra-kubelet tests.
#pragma once

#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "devlet/common/status.h"
#include "devlet/dra_kubelet/interfaces.h"

namespace devlet::dra_kubelet::testing {

// TempDir is a directory removed with its content at scope exit.
class TempDir {
 public:
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "dra-kubelet-XXXXXX").string();
    path_ = ::mkdtemp(pattern.data());
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  [[nodiscard]] const std::string& path() const { return path_; }

 private:
  std::string path_;
};

inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

inline void WriteFile(const std::string& path, const std::string& content) {
  std::ofstream out(path, std::ios::trunc);
  out << content;
}

// FakeClaimSource serves claims from memory.
class FakeClaimSource final : public ClaimSource {
 public:
  void Add(const ResourceClaim& claim) { claims_[claim.namespace_name + "/" + claim.name] = claim; }
  void Remove(const std::string& ns, const std::string& name) { claims_.erase(ns + "/" + name); }
  absl::StatusOr<ResourceClaim> GetClaim(const std::string& ns, const std::string& name,
                                         const std::string&) override {
    auto it = claims_.find(ns + "/" + name);
    if (it == claims_.end()) return NotFound("ResourceClaim " + ns + "/" + name + " not found");
    return it->second;
  }

 private:
  std::map<std::string, ResourceClaim> claims_;
};

}  // namespace devlet::dra_kubelet::testing
