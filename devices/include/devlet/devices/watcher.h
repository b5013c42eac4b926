// File: devlet/devices/watcher.h
//
// Rescan on hot-plug and driver changes. The kernel announces device changes as kobject uevents on
// a NETLINK_KOBJECT_UEVENT socket ("add@/devices/pci0000:15/.../0000:18:00.0", "bind@...",
// "remove@..."); a DeviceWatcher waits for such an event (or for its periodic timer, in case an
// event was lost or the socket cannot be opened), lets a burst of events settle (debounce), rescans
// through a Rescanner and reports only when the published devices changed. An unchanged machine
// republishes nothing:
//
//   std::unique_ptr<UeventSource> uevents = NewNetlinkUeventSource().value_or(nullptr);
//   DeviceWatcher watcher(rescanner, uevents.get(), {.period = std::chrono::seconds(60)});
//   watcher.Start([&](const DeviceChange& change) { publisher.Publish(change.devices); });
//   ...
//   watcher.Stop();
//
// Tests feed recorded netlink payloads through ParseUevent and drive the watcher with
// ManualUeventSource (no real uevents needed).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "devlet/devices/dra_device.h"
#include "devlet/devices/inventory.h"
#include "devlet/devices/profile.h"

namespace devlet::devices {

// Uevent is one kernel kobject uevent.
struct Uevent {
  std::string action;     // "add", "remove", "bind", "unbind", "change", "move", "online", ...
  std::string devpath;    // "/devices/pci0000:15/0000:15:01.0/0000:18:00.0" (below /sys)
  std::string subsystem;  // "pci", "net", "infiniband", "drm", "mdev", ...; "" when absent
  std::string driver;     // DRIVER=, for bind/unbind; "" otherwise
  std::uint64_t seqnum = 0;
  std::map<std::string, std::string> env;  // every KEY=VALUE of the message
  bool operator==(const Uevent&) const = default;
};

// ParseUevent parses one NETLINK_KOBJECT_UEVENT datagram as the kernel sends it to multicast
// group 1: "ACTION@DEVPATH\0KEY=VALUE\0...". InvalidArgument, naming the problem, for anything
// else: an empty message, a missing "@", a non-"/" devpath, a field without "=", ACTION/DEVPATH
// fields contradicting the header, or udev's re-broadcast ("libudev" magic, group 2), which
// devlet does not consume.
absl::StatusOr<Uevent> ParseUevent(std::string_view datagram);

// AffectsDevices says whether an event can change what discovery finds: PCI functions appearing,
// disappearing or (un)binding, netdevs and RDMA/DRM/mdev/vfio nodes coming and going. Block, tty,
// input, ... events and "change" events of netdevs (link state is health, not inventory) do not.
bool AffectsDevices(const Uevent& event);

// UeventSource yields kernel uevents.
class UeventSource {
 public:
  virtual ~UeventSource() = default;

  // Next waits up to `timeout` for the next event; nullopt on timeout or after Interrupt. Errors
  // for a broken source (the watcher falls back to periodic rescans). Messages that do not parse
  // are skipped, not returned as errors.
  virtual absl::StatusOr<std::optional<Uevent>> Next(std::chrono::milliseconds timeout) = 0;

  // Interrupt makes a blocked or later Next return nullopt promptly; thread-safe.
  virtual void Interrupt() = 0;
};

// NewNetlinkUeventSource opens a NETLINK_KOBJECT_UEVENT socket bound to the kernel's multicast
// group (needs no privilege to listen; devlet runs as root anyway). Only messages sent by the
// kernel (netlink port id 0) are accepted. The receive buffer is enlarged so that a burst (creating
// 64 VFs) is not lost; if it overflows anyway (ENOBUFS) Next returns a synthetic event with action
// "overflow" so that the watcher rescans.
absl::StatusOr<std::unique_ptr<UeventSource>> NewNetlinkUeventSource();

// ManualUeventSource is a UeventSource fed by the caller (tests, simulated nodes driven by a
// script). Thread-safe.
class ManualUeventSource final : public UeventSource {
 public:
  // Push queues an event.
  void Push(Uevent event);
  // PushDatagram parses a raw netlink payload and queues it; the parse error otherwise.
  absl::Status PushDatagram(std::string_view datagram);
  // Fail makes the next Next return `status` (a broken socket).
  void Fail(absl::Status status);

