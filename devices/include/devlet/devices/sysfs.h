// File: devlet/devices/sysfs.h
//
// The file-system seam between devlet and the kernel's sysfs. Every read and write that discovery,
// preparation and health make goes through a Sysfs, with paths relative to the sysfs root (the
// directory that plays `/sys`):
//
//   std::unique_ptr<Sysfs> sysfs = NewRealSysfs("/sys");  // or --sysfs-root DIR
//   DEVLET_ASSIGN_OR_RETURN(std::string vendor, sysfs->ReadFile("bus/pci/devices/0000:17:00.0/vendor"));
//
// Tests substitute a fake kernel (devlet/devices/testing/fake_sysfs.h) that reacts to writes the way
// the kernel does (unbind removes the `driver` link, `sriov_numvfs` creates VFs, ...).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace devlet::devices {

// Sysfs reads and writes files below a sysfs root. Paths are relative to that root and must not
// escape it ("..", absolute paths are rejected). Implementations are safe for concurrent readers;
// writers are serialised by the caller (preparation takes a per-device lock).
class Sysfs {
 public:
  virtual ~Sysfs() = default;

  // Root returns the directory that plays `/sys` (for messages and for building real paths).
  virtual std::string Root() const = 0;

  // ReadFile returns the whole content of a file (attribute files end with a newline; callers trim).
  virtual absl::StatusOr<std::string> ReadFile(std::string_view path) const = 0;

  // WriteFile writes `value` to an existing attribute file in one write(2), like `echo value > f`.
  // The kernel's error (EBUSY, EINVAL, ENODEV, ...) comes back as the status.
  virtual absl::Status WriteFile(std::string_view path, std::string_view value) = 0;

  // Exists says whether the path exists (following symbolic links).
  virtual bool Exists(std::string_view path) const = 0;

  // ReadLink returns the target of a symbolic link as stored (usually relative, "../../...").
  virtual absl::StatusOr<std::string> ReadLink(std::string_view path) const = 0;

  // RealPath resolves every symbolic link and returns the result relative to the root, e.g.
  // "devices/pci0000:16/0000:16:01.0/0000:17:00.0" for "bus/pci/devices/0000:17:00.0".
  virtual absl::StatusOr<std::string> RealPath(std::string_view path) const = 0;

  // ListDir returns the names in a directory, sorted; NotFound when it does not exist.
  virtual absl::StatusOr<std::vector<std::string>> ListDir(std::string_view path) const = 0;
};

// NewRealSysfs returns a Sysfs over the real file system below `root` ("/sys" on a node, a fixture
// tree in tests and simulated machines).
std::unique_ptr<Sysfs> NewRealSysfs(std::string root);

// ReadTrimmed reads a file and strips surrounding whitespace.
absl::StatusOr<std::string> ReadTrimmed(const Sysfs& sysfs, std::string_view path);

// ReadInt reads a decimal (or 0x-prefixed hexadecimal) integer file such as `numa_node` or `vendor`.
absl::StatusOr<long long> ReadInt(const Sysfs& sysfs, std::string_view path);

// LinkBaseName returns the last component of a symbolic link's target (the bound driver's name for
// `.../driver`, the group number for `.../iommu_group`); NotFound when the link is absent.
absl::StatusOr<std::string> LinkBaseName(const Sysfs& sysfs, std::string_view path);

// NvidiaInfo is what NVIDIA's driver tells about one GPU in
// `<proc>/driver/nvidia/gpus/<bdf>/information` ("GPU UUID:" and "Device Minor:" lines).
struct NvidiaInfo {
  std::string uuid;
  std::optional<int> minor;
};

// ReadNvidiaInfo reads it through a Sysfs rooted at `/proc`; empty when absent.
NvidiaInfo ReadNvidiaInfo(const Sysfs& procfs, std::string_view pci_address);

}  // namespace devlet::devices
