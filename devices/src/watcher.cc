#include "devlet/devices/watcher.h"

#include <linux/netlink.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <set>

#include "devlet/common/status.h"

namespace devlet::devices {
namespace {

using Clock = std::chrono::steady_clock;

std::string Printable(std::string_view text) {
  std::string out;
  for (char c : text.substr(0, 64)) {
    out.push_back(c == '\0' ? ' ' : (static_cast<unsigned char>(c) < 0x20 ? '?' : c));
  }
  return out;
}

std::chrono::milliseconds Until(Clock::time_point when) {
  auto left = std::chrono::ceil<std::chrono::milliseconds>(when - Clock::now());
  return std::max(left, std::chrono::milliseconds(0));
}

// The netlink uevent socket. An eventfd lets Interrupt wake a blocked poll.
class NetlinkUeventSource final : public UeventSource {
 public:
  NetlinkUeventSource(int socket_fd, int event_fd) : socket_(socket_fd), wake_(event_fd) {}
  ~NetlinkUeventSource() override {
    ::close(socket_);
    ::close(wake_);
  }

  absl::StatusOr<std::optional<Uevent>> Next(std::chrono::milliseconds timeout) override {
    const auto deadline = Clock::now() + timeout;
    while (true) {
      pollfd fds[2] = {{.fd = socket_, .events = POLLIN, .revents = 0},
                       {.fd = wake_, .events = POLLIN, .revents = 0}};
      const int wait_ms = static_cast<int>(std::min<long long>(Until(deadline).count(), 1 << 30));
      int ready = ::poll(fds, 2, wait_ms);
      if (ready < 0) {
        if (errno == EINTR) continue;
        return ErrnoToStatus(errno, "waiting for kernel uevents");
      }
      if (ready == 0) return std::optional<Uevent>();
      if (fds[1].revents & POLLIN) {
        std::uint64_t count = 0;
        (void)!::read(wake_, &count, sizeof(count));
        return std::optional<Uevent>();
      }
      // uevent messages are at most a few KiB (UEVENT_BUFFER_SIZE is 2048 in the kernel).
      char buffer[8192];
      sockaddr_nl from{};
      iovec iov{.iov_base = buffer, .iov_len = sizeof(buffer)};
      msghdr message{};
      message.msg_name = &from;
      message.msg_namelen = sizeof(from);
      message.msg_iov = &iov;
      message.msg_iovlen = 1;
      ssize_t n = ::recvmsg(socket_, &message, MSG_DONTWAIT);
      if (n < 0) {
        if (errno == EINTR || errno == EAGAIN) continue;
        // The kernel dropped messages: rescan, since one of them may have mattered.
        if (errno == ENOBUFS) return std::optional<Uevent>(Uevent{.action = "overflow"});
        return ErrnoToStatus(errno, "receiving kernel uevents");
      }
      // Only the kernel (port id 0) speaks on this group; anything else could be spoofed.
      if (from.nl_pid != 0 || (message.msg_flags & MSG_TRUNC)) continue;
      absl::StatusOr<Uevent> event = ParseUevent(std::string_view(buffer, static_cast<size_t>(n)));
      if (event.ok()) return std::optional<Uevent>(*std::move(event));
      if (Clock::now() >= deadline) return std::optional<Uevent>();
    }
  }

  void Interrupt() override {
    std::uint64_t one = 1;
    (void)!::write(wake_, &one, sizeof(one));
  }

 private:
  int socket_;
  int wake_;
};

}  // namespace

absl::StatusOr<Uevent> ParseUevent(std::string_view datagram) {
  if (datagram.empty()) return InvalidArgument("uevent: the message is empty");
  if (datagram.size() >= 8 && datagram.substr(0, 8) == std::string_view("libudev\0", 8)) {
    return InvalidArgument("uevent: a udev re-broadcast (\"libudev\" header), not a kernel uevent");
  }
  std::vector<std::string_view> fields;
  size_t start = 0;
  while (start < datagram.size()) {
    size_t end = datagram.find('\0', start);
    if (end == std::string_view::npos) end = datagram.size();
    if (end > start) fields.push_back(datagram.substr(start, end - start));
    start = end + 1;
  }
  if (fields.empty()) return InvalidArgument("uevent: the message has only NUL bytes");
  const std::string_view header = fields.front();
  const size_t at = header.find('@');
  if (at == std::string_view::npos || at == 0) {
    return InvalidArgument("uevent: the header \"" + Printable(header) +
                           "\" is not ACTION@DEVPATH");
  }
  Uevent event;
  event.action = std::string(header.substr(0, at));
  event.devpath = std::string(header.substr(at + 1));
  if (event.devpath.empty() || event.devpath.front() != '/') {
    return InvalidArgument("uevent: the devpath \"" + Printable(event.devpath) +
                           "\" does not start with /");
  }
  for (size_t i = 1; i < fields.size(); ++i) {
    const std::string_view field = fields[i];
    const size_t eq = field.find('=');
    if (eq == std::string_view::npos || eq == 0) {
      return InvalidArgument("uevent " + event.action + "@" + event.devpath + ": field \"" +
                             Printable(field) + "\" is not KEY=VALUE");
    }
    event.env[std::string(field.substr(0, eq))] = std::string(field.substr(eq + 1));
  }
  const std::string what = "uevent " + event.action + "@" + event.devpath;
  if (auto it = event.env.find("ACTION"); it != event.env.end() && it->second != event.action) {
    return InvalidArgument(what + ": ACTION=" + it->second + " contradicts the header");
  }
  if (auto it = event.env.find("DEVPATH"); it != event.env.end() && it->second != event.devpath) {
    return InvalidArgument(what + ": DEVPATH=" + it->second + " contradicts the header");
  }
  if (auto it = event.env.find("SUBSYSTEM"); it != event.env.end()) event.subsystem = it->second;
  if (auto it = event.env.find("DRIVER"); it != event.env.end()) event.driver = it->second;
  if (auto it = event.env.find("SEQNUM"); it != event.env.end()) {
    const std::string& text = it->second;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), event.seqnum);
    if (ec != std::errc() || end != text.data() + text.size() || text.empty()) {
      return InvalidArgument(what + ": SEQNUM=\"" + Printable(text) + "\" is not a number");
    }
  }
  return event;
}

