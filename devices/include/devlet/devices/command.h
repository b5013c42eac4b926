// File: devlet/devices/command.h
//
// Runs administrator-defined helper commands (device init/cleanup from the profile configuration,
// never from a claim) confined and bounded:
//
//   - no shell: argv[0] is an absolute path, executed directly;
//   - a clean environment (PATH plus what the caller passes), working directory "/";
//   - stdin closed; stdout and stderr captured concurrently, each capped;
//   - only fds 0-2 inherited (everything else is closed in the child);
//   - a libseccomp filter (deny-list, EPERM) and no_new_privs applied in the child before exec;
//   - its own process group, killed with SIGKILL when the timeout passes (our own polling, never
//     Boost's wait_for).
//
//   CommandSpec spec{.argv = {"/usr/bin/nvidia-smi", "-r"}, .timeout = std::chrono::seconds(30)};
//   DEVLET_ASSIGN_OR_RETURN(CommandResult result, RunCommand(spec));
//   DEVLET_RETURN_IF_ERROR(result.ToStatus());
#pragma once

#include <chrono>
#include <cstddef>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace devlet::devices {

// DefaultDeniedSyscalls is what helper commands may not do: ptrace and cross-process memory access,
// kernel module and kexec loading, mounts and namespace changes, bpf, perf, keyrings, reboot, swap,
// clock setting.
std::vector<std::string> DefaultDeniedSyscalls();

// SeccompPolicy is the child's filter: every listed syscall fails with EPERM, the rest is allowed;
// syscalls of a foreign architecture kill the process.
struct SeccompPolicy {
  bool enabled = true;
  std::vector<std::string> denied_syscalls = DefaultDeniedSyscalls();
};

// CommandSpec is one command to run.
struct CommandSpec {
  std::vector<std::string> argv;  // argv[0]: absolute path of the program
  std::map<std::string, std::string> env;  // added to PATH=/usr/sbin:/usr/bin:/sbin:/bin
  std::chrono::milliseconds timeout{30000};
  std::size_t max_output_bytes = 64 * 1024;  // per stream; the rest is read and dropped
  SeccompPolicy seccomp;
};

// CommandResult is how the command ended.
struct CommandResult {
  int exit_code = -1;     // when it exited normally
  int term_signal = 0;    // when a signal ended it (SIGKILL after a timeout)
  bool timed_out = false;
  std::string stdout_text;
  std::string stderr_text;
  bool output_truncated = false;
  std::chrono::milliseconds duration{0};

  bool ok() const { return !timed_out && term_signal == 0 && exit_code == 0; }
  // ToStatus is OK for a zero exit, otherwise an error naming the program, how it ended and the
  // tail of its stderr (or stdout), for pod events.
  absl::Status ToStatus(const std::string& program) const;
};

// RunCommand runs the command to completion or timeout. It fails only when the command could not
// be started (bad path, unknown syscall name in the policy, fork/exec failure); a non-zero exit or a
// timeout is reported in the result.
absl::StatusOr<CommandResult> RunCommand(const CommandSpec& spec);

}  // namespace devlet::devices
