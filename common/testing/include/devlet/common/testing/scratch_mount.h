// File: devlet/common/testing/scratch_mount.h
//
// Real file-system faults for tests (disk full, read-only file system), next to the AtomicWriteOps
// seam that injects them one step at a time:
//
//   ScratchMount full;
//   if (absl::Status s = full.Tmpfs(dir, 64 << 10); !s.ok()) GTEST_SKIP() << s;
//   ScratchMount ro;
//   if (absl::Status s = ro.ReadOnlyBind(dir); !s.ok()) GTEST_SKIP() << s;
//
// Mounting needs root (CAP_SYS_ADMIN); elsewhere the calls fail with a message saying so and the
// test skips. The mount is detached when the object goes out of scope (or Unmount is called).
#pragma once

#include <sys/mount.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <string>

#include "absl/status/status.h"
#include "devlet/common/status.h"

namespace devlet::testing {

class ScratchMount {
 public:
  ScratchMount() = default;
  ScratchMount(const ScratchMount&) = delete;
  ScratchMount& operator=(const ScratchMount&) = delete;

  ~ScratchMount() { Unmount(); }

  // Tmpfs mounts a tmpfs of `bytes` on the existing directory `dir` (hiding what is in it).
  absl::Status Tmpfs(const std::string& dir, std::size_t bytes) {
    if (absl::Status s = NeedRoot("mount a size-limited tmpfs"); !s.ok())
      return s;
    const std::string options = "size=" + std::to_string(bytes) + ",mode=0755";
    if (::mount("tmpfs", dir.c_str(), "tmpfs", MS_NOSUID | MS_NODEV, options.c_str()) != 0) {
      return ErrnoToStatus(errno, "mount a tmpfs on " + dir);
    }
    dir_ = dir;
    return absl::OkStatus();
  }

  // ReadOnlyBind makes the existing directory `dir` read-only: a bind mount onto itself,
  // remounted read-only (its files stay readable).
  absl::Status ReadOnlyBind(const std::string& dir) {
    if (absl::Status s = NeedRoot("bind-mount a directory read-only"); !s.ok())
      return s;
    if (::mount(dir.c_str(), dir.c_str(), nullptr, MS_BIND, nullptr) != 0) {
      return ErrnoToStatus(errno, "bind-mount " + dir);
    }
    dir_ = dir;
    if (::mount(nullptr, dir.c_str(), nullptr, MS_REMOUNT | MS_BIND | MS_RDONLY, nullptr) != 0) {
      return ErrnoToStatus(errno, "remount " + dir + " read-only");
    }
    return absl::OkStatus();
  }

  // Unmount detaches the mount (the fault goes away); a no-op when nothing is mounted.
  void Unmount() {
    if (!dir_.empty())
      ::umount2(dir_.c_str(), MNT_DETACH);
    dir_.clear();
  }

 private:
  static absl::Status NeedRoot(const std::string& what) {
    if (::geteuid() == 0)
      return absl::OkStatus();
    return absl::FailedPreconditionError("skipped: needs root to " + what + " (euid " +
                                         std::to_string(::geteuid()) +
                                         "); the injected-fault tests cover the same steps");
  }

  std::string dir_;
};

}  // namespace devlet::testing