bool AffectsDevices(const Uevent& event) {
  if (event.action == "overflow") return true;  // lost events: assume the worst
  static const std::set<std::string, std::less<>> kInventoryActions = {"add", "remove", "bind",
                                                                       "unbind", "move"};
  static const std::set<std::string, std::less<>> kDeviceSubsystems = {
      "pci", "net", "infiniband", "infiniband_verbs", "drm", "mdev", "vfio", "vfio-dev"};
  if (kDeviceSubsystems.contains(event.subsystem)) {
    return kInventoryActions.contains(event.action);
  }
  // CPU and memory hot-plug change the CPU devices (cores and memory per NUMA node).
  if (event.subsystem == "cpu" || event.subsystem == "memory" || event.subsystem == "node") {
    return kInventoryActions.contains(event.action) || event.action == "online" ||
           event.action == "offline";
  }
  return false;
}

absl::StatusOr<std::unique_ptr<UeventSource>> NewNetlinkUeventSource() {
  int fd = ::socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, NETLINK_KOBJECT_UEVENT);
  if (fd < 0) return ErrnoToStatus(errno, "opening the kernel uevent socket");
  // Large enough for the burst of creating many VFs; SO_RCVBUFFORCE passes rmem_max as root.
  int size = 8 << 20;
  if (::setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &size, sizeof(size)) != 0) {
    (void)::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, sizeof(size));
  }
  sockaddr_nl address{};
  address.nl_family = AF_NETLINK;
  address.nl_groups = 1;  // the kernel's group; group 2 is udev's re-broadcast
  if (::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
    int error = errno;
    ::close(fd);
    return ErrnoToStatus(error, "binding the kernel uevent socket");
  }
  int wake = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake < 0) {
    int error = errno;
    ::close(fd);
    return ErrnoToStatus(error, "creating an eventfd for the uevent socket");
  }
  return std::unique_ptr<UeventSource>(new NetlinkUeventSource(fd, wake));
}

// ---- ManualUeventSource ---------------------------------------------------------------------

void ManualUeventSource::Push(Uevent event) {
  std::lock_guard<std::mutex> lock(mu_);
  queue_.push_back(std::move(event));
  cv_.notify_all();
}

absl::Status ManualUeventSource::PushDatagram(std::string_view datagram) {
  DEVLET_ASSIGN_OR_RETURN(Uevent event, ParseUevent(datagram));
  Push(std::move(event));
  return absl::OkStatus();
}

void ManualUeventSource::Fail(absl::Status status) {
  std::lock_guard<std::mutex> lock(mu_);
  failure_ = std::move(status);
  cv_.notify_all();
}

absl::StatusOr<std::optional<Uevent>> ManualUeventSource::Next(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait_for(lock, timeout,
               [&] { return !queue_.empty() || failure_.has_value() || interrupted_; });
  if (failure_) {
    absl::Status status = *failure_;
    failure_.reset();
    return status;
  }
  if (interrupted_) {
    interrupted_ = false;
    return std::optional<Uevent>();
  }
  if (queue_.empty()) return std::optional<Uevent>();
  Uevent event = std::move(queue_.front());
  queue_.pop_front();
  return std::optional<Uevent>(std::move(event));
}

void ManualUeventSource::Interrupt() {
  std::lock_guard<std::mutex> lock(mu_);
  interrupted_ = true;
  cv_.notify_all();
}

// ---- DeviceWatcher --------------------------------------------------------------------------

