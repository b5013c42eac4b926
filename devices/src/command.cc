// Boost.Process (v1) stays in this file: it is heavy to compile and must not leak into headers.
#include "devlet/devices/command.h"

#include <fcntl.h>
#include <linux/close_range.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <seccomp.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/process/args.hpp>
#include <boost/process/child.hpp>
#include <boost/process/env.hpp>
#include <boost/process/environment.hpp>
#include <boost/process/exe.hpp>
#include <boost/process/extend.hpp>
#include <boost/process/io.hpp>
#include <boost/process/pipe.hpp>
#include <boost/process/start_dir.hpp>
#include <cerrno>
#include <cstring>
#include <system_error>

#include "devlet/common/status.h"

namespace devlet::devices {
namespace {

namespace bp = boost::process;

// Builds the BPF program in the parent (libseccomp allocates; the child must only install it).
absl::StatusOr<std::vector<sock_filter>> CompileFilter(const SeccompPolicy& policy) {
  scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
  if (ctx == nullptr) return Internal("seccomp_init failed");
  struct Release {
    scmp_filter_ctx ctx;
    ~Release() { seccomp_release(ctx); }
  } release{ctx};
  // no_new_privs is set by the child itself, before installing the filter.
  seccomp_attr_set(ctx, SCMP_FLTATR_CTL_NNP, 0);
  for (const std::string& name : policy.denied_syscalls) {
    int nr = seccomp_syscall_resolve_name(name.c_str());
    if (nr == __NR_SCMP_ERROR) {
      return InvalidArgument("seccomp policy: unknown system call \"" + name + "\"");
    }
    int rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), nr, 0);
    if (rc < 0) return ErrnoToStatus(-rc, "seccomp policy: denying " + name);
  }
  int fd = memfd_create("devlet-seccomp", MFD_CLOEXEC);
  if (fd < 0) return ErrnoToStatus(errno, "memfd_create");
  int rc = seccomp_export_bpf(ctx, fd);
  if (rc < 0) {
    ::close(fd);
    return ErrnoToStatus(-rc, "exporting the seccomp filter");
  }
  off_t size = lseek(fd, 0, SEEK_END);
  lseek(fd, 0, SEEK_SET);
  std::vector<sock_filter> program(static_cast<size_t>(size) / sizeof(sock_filter));
  ssize_t n = ::read(fd, program.data(), program.size() * sizeof(sock_filter));
  ::close(fd);
  if (n != static_cast<ssize_t>(program.size() * sizeof(sock_filter)) || program.empty()) {
    return Internal("reading the exported seccomp filter");
  }
  return program;
}

// Reads what is available on `fd` into `out` (capped); returns false at EOF or error.
bool Drain(int fd, std::string& out, size_t cap, bool& truncated) {
  char buffer[8192];
  ssize_t n = ::read(fd, buffer, sizeof(buffer));
  if (n < 0) return errno == EINTR || errno == EAGAIN;
  if (n == 0) return false;
  size_t room = out.size() < cap ? cap - out.size() : 0;
  if (static_cast<size_t>(n) > room) truncated = true;
  out.append(buffer, std::min(room, static_cast<size_t>(n)));
  return true;
}

std::string Tail(const std::string& text, size_t max) {
  std::string t = text;
  while (!t.empty() && (t.back() == '\n' || t.back() == ' ')) t.pop_back();
  if (t.size() > max) t = "..." + t.substr(t.size() - max);
  return t;
}

}  // namespace

std::vector<std::string> DefaultDeniedSyscalls() {
  return {"ptrace",        "process_vm_readv", "process_vm_writev", "kexec_load",
          "kexec_file_load", "init_module",    "finit_module",      "delete_module",
          "mount",         "umount2",          "pivot_root",        "setns",
          "unshare",       "bpf",              "perf_event_open",   "keyctl",
          "add_key",       "request_key",      "reboot",            "swapon",
          "swapoff",       "settimeofday",     "clock_settime",     "acct",
          "userfaultfd",   "open_by_handle_at"};
}

absl::Status CommandResult::ToStatus(const std::string& program) const {
  if (ok()) return absl::OkStatus();
  std::string how;
  if (timed_out) {
    how = "did not finish within " + std::to_string(duration.count()) + " ms and was killed";
  } else if (term_signal != 0) {
    how = std::string("was killed by signal ") + strsignal(term_signal);
  } else {
    how = "exited with status " + std::to_string(exit_code);
  }
  std::string output = Tail(stderr_text.empty() ? stdout_text : stderr_text, 400);
  std::string message = program + " " + how;
  if (!output.empty()) message += ": " + output;
  return timed_out ? DeadlineExceeded(message) : FailedPrecondition(message);
}

