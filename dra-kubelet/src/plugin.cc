#include "devlet/dra_kubelet/plugin.h"

#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <cerrno>
#include <condition_variable>
#include <filesystem>
#include <mutex>
#include <set>
#include <thread>

#include "devlet/common/log.h"
#include "devlet/common/status.h"
#include "executor.h"
#include "files.h"
#include "listener.h"
#include "dra-health/v1/api.grpc.pb.h"
#include "dra-health/v1alpha1/api.grpc.pb.h"
#include "dra/v1/api.grpc.pb.h"
#include "dra/v1beta1/api.grpc.pb.h"
#include "pluginregistration/v1/api.grpc.pb.h"

namespace devlet::dra_kubelet {
namespace {

namespace drav1 = ::k8s::io::kubelet::pkg::apis::dra::v1;
namespace drav1beta1 = ::k8s::io::kubelet::pkg::apis::dra::v1beta1;
namespace reg = ::pluginregistration;

constexpr std::size_t kUnixPathMax = 108;
constexpr std::size_t kMaxHealthMessage = 1024;

// ---- Registration -----------------------------------------------------------------------------

class RegistrationService final : public reg::Registration::CallbackService {
 public:
  explicit RegistrationService(reg::PluginInfo info) : info_(std::move(info)) {}

  grpc::ServerUnaryReactor* GetInfo(grpc::CallbackServerContext* context,
                                    const reg::InfoRequest* /*request*/,
                                    reg::PluginInfo* response) override {
    *response = info_;  // From memory: the kubelet allows 1 s.
    auto* reactor = context->DefaultReactor();
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }

  grpc::ServerUnaryReactor* NotifyRegistrationStatus(
      grpc::CallbackServerContext* context, const reg::RegistrationStatus* request,
      reg::RegistrationStatusResponse* /*response*/) override {
    {
      std::lock_guard lock(mutex_);
      state_.notified = true;
      state_.registered = request->plugin_registered();
      state_.error = request->error();
    }
    if (request->plugin_registered()) {
      log::Logger().V(2).Info("Registered with the kubelet", "driver", info_.name());
    } else {
      log::Logger().Error(Unavailable(request->error()),
                          "The kubelet rejected the plugin registration; waiting for its next "
                          "attempt",
                          "driver", info_.name());
    }
    auto* reactor = context->DefaultReactor();
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }

  RegistrationState State() const {
    std::lock_guard lock(mutex_);
    return state_;
  }

 private:
  const reg::PluginInfo info_;
  mutable std::mutex mutex_;
  RegistrationState state_;
};

// ---- DRA v1 / v1beta1 over ClaimPreparer ------------------------------------------------------

struct DraV1 {
  using Service = drav1::DRAPlugin;
  using PrepareRequest = drav1::NodePrepareResourcesRequest;
  using PrepareResponse = drav1::NodePrepareResourcesResponse;
  using UnprepareRequest = drav1::NodeUnprepareResourcesRequest;
  using UnprepareResponse = drav1::NodeUnprepareResourcesResponse;
  static constexpr bool kHasShareId = true;
};

struct DraV1beta1 {
  using Service = drav1beta1::DRAPlugin;
  using PrepareRequest = drav1beta1::NodePrepareResourcesRequest;
  using PrepareResponse = drav1beta1::NodePrepareResourcesResponse;
  using UnprepareRequest = drav1beta1::NodeUnprepareResourcesRequest;
  using UnprepareResponse = drav1beta1::NodeUnprepareResourcesResponse;
  static constexpr bool kHasShareId = false;
};

template <typename Request>
std::vector<ClaimRef> ClaimRefs(const Request& request) {
  std::vector<ClaimRef> refs;
  refs.reserve(static_cast<std::size_t>(request.claims_size()));
  for (const auto& claim : request.claims()) {
    refs.push_back({claim.namespace_(), claim.name(), claim.uid()});
  }
  return refs;
}

template <typename Api>
class DraService final : public Api::Service::CallbackService {
 public:
  DraService(ClaimPreparer& preparer, internal::Executor& executor)
      : preparer_(preparer), executor_(executor) {}