DeviceWatcher::DeviceWatcher(Rescanner& rescanner, UeventSource* source, WatcherOptions options)
    : rescanner_(rescanner),
      source_(source),
      options_(options),
      next_periodic_(Clock::now() + options.period) {}

DeviceWatcher::~DeviceWatcher() { Stop(); }

std::optional<std::string> DeviceWatcher::WaitForTrigger(std::chrono::milliseconds wait) {
  const auto deadline = Clock::now() + wait;
  while (true) {
    std::unique_lock<std::mutex> lock(mu_);
    if (stopping_) return std::nullopt;
    if (requested_) {
      requested_ = false;
      return "requested";
    }
    const auto now = Clock::now();
    if (now >= next_periodic_) return "periodic";
    if (now >= deadline) return std::nullopt;
    const auto until = std::min(deadline, next_periodic_);
    if (source_ != nullptr && !source_broken_) {
      lock.unlock();
      absl::StatusOr<std::optional<Uevent>> event = source_->Next(Until(until));
      lock.lock();
      if (!event.ok()) {
        // Keep going on the periodic timer alone; a broken socket does not stop rescans.
        source_broken_ = true;
        ++stats_.errors;
        stats_.last_error = "uevent source: " + Message(event.status());
        continue;
      }
      if (!event->has_value()) continue;
      ++stats_.events;
      if (!AffectsDevices(**event)) continue;
      ++stats_.relevant_events;
      return "uevent " + (*event)->action + " " + (*event)->devpath;
    }
    cv_.wait_until(lock, until, [&] { return requested_ || stopping_; });
  }
}

void DeviceWatcher::Debounce() {
  const auto hard_stop = Clock::now() + options_.max_delay;
  auto quiet_until = Clock::now() + options_.debounce;
  while (true) {
    const auto until = std::min(quiet_until, hard_stop);
    if (Clock::now() >= until) return;
    std::unique_lock<std::mutex> lock(mu_);
    if (stopping_) return;
    if (source_ == nullptr || source_broken_) {
      cv_.wait_until(lock, until, [&] { return stopping_; });
      continue;
    }
    lock.unlock();
    absl::StatusOr<std::optional<Uevent>> event = source_->Next(Until(until));
    lock.lock();
    if (!event.ok()) {
      source_broken_ = true;
      ++stats_.errors;
      stats_.last_error = "uevent source: " + Message(event.status());
      continue;
    }
    if (!event->has_value()) continue;
    ++stats_.events;
    if (AffectsDevices(**event)) {
      ++stats_.relevant_events;
      quiet_until = Clock::now() + options_.debounce;  // the burst goes on
    }
  }
}

absl::StatusOr<std::optional<DeviceChange>> DeviceWatcher::Rescan(std::string trigger) {
  absl::StatusOr<RescanResult> result = rescanner_.Rescan();
  std::lock_guard<std::mutex> lock(mu_);
  ++stats_.rescans;
  // Any rescan restarts the periodic timer: the machine was just looked at.
  next_periodic_ = Clock::now() + options_.period;
  if (!result.ok()) {
    ++stats_.errors;
    stats_.last_error = Message(result.status());
    return WithContext(result.status(), "rescanning devices (" + trigger + ")");
  }
  if (!result->changed) return std::optional<DeviceChange>();
  ++stats_.changes;
  DeviceChange change{.result = *std::move(result),
                      .devices = rescanner_.devices(),
                      .inventory = rescanner_.inventory(),
                      .fingerprint = DeviceSetFingerprint(rescanner_.devices()),
                      .trigger = std::move(trigger)};
  return std::optional<DeviceChange>(std::move(change));
}

absl::StatusOr<std::optional<DeviceChange>> DeviceWatcher::RunOnce(std::chrono::milliseconds wait) {
  std::optional<std::string> trigger = WaitForTrigger(wait);
  if (!trigger) return std::optional<DeviceChange>();
  if (trigger->rfind("uevent", 0) == 0) Debounce();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return std::optional<DeviceChange>();
    requested_ = false;  // this rescan answers a request made during the debounce too
  }
  return Rescan(*std::move(trigger));
}

void DeviceWatcher::Start(ChangeCallback on_change) {
  Stop();
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = false;
  }
  thread_ = std::thread([this, on_change = std::move(on_change)] {
    while (true) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (stopping_) return;
      }
      absl::StatusOr<std::optional<DeviceChange>> change = RunOnce(std::chrono::hours(1));
      if (change.ok() && change->has_value() && on_change) on_change(**change);
    }
  });
}

void DeviceWatcher::RequestRescan() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    requested_ = true;
    cv_.notify_all();
  }
  if (source_ != nullptr) source_->Interrupt();
}

void DeviceWatcher::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    cv_.notify_all();
  }
  if (source_ != nullptr) source_->Interrupt();
  if (thread_.joinable()) thread_.join();
}

WatcherStats DeviceWatcher::Stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

}  // namespace devlet::devices
