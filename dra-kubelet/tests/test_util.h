// Shared helpers for dra-kubelet tests.
#pragma once

#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <cstdlib>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>
#include <string>

#include "devlet/common/status.h"
#include "devlet/dra_kubelet/devlet_adapters.h"
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

// OpenCheckpoint opens devlet-node's checkpoint store (state/) in `dir`, as the plugin's tests
// use it; a store that cannot be opened ends the test binary with the reason.
inline std::unique_ptr<StateClaimRecordStore> OpenCheckpoint(const std::string& dir,
                                                             const std::string& driver,
                                                             const std::string& cdi_root) {
  absl::StatusOr<std::unique_ptr<StateClaimRecordStore>> store =
      StateClaimRecordStore::Open(dir, driver, cdi_root);
  if (!store.ok()) {
    std::cerr << "cannot open the checkpoint in " << dir << ": " << store.status() << "\n";
    std::abort();
  }
  return *std::move(store);
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

// kTwoDriverClaimUid is the UID of the claim TwoDriverClaimYaml describes.
inline constexpr char kTwoDriverClaimUid[] = "0a5c2f0e-3b1d-4a8e-9c6f-1e2d3c4b5a61";

// TwoDriverClaimYaml is ResourceClaim default/c, reserved for pod p: request "gpu" allocated to
// `gpu_device` of our driver gpu.devlet.test, request "nic" to eth1 of another driver,
// nic.other.test, which has already written its Ready entry in status.devices (ours must stay
// beside it, untouched).
inline std::string TwoDriverClaimYaml(const std::string& gpu_device) {
  return R"(apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: c, namespace: default, uid: )" +
         std::string(kTwoDriverClaimUid) + R"(}
spec:
  devices:
    requests:
    - name: gpu
      exactly: {deviceClassName: gpu.devlet.test}
    - name: nic
      exactly: {deviceClassName: nic.other.test}
status:
  allocation:
    devices:
      results:
      - {request: gpu, driver: gpu.devlet.test, pool: node-1, device: )" +
         gpu_device + R"(}
      - {request: nic, driver: nic.other.test, pool: node-1, device: eth1}
  reservedFor:
  - {resource: pods, name: p, uid: pod-1}
  devices:
  - driver: nic.other.test
    pool: node-1
    device: eth1
    conditions:
    - {type: Ready, status: "True", reason: Up, message: "",
       lastTransitionTime: "2026-01-01T00:00:00Z"}
)";
}

}  // namespace devlet::dra_kubelet::testing