absl::StatusOr<CommandResult> RunCommand(const CommandSpec& spec) {
  if (spec.argv.empty() || spec.argv.front().empty() || spec.argv.front()[0] != '/') {
    return InvalidArgument("command must start with an absolute program path");
  }
  const std::string& program = spec.argv.front();
  std::vector<sock_filter> filter;
  if (spec.seccomp.enabled) {
    DEVLET_ASSIGN_OR_RETURN(filter, CompileFilter(spec.seccomp));
  }
  sock_fprog fprog{};
  fprog.len = static_cast<unsigned short>(filter.size());
  fprog.filter = filter.data();
  const bool use_filter = spec.seccomp.enabled;

  bp::environment env;
  env["PATH"] = "/usr/sbin:/usr/bin:/sbin:/bin";
  for (const auto& [key, value] : spec.env) env[key] = value;
  std::vector<std::string> args(spec.argv.begin() + 1, spec.argv.end());

  bp::pipe out_pipe;
  bp::pipe err_pipe;
  std::error_code ec;
  const auto start = std::chrono::steady_clock::now();
  // Runs in the child after fork, after the pipes were dup'ed onto 0-2, right before exec: only
  // async-signal-safe calls here.
  //
  // Inherited fds: every fd above 2 is marked close-on-exec (close_range, with a loop as fallback
  // for kernels before 5.11). bp::limit_handles is not used: in Boost 1.74 the pipe redirections
  // do not declare their fds to it, so it closes the child's stdout/stderr.
  auto confine = [&](auto& exec) {
    ::setpgid(0, 0);
    if (::syscall(SYS_close_range, 3u, ~0u, CLOSE_RANGE_CLOEXEC) != 0) {
      for (int fd = 3; fd < 65536; ++fd) ::fcntl(fd, F_SETFD, FD_CLOEXEC);
    }
    if (!use_filter) return;
    if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
      exec.set_error(std::error_code(errno, std::system_category()), "prctl(PR_SET_NO_NEW_PRIVS)");
      return;
    }
    if (::syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &fprog) != 0) {
      exec.set_error(std::error_code(errno, std::system_category()), "installing seccomp filter");
    }
  };
  bp::child child(bp::exe = program, bp::args = args, bp::env = env, bp::start_dir = "/",
                  bp::std_in.close(), bp::std_out > out_pipe, bp::std_err > err_pipe,
                  bp::extend::on_exec_setup = confine, ec);
  if (ec) {
    return FailedPrecondition("starting " + program + ": " + ec.message());
  }
  const pid_t pid = child.id();
  CommandResult result;
  const int out_fd = out_pipe.native_source();
  const int err_fd = err_pipe.native_source();
  bool out_open = true;
  bool err_open = true;
  bool exited = false;
  const auto deadline = start + spec.timeout;
  while (true) {
    pollfd fds[2];
    nfds_t count = 0;
    if (out_open) fds[count++] = {out_fd, POLLIN, 0};
    if (err_open) fds[count++] = {err_fd, POLLIN, 0};
    if (count > 0) {
      ::poll(fds, count, 10);
      for (nfds_t i = 0; i < count; ++i) {
        if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
        if (fds[i].fd == out_fd) {
          out_open = Drain(out_fd, result.stdout_text, spec.max_output_bytes, result.output_truncated);
        } else {
          err_open = Drain(err_fd, result.stderr_text, spec.max_output_bytes, result.output_truncated);
        }
      }
    } else {
      ::usleep(10000);
    }
    std::error_code running_ec;
    if (!child.running(running_ec)) {
      exited = true;
      break;
    }
    if (std::chrono::steady_clock::now() >= deadline) break;
  }
  if (!exited) {
    ::kill(-pid, SIGKILL);  // the whole process group: grandchildren too
    ::kill(pid, SIGKILL);
    std::error_code wait_ec;
    child.wait(wait_ec);
    result.timed_out = true;
  } else {
    ::kill(-pid, SIGKILL);  // leftovers of the group must not outlive the command
  }
  // Collect what is still buffered; never wait for an EOF a leftover process could delay.
  for (int fd : {out_fd, err_fd}) {
    ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
    std::string& out = fd == out_fd ? result.stdout_text : result.stderr_text;
    char buffer[8192];
    while (true) {
      ssize_t n = ::read(fd, buffer, sizeof(buffer));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      size_t room = out.size() < spec.max_output_bytes ? spec.max_output_bytes - out.size() : 0;
      if (static_cast<size_t>(n) > room) result.output_truncated = true;
      out.append(buffer, std::min(room, static_cast<size_t>(n)));
    }
  }
  const int status = child.native_exit_code();
  if (WIFSIGNALED(status)) {
    result.term_signal = WTERMSIG(status);
  } else if (WIFEXITED(status)) {
    result.exit_code = WEXITSTATUS(status);
  }
  result.duration = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::steady_clock::now() - start);
  return result;
}

}  // namespace devlet::devices