  grpc::ServerUnaryReactor* NodePrepareResources(grpc::CallbackServerContext* context,
                                                 const typename Api::PrepareRequest* request,
                                                 typename Api::PrepareResponse* response) override {
    auto* reactor = context->DefaultReactor();
    std::vector<ClaimRef> refs = ClaimRefs(*request);
    // The worker fetches the claims, then queues them for the preparer's next batch and is free
    // again: concurrent calls share checkpoint writes (group commit). The reactor is finished
    // by whichever worker runs that batch.
    bool queued = executor_.Submit([this, reactor, response, refs = std::move(refs)] {
      preparer_.PrepareAsync(refs, [reactor, response](
                                       std::map<std::string, PrepareResult> results) {
        auto& claims = *response->mutable_claims();
        for (const auto& [uid, result] : results) {
          auto& entry = claims[uid];
          if (!result.error.empty()) {
            entry.set_error(result.error);
            continue;
          }
          for (const PreparedClaimDevice& device : result.devices) {
            auto* out = entry.add_devices();
            for (const std::string& name : device.request_names) out->add_request_names(name);
            out->set_pool_name(device.pool);
            out->set_device_name(device.device);
            for (const std::string& id : device.cdi_device_ids) out->add_cdi_device_ids(id);
            if constexpr (Api::kHasShareId) {
              if (device.share_id) out->set_share_id(*device.share_id);
            }
          }
        }
        reactor->Finish(grpc::Status::OK);
      });
    });
    if (!queued) reactor->Finish(grpc::Status(grpc::StatusCode::UNAVAILABLE, "plugin is stopping"));
    return reactor;
  }

  grpc::ServerUnaryReactor* NodeUnprepareResources(
      grpc::CallbackServerContext* context, const typename Api::UnprepareRequest* request,
      typename Api::UnprepareResponse* response) override {
    auto* reactor = context->DefaultReactor();
    std::vector<ClaimRef> refs = ClaimRefs(*request);
    bool queued = executor_.Submit([this, reactor, response, refs = std::move(refs)] {
      std::map<std::string, std::string> results = preparer_.Unprepare(refs);
      auto& claims = *response->mutable_claims();
      for (const auto& [uid, error] : results) {
        auto& entry = claims[uid];
        if (!error.empty()) entry.set_error(error);
      }
      reactor->Finish(grpc::Status::OK);
    });
    if (!queued) reactor->Finish(grpc::Status(grpc::StatusCode::UNAVAILABLE, "plugin is stopping"));
    return reactor;
  }

 private:
  ClaimPreparer& preparer_;
  internal::Executor& executor_;
};

// ---- Health -----------------------------------------------------------------------------------

// HealthSubscriber receives snapshots from the broadcaster.
class HealthSubscriber {
 public:
  virtual ~HealthSubscriber() = default;
  virtual void Push(const std::vector<DeviceHealth>& snapshot) = 0;
  virtual void Close() = 0;
};

// HealthBroadcaster sends the source's snapshot to every open stream when it changes and at least
// every `interval`. The change listener it gives the source holds only a shared wake-up flag, so a
// source that calls it late (from its own thread, during shutdown) never touches a dead object.
class HealthBroadcaster {
 public:
  HealthBroadcaster(HealthSource& source, std::chrono::milliseconds interval)
      : source_(source), interval_(interval), wakeup_(std::make_shared<Wakeup>()) {
    source_.SetHealthListener([wakeup = wakeup_] {
      {
        std::lock_guard lock(wakeup->mutex);
        wakeup->changed = true;
      }
      wakeup->cv.notify_all();
    });
    thread_ = std::thread([this] { Run(); });
  }

  ~HealthBroadcaster() { Stop(); }

  void Subscribe(HealthSubscriber* subscriber) {
    std::vector<DeviceHealth> snapshot = source_.HealthSnapshot();
    std::lock_guard lock(mutex_);
    if (stopped_) {
      subscriber->Close();
      return;
    }
    subscribers_.insert(subscriber);
    subscriber->Push(snapshot);
  }

  void Unsubscribe(HealthSubscriber* subscriber) {
    std::lock_guard lock(mutex_);
    subscribers_.erase(subscriber);
  }

  // Stop ends the thread and finishes every open stream. Idempotent.
  void Stop() {
    {
      std::lock_guard lock(mutex_);
      if (stopped_) return;
      stopped_ = true;
      for (HealthSubscriber* subscriber : subscribers_) subscriber->Close();
    }
    {
      std::lock_guard lock(wakeup_->mutex);
      wakeup_->stopped = true;
    }
    wakeup_->cv.notify_all();
    source_.SetHealthListener(nullptr);
    if (thread_.joinable()) thread_.join();
  }