  absl::StatusOr<std::optional<Uevent>> Next(std::chrono::milliseconds timeout) override;
  void Interrupt() override;

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Uevent> queue_;
  std::optional<absl::Status> failure_;
  bool interrupted_ = false;
};

// WatcherOptions tunes the watcher.
struct WatcherOptions {
  // Rescan at least this often even without events (lost events, sources that do not announce:
  // a hwloc XML replaced, sysfs attributes that change without a uevent).
  std::chrono::milliseconds period{60000};
  // After a relevant event, wait until no further relevant event came for this long (a driver
  // rebinding 8 VFs sends dozens of events), bounded by max_delay from the first event.
  std::chrono::milliseconds debounce{500};
  std::chrono::milliseconds max_delay{5000};
};

// DeviceChange is what a rescan that changed something reports.
struct DeviceChange {
  RescanResult result;    // what changed (inventory and device names)
  DeviceSet devices;      // the new complete set to publish
  Inventory inventory;    // the new inventory
  std::string fingerprint;  // DeviceSetFingerprint(devices)
  std::string trigger;    // "uevent add /devices/...", "periodic", "requested"
};

// WatcherStats counts what the watcher did, for metrics and tests.
struct WatcherStats {
  std::uint64_t events = 0;           // uevents received
  std::uint64_t relevant_events = 0;  // of which AffectsDevices
  std::uint64_t rescans = 0;
  std::uint64_t changes = 0;          // rescans that reported a change
  std::uint64_t errors = 0;           // failed rescans and source errors
  std::string last_error;
};

// DeviceWatcher runs the rescan loop. The Rescanner is used only from the watcher's thread while it
// runs (it is not thread-safe); read devices through the change callback or Current().
class DeviceWatcher {
 public:
  // `source` may be null (periodic rescans only). Neither is owned; both must outlive the watcher.
  DeviceWatcher(Rescanner& rescanner, UeventSource* source, WatcherOptions options = {});
  ~DeviceWatcher();  // Stop()s
  DeviceWatcher(const DeviceWatcher&) = delete;
  DeviceWatcher& operator=(const DeviceWatcher&) = delete;

  using ChangeCallback = std::function<void(const DeviceChange&)>;

  // RunOnce waits for a trigger (relevant event, period, RequestRescan) for up to `wait`, debounces
  // it, rescans and returns the change, or nullopt when there was no trigger or nothing changed.
  // Rescan errors come back (the previous devices stay current). For tests and for callers that
  // run their own loop; do not mix with Start.
  absl::StatusOr<std::optional<DeviceChange>> RunOnce(std::chrono::milliseconds wait);

  // Start runs the loop on a thread and calls `on_change` (on that thread) after each rescan that
  // changed something. A failing source is dropped (logged in stats) and the loop continues with
  // periodic rescans.
  void Start(ChangeCallback on_change);

  // RequestRescan asks for a rescan now (an operator, a changed profile file); thread-safe.
  void RequestRescan();

  // Stop ends the loop and joins the thread; idempotent.
  void Stop();

  // Stats returns the counters; thread-safe.
  WatcherStats Stats() const;

 private:
  absl::StatusOr<std::optional<DeviceChange>> Rescan(std::string trigger);
  std::optional<std::string> WaitForTrigger(std::chrono::milliseconds wait);
  void Debounce();

  Rescanner& rescanner_;
  UeventSource* source_;
  WatcherOptions options_;
  std::chrono::steady_clock::time_point next_periodic_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool requested_ = false;
  bool stopping_ = false;
  bool source_broken_ = false;
  WatcherStats stats_;
  std::thread thread_;
};

}  // namespace devlet::devices