 private:
  struct Wakeup {
    std::mutex mutex;
    std::condition_variable cv;
    bool changed = false;
    bool stopped = false;
  };

  void Run() {
    while (true) {
      {
        std::unique_lock lock(wakeup_->mutex);
        wakeup_->cv.wait_for(lock, interval_,
                             [this] { return wakeup_->stopped || wakeup_->changed; });
        if (wakeup_->stopped) return;
        wakeup_->changed = false;
      }
      std::vector<DeviceHealth> snapshot = source_.HealthSnapshot();
      std::lock_guard lock(mutex_);
      if (stopped_) return;
      for (HealthSubscriber* subscriber : subscribers_) subscriber->Push(snapshot);
    }
  }

  HealthSource& source_;
  const std::chrono::milliseconds interval_;
  const std::shared_ptr<Wakeup> wakeup_;
  std::mutex mutex_;  // Guards subscribers_ and stopped_.
  std::set<HealthSubscriber*> subscribers_;
  bool stopped_ = false;
  std::thread thread_;
};

template <typename Pb>
void FillHealth(const std::vector<DeviceHealth>& snapshot, Pb* response) {
  response->Clear();
  for (const DeviceHealth& health : snapshot) {
    auto* device = response->add_devices();
    device->mutable_device()->set_pool_name(health.pool);
    device->mutable_device()->set_device_name(health.device);
    device->set_health(static_cast<decltype(device->health())>(health.health));
    device->set_last_updated_time(health.last_updated_unix);
    device->set_health_check_timeout_seconds(health.timeout_seconds);
    if (health.message.size() > kMaxHealthMessage) {
      device->set_message(health.message.substr(0, kMaxHealthMessage - 3) + "...");
    } else {
      device->set_message(health.message);
    }
  }
}

template <typename Response>
class HealthWriter final : public grpc::ServerWriteReactor<Response>, public HealthSubscriber {
 public:
  explicit HealthWriter(HealthBroadcaster& broadcaster) : broadcaster_(broadcaster) {
    broadcaster_.Subscribe(this);
  }

  void Push(const std::vector<DeviceHealth>& snapshot) override {
    std::lock_guard lock(mutex_);
    if (finishing_) return;
    FillHealth(snapshot, &pending_);
    has_pending_ = true;
    MaybeWriteLocked();
  }

  void Close() override {
    std::lock_guard lock(mutex_);
    FinishLocked(grpc::Status::OK);
  }

  void OnWriteDone(bool ok) override {
    std::lock_guard lock(mutex_);
    writing_ = false;
    if (finishing_) {
      // Finish was requested while this write was outstanding (cancel, stop).
      if (!finished_) {
        finished_ = true;
        this->Finish(final_status_);
      }
      return;
    }
    if (!ok) {
      FinishLocked(grpc::Status(grpc::StatusCode::UNAVAILABLE, "health stream write failed"));
      return;
    }
    MaybeWriteLocked();
  }

  void OnCancel() override {
    std::lock_guard lock(mutex_);
    FinishLocked(grpc::Status::CANCELLED);
  }

  void OnDone() override {
    broadcaster_.Unsubscribe(this);
    delete this;
  }

 private:
  void MaybeWriteLocked() {
    if (writing_ || !has_pending_ || finishing_) return;
    current_.Swap(&pending_);
    has_pending_ = false;
    writing_ = true;
    this->StartWrite(&current_);
  }

  // Finishes now, or after the outstanding write completes.
  void FinishLocked(const grpc::Status& status) {
    if (finishing_) return;
    finishing_ = true;
    final_status_ = status;
    if (!writing_) {
      finished_ = true;
      this->Finish(status);
    }
  }

  HealthBroadcaster& broadcaster_;
  std::mutex mutex_;
  Response pending_;
  Response current_;
  bool has_pending_ = false;
  bool writing_ = false;
  bool finishing_ = false;
  bool finished_ = false;
  grpc::Status final_status_;
};

class HealthV1 final : public ::v1::DRAResourceHealth::CallbackService {
 public:
  explicit HealthV1(HealthBroadcaster& broadcaster) : broadcaster_(broadcaster) {}
  grpc::ServerWriteReactor<::v1::NodeWatchResourcesResponse>* NodeWatchResources(
      grpc::CallbackServerContext* /*context*/,
      const ::v1::NodeWatchResourcesRequest* /*request*/) override {
    return new HealthWriter<::v1::NodeWatchResourcesResponse>(broadcaster_);
  }

 private:
  HealthBroadcaster& broadcaster_;
};

class HealthV1alpha1 final : public ::v1alpha1::DRAResourceHealth::CallbackService {
 public:
  explicit HealthV1alpha1(HealthBroadcaster& broadcaster) : broadcaster_(broadcaster) {}
  grpc::ServerWriteReactor<::v1alpha1::NodeWatchResourcesResponse>* NodeWatchResources(
      grpc::CallbackServerContext* /*context*/,
      const ::v1alpha1::NodeWatchResourcesRequest* /*request*/) override {
    return new HealthWriter<::v1alpha1::NodeWatchResourcesResponse>(broadcaster_);
  }

 private:
  HealthBroadcaster& broadcaster_;
};

absl::Status RemoveSocket(const std::string& path) {
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
    return ErrnoToStatus(errno, "removing socket " + path);
  }
  return absl::OkStatus();
}

// Served is one gRPC server with the listener that feeds it connections.
struct Served {
  std::unique_ptr<grpc::Server> server;
  std::unique_ptr<internal::UnixListener> listener;
};

absl::StatusOr<Served> Listen(const std::string& path,
                              const std::vector<grpc::Service*>& services) {
  if (path.size() >= kUnixPathMax) {
    return InvalidArgument("socket path " + path + " is longer than the AF_UNIX limit of 107 bytes");
  }
  grpc::ServerBuilder builder;
  for (grpc::Service* service : services) builder.RegisterService(service);
  // HTTP/2 PINGs: the kubelet sends none on these sockets, and only root can connect (0600).
  // gRPC 1.51's ping-strike policy does not stop a flood from a client that never reads: the
  // GOAWAY it schedules cannot be written, the connection stays open, gRPC goes on reading, and
  // RSS grew ~3 KB per PING (17 -> 107 MB for 480 KB of PINGs). Without strikes each PING costs
  // a queued 8-byte ACK and gRPC stops reading the connection at 10,000 unsent ones: 16.6 ->
  // 16.8 MB after 680 KB unread and 3.4 MB read (devlet_node_hostile_test, PingFlood...).
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PING_STRIKES, 0);
  Served served;
  served.server = builder.BuildAndStart();  // No listening port: UnixListener accepts.
  if (served.server == nullptr) return Unavailable("cannot start the gRPC server for " + path);
  // Only the kubelet (root) talks to these sockets.
  absl::StatusOr<std::unique_ptr<internal::UnixListener>> listener =
      internal::UnixListener::Start(path, 0600, served.server.get());
  if (!listener.ok()) {
    served.server->Shutdown();
    return listener.status();
  }
  served.listener = *std::move(listener);
  return served;
}

}  // namespace

// ---- Socket names -----------------------------------------------------------------------------

std::string RegistrarSocketFileName(const std::string& registrar_dir, const std::string& driver,
                                    const std::string& pod_uid) {
  if (pod_uid.empty()) return driver + "-reg.sock";
  auto uid_hash = internal::Sha256(pod_uid);
  auto driver_uid_hash = internal::Sha256(driver + std::string(1, '\0') + pod_uid);
  const std::string candidates[] = {
      driver + "-" + pod_uid + "-reg.sock",
      driver + "-" + internal::Base64RawUrl(uid_hash.data(), 8) + "-reg.sock",
      "dra-" + internal::Base64RawUrl(driver_uid_hash.data(), 16) + "-reg.sock",
  };
  for (const std::string& candidate : candidates) {
    // Upstream accepts 108 bytes; gRPC's C core keeps room for a NUL and binds at most 107.
    if ((std::filesystem::path(registrar_dir) / candidate).lexically_normal().string().size() <
        kUnixPathMax) {
      return candidate;
    }
  }
  return candidates[2];
}

std::string DraSocketFileName(const std::string& pod_uid) {
  return pod_uid.empty() ? "dra.sock" : "dra-" + pod_uid + ".sock";
}

absl::Status ValidateDriverName(const std::string& name) {
  if (name.empty() || name.size() > 63) {
    return InvalidArgument("driver name \"" + name + "\" must have 1 to 63 characters");
  }
  std::size_t label_start = 0;
  for (std::size_t i = 0; i <= name.size(); ++i) {
    if (i == name.size() || name[i] == '.') {
      if (i == label_start) {
        return InvalidArgument("driver name \"" + name + "\" has an empty DNS label");
      }
      if (name[label_start] == '-' || name[i - 1] == '-') {
        return InvalidArgument("driver name \"" + name +
                               "\": DNS labels must start and end with a letter or digit");
      }
      label_start = i + 1;
      continue;
    }
    char c = name[i];
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-')) {
      return InvalidArgument("driver name \"" + name +
                             "\" must be a lower-case DNS subdomain (a-z, 0-9, '-', '.')");
    }
  }
  return absl::OkStatus();
}

// ---- KubeletPlugin ------------------------------------------------------------------------------

class KubeletPlugin::Impl {
 public:
  PluginOptions options;
  std::string registrar_socket;
  std::string dra_socket;
  std::vector<std::string> supported_versions;
  std::unique_ptr<internal::Executor> executor;
  std::unique_ptr<DraService<DraV1>> dra_v1;
  std::unique_ptr<DraService<DraV1beta1>> dra_v1beta1;
  std::unique_ptr<HealthBroadcaster> broadcaster;
  std::unique_ptr<HealthV1> health_v1;
  std::unique_ptr<HealthV1alpha1> health_v1alpha1;
  std::unique_ptr<RegistrationService> registration;
  std::unique_ptr<grpc::Server> dra_server;
  std::unique_ptr<grpc::Server> registrar_server;
  std::unique_ptr<internal::UnixListener> dra_listener;
  std::unique_ptr<internal::UnixListener> registrar_listener;
  std::mutex stop_mutex;
  bool stopped = false;

  void Stop() {
    std::lock_guard lock(stop_mutex);
    if (stopped) return;
    stopped = true;
    auto deadline = [] { return std::chrono::system_clock::now() + std::chrono::seconds(5); };
    // Registration socket first, so the kubelet deregisters before the endpoint disappears.
    if (!registrar_socket.empty()) (void)RemoveSocket(registrar_socket);
    if (registrar_listener) registrar_listener->Stop();
    if (registrar_server) registrar_server->Shutdown(deadline());
    if (broadcaster) broadcaster->Stop();
    if (dra_listener) dra_listener->Stop();
    if (dra_server) dra_server->Shutdown(deadline());
    if (!dra_socket.empty()) (void)RemoveSocket(dra_socket);
    if (executor) executor->Stop();
    log::Logger().V(2).Info("Kubelet plugin stopped", "driver", options.driver_name);
  }
};

KubeletPlugin::KubeletPlugin(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

KubeletPlugin::~KubeletPlugin() { Stop(); }

void KubeletPlugin::Stop() {
  if (impl_) impl_->Stop();
}

absl::StatusOr<std::unique_ptr<KubeletPlugin>> KubeletPlugin::Start(const PluginOptions& options,
                                                                    ClaimPreparer& preparer,
                                                                    HealthSource* health) {
  DEVLET_RETURN_IF_ERROR(ValidateDriverName(options.driver_name));
  if (!options.serve_v1 && !options.serve_v1beta1) {
    return InvalidArgument("at least one of the v1 and v1beta1 DRA services must be served");
  }
  if (options.health && health != nullptr &&
      (options.health_resend_interval <= std::chrono::milliseconds::zero() ||
       options.health_resend_interval > kMaxHealthResendInterval)) {
    return InvalidArgument("the health re-send interval must be more than 0 and at most " +
                           std::to_string(kMaxHealthResendInterval.count()) +
                           " s (the kubelet treats a device as Unknown when its health check "
                           "timeout passes without an update), got " +
                           std::to_string(options.health_resend_interval.count()) + " ms");
  }
  // Files a power cut left without a checkpoint record (an unsynced PrepareStarted lost) go
  // before the kubelet can call; a failure only leaves them (logged), it does not stop serving.
  if (absl::StatusOr<int> swept = preparer.RemoveOrphanedFiles(); !swept.ok()) {
    log::Logger().Error(swept.status(), "Could not remove orphaned per-claim files",
                        "driver", options.driver_name);
  } else if (*swept > 0) {
    log::Logger().Info("Removed orphaned per-claim files", "driver", options.driver_name,
                       "count", *swept);
  }
  // Files an older devlet wrote (e.g. CDI specs without container markers) are brought up to
  // date before the kubelet calls: containers created or restarted later get them.
  if (absl::Status refreshed = preparer.RefreshFiles(); !refreshed.ok()) {
    log::Logger().Error(refreshed, "Could not refresh the files of prepared claims", "driver",
                        options.driver_name);
  }
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  std::error_code ec;
  std::string data_dir = options.plugin_data_dir.empty()
                             ? std::string(kDefaultPluginsDir) + "/" + options.driver_name
                             : options.plugin_data_dir;
  data_dir = std::filesystem::absolute(data_dir, ec).lexically_normal().string();
  std::string registrar_dir =
      std::filesystem::absolute(options.registrar_dir, ec).lexically_normal().string();
  while (data_dir.size() > 1 && data_dir.back() == '/') data_dir.pop_back();
  while (registrar_dir.size() > 1 && registrar_dir.back() == '/') registrar_dir.pop_back();
  impl->options.plugin_data_dir = data_dir;
  DEVLET_RETURN_IF_ERROR(internal::MakeDirs(data_dir, 0750));
  DEVLET_RETURN_IF_ERROR(internal::MakeDirs(registrar_dir, 0755));
  impl->dra_socket = data_dir + "/" + DraSocketFileName(options.pod_uid);
  impl->registrar_socket =
      registrar_dir + "/" +
      RegistrarSocketFileName(registrar_dir, options.driver_name, options.pod_uid);

  if (options.serve_v1) impl->supported_versions.emplace_back(kDraV1Service);
  if (options.serve_v1beta1) impl->supported_versions.emplace_back(kDraV1beta1Service);
  const bool serve_health = options.health && health != nullptr;
  if (serve_health) {
    impl->supported_versions.emplace_back(kHealthV1Service);
    impl->supported_versions.emplace_back(kHealthV1alpha1Service);
  }

  impl->executor = std::make_unique<internal::Executor>(options.worker_threads);
  std::vector<grpc::Service*> dra_services;
  if (options.serve_v1) {
    impl->dra_v1 = std::make_unique<DraService<DraV1>>(preparer, *impl->executor);
    dra_services.push_back(impl->dra_v1.get());
  }
  if (options.serve_v1beta1) {
    impl->dra_v1beta1 = std::make_unique<DraService<DraV1beta1>>(preparer, *impl->executor);
    dra_services.push_back(impl->dra_v1beta1.get());
  }
  if (serve_health) {
    impl->broadcaster =
        std::make_unique<HealthBroadcaster>(*health, options.health_resend_interval);
    impl->health_v1 = std::make_unique<HealthV1>(*impl->broadcaster);
    impl->health_v1alpha1 = std::make_unique<HealthV1alpha1>(*impl->broadcaster);
    dra_services.push_back(impl->health_v1.get());
    dra_services.push_back(impl->health_v1alpha1.get());
  }
  // Without health services registered, gRPC answers NodeWatchResources with Unimplemented,
  // which tells the kubelet to stop watching.

  absl::StatusOr<Served> dra_server = Listen(impl->dra_socket, dra_services);
  if (!dra_server.ok()) {
    impl->Stop();
    return WithContext(dra_server.status(), "starting the DRA service");
  }
  impl->dra_server = std::move(dra_server->server);
  impl->dra_listener = std::move(dra_server->listener);

  reg::PluginInfo info;
  info.set_type(std::string(kDraPluginType));
  info.set_name(options.driver_name);
  info.set_endpoint(impl->dra_socket);
  for (const std::string& version : impl->supported_versions) info.add_supported_versions(version);
  impl->registration = std::make_unique<RegistrationService>(std::move(info));
  absl::StatusOr<Served> registrar_server =
      Listen(impl->registrar_socket, {impl->registration.get()});
  if (!registrar_server.ok()) {
    impl->Stop();
    return WithContext(registrar_server.status(), "starting the registration service");
  }
  impl->registrar_server = std::move(registrar_server->server);
  impl->registrar_listener = std::move(registrar_server->listener);
  log::Logger().V(1).Info("Kubelet plugin started", "driver", options.driver_name, "endpoint",
                          impl->dra_socket, "registration", impl->registrar_socket);
  return std::unique_ptr<KubeletPlugin>(new KubeletPlugin(std::move(impl)));
}

RegistrationState KubeletPlugin::RegistrationStatus() const {
  return impl_->registration ? impl_->registration->State() : RegistrationState{};
}

std::vector<std::string> KubeletPlugin::SupportedVersions() const {
  return impl_->supported_versions;
}

std::string KubeletPlugin::RegistrarSocketPath() const { return impl_->registrar_socket; }

std::string KubeletPlugin::DraSocketPath() const { return impl_->dra_socket; }

}  // namespace devlet::dra_kubelet
