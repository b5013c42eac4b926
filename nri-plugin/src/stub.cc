#include "devlet/nri/stub.h"

#include <cstdlib>
#include <thread>
#include <utility>

#include "devlet/common/log.h"
#include "devlet/common/status.h"
#include "events.h"

namespace devlet::nri {
namespace {

bool ValidName(std::string_view name) {
  if (name.empty()) {
    return false;
  }
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '_' || c == '.' || c == '+' || c == '-';
    if (!ok) {
      return false;
    }
  }
  return true;
}

bool ValidIndex(std::string_view index) {
  return index.size() == 2 && index[0] >= '0' && index[0] <= '9' && index[1] >= '0' &&
         index[1] <= '9';
}

}  // namespace

uint32_t SubscribedEvents(const Handlers& handlers) {
  uint32_t mask = 0;
  for (const internal::EventRow& row : internal::EventTable()) {
    if (row.subscribed(handlers)) {
      mask |= EventBit(row.event);
    }
  }
  return mask;
}

absl::StatusOr<std::unique_ptr<Stub>> Stub::Create(Handlers handlers, StubOptions options) {
  if (options.use_environment) {
    if (const char* name = std::getenv(kPluginNameEnv); name != nullptr && *name != '\0') {
      options.name = name;
    }
    if (const char* index = std::getenv(kPluginIdxEnv); index != nullptr && *index != '\0') {
      options.index = index;
    }
    if (const char* fd = std::getenv(kPluginSocketEnv); fd != nullptr && *fd != '\0') {
      char* end = nullptr;
      const long value = std::strtol(fd, &end, 10);
      if (end == fd || *end != '\0' || value < 0 || value > 65535) {
        return InvalidArgument(std::string(kPluginSocketEnv) + "=\"" + fd +
                               "\" is not a file descriptor number");
      }
      options.socket_fd = static_cast<int>(value);
    }
  }
  if (!ValidName(options.name)) {
    return InvalidArgument("NRI plugin name \"" + options.name +
                           "\" must be non-empty and use only [a-zA-Z0-9_.+-]");
  }
  if (!ValidIndex(options.index)) {
    return InvalidArgument("NRI plugin index \"" + options.index + "\" must be two digits");
  }
  if (options.socket_fd < 0 && options.socket_path.empty()) {
    return InvalidArgument("NRI plugin needs a socket path or an inherited socket");
  }
  if (options.min_backoff.count() <= 0) {
    options.min_backoff = std::chrono::milliseconds(1);
  }
  if (options.max_backoff < options.min_backoff) {
    options.max_backoff = options.min_backoff;
  }
  std::unique_ptr<Stub> stub(new Stub(std::move(handlers), std::move(options)));
  stub->RegisterServices();
  return stub;
}

Stub::Stub(Handlers handlers, StubOptions options)
    : handlers_(std::move(handlers)),
      options_(std::move(options)),
      services_(std::make_shared<ServiceRegistry>()) {}

Stub::~Stub() {
  Stop();
  std::vector<std::thread> reapers;
  {
    std::lock_guard<std::mutex> lock(mu_);
    reapers.swap(reapers_);
  }
  for (auto& reaper : reapers) {
    reaper.join();
  }
}

// The lifecycle rpcs, then each event's rpc from the event table, then StateChange (the pre-v0.12
// path: one rpc for every event that has no reply of its own).
void Stub::RegisterServices() {
  ServiceRegistry& services = *services_;
  internal::ServeTyped<api::ConfigureRequest, api::ConfigureResponse>(
      services, "Configure",
      [this](const api::ConfigureRequest& request) { return Configure(request); });
  internal::ServeTyped<api::SynchronizeRequest, api::SynchronizeResponse>(
      services, "Synchronize",
      [this](api::SynchronizeRequest& request) { return Synchronize(request); });
  internal::ServeTyped<api::Empty, api::Empty>(
      services, "Shutdown", [this](const api::Empty&) -> absl::StatusOr<api::Empty> {
        if (handlers_.shutdown) {
          handlers_.shutdown();
        }
        return api::Empty();
      });
  for (const internal::EventRow& row : internal::EventTable()) {
    row.serve(row, services, &handlers_, options_.state_change_only);
  }
  internal::ServeTyped<api::StateChangeEvent, api::Empty>(
      services, "StateChange",
      [this](const api::StateChangeEvent& event) -> absl::StatusOr<api::Empty> {
        DEVLET_RETURN_IF_ERROR(internal::DeliverStateChange(handlers_, event));
        return api::Empty();
      });
}

RuntimeInfo Stub::ReadRuntimeInfo(const api::ConfigureRequest& request) {
  RuntimeInfo runtime;
  runtime.name = request.runtime_name();
  runtime.version = request.runtime_version();
  runtime.nri_version = EffectiveNriVersion(request.nri_version(), request.runtime_name(),
                                            request.runtime_version());
  runtime.nri_version_inferred = !ParseNriVersion(request.nri_version()).known;
  runtime.registration_timeout = std::chrono::milliseconds(request.registration_timeout());
  runtime.request_timeout = std::chrono::milliseconds(request.request_timeout());
  return runtime;
}

absl::StatusOr<uint32_t> Stub::EventsFor(const RuntimeInfo& runtime) const {
  const uint32_t wanted =
      options_.events_override != 0 ? options_.events_override : SubscribedEvents(handlers_);
  const uint32_t valid = ValidEventsMask(runtime.nri_version);
  const uint32_t events = wanted & valid;
  if (events == 0) {
    // 0 would mean "every event" to the runtime.
    return FailedPrecondition("NRI plugin " + options_.name +
                              " has no handler for any event runtime " + runtime.name + " " +
                              runtime.version + " knows");
  }
  if (events != wanted) {
    log::Logger().Info("NRI runtime does not know some subscribed events; dropped them",
                       "runtime", runtime.name + " " + runtime.version, "nriVersion",
                       runtime.nri_version.text, "dropped", wanted & ~valid);
  }
  return events;
}

absl::StatusOr<api::ConfigureResponse> Stub::Configure(const api::ConfigureRequest& request) {
  const RuntimeInfo runtime = ReadRuntimeInfo(request);
  if (handlers_.configure) {
    DEVLET_RETURN_IF_ERROR(handlers_.configure(runtime, request.config()));
  }
  DEVLET_ASSIGN_OR_RETURN(const uint32_t events, EventsFor(runtime));
  log::Logger().V(2).Info("NRI plugin configured", "runtime", runtime.name, "version",
                          runtime.version, "nriVersion", runtime.nri_version.text, "events",
                          events);
  {
    std::lock_guard<std::mutex> lock(mu_);
    runtime_ = runtime;
    events_ = events;
  }
  api::ConfigureResponse response;
  response.set_events(static_cast<int32_t>(events));
  if (options_.failure_policy) {
    response.mutable_failure_policy()->set_fail_request(options_.failure_policy->fail_request);
    response.mutable_failure_policy()->set_keep_connected(options_.failure_policy->keep_connected);
  }
  return response;
}

// Pages are joined; only the last one (more = false) reaches the handler and may carry updates.
absl::StatusOr<api::SynchronizeResponse> Stub::Synchronize(api::SynchronizeRequest& request) {
  std::lock_guard<std::mutex> lock(sync_mu_);
  log::Logger().V(3).Info("NRI Synchronize page", "pods", request.pods_size(), "containers",
                          request.containers_size(), "more", request.more());
  for (auto& pod : *request.mutable_pods()) {
    sync_pods_.push_back(std::move(pod));
  }
  for (auto& container : *request.mutable_containers()) {
    sync_containers_.push_back(std::move(container));
  }
  api::SynchronizeResponse response;
  if (request.more()) {
    response.set_more(true);  // Intermediate page: no updates allowed.
    return response;
  }
  std::vector<api::PodSandbox> pods = std::move(sync_pods_);
  std::vector<api::Container> containers = std::move(sync_containers_);
  sync_pods_.clear();
  sync_containers_.clear();
  if (handlers_.synchronize) {
    DEVLET_ASSIGN_OR_RETURN(std::vector<api::ContainerUpdate> updates,
                            handlers_.synchronize(pods, containers));
    for (auto& update : updates) {
      *response.add_update() = std::move(update);
    }
  }
  return response;
}

absl::Status Stub::Register(Connection& connection) {
  api::RegisterPluginRequest request;
  request.set_plugin_name(options_.name);
  request.set_plugin_idx(options_.index);
  request.set_nri_version(kImplementedNriVersion);
  absl::StatusOr<std::string> reply =
      connection.Call(kRuntimeService, "RegisterPlugin", request.SerializeAsString(),
                      options_.registration_timeout);
  if (!reply.ok()) {
    return WithContext(reply.status(),
                       "registering NRI plugin " + options_.index + "-" + options_.name);
  }
  return absl::OkStatus();
}

bool Stub::SleepUnlessStopped(std::chrono::milliseconds duration) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait_for(lock, duration, [&] { return stop_; });
  return !stop_;
}

absl::Status Stub::Run() {
  std::chrono::milliseconds backoff = options_.min_backoff;
  auto next_backoff = [&] {
    const auto current = backoff;
    backoff = std::min(backoff * 2, options_.max_backoff);
    return current;
  };
  const log::Logger logger = log::Logger().With("plugin", options_.index + "-" + options_.name);
  while (true) {
    UniqueFd fd;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stop_) {
        return absl::OkStatus();
      }
    }
    if (pre_launched()) {
      std::lock_guard<std::mutex> lock(mu_);
      if (fd_used_) {
        return Unavailable("the runtime closed the pre-launched NRI plugin's socket");
      }
      fd_used_ = true;
      fd.reset(options_.socket_fd);
    } else {
      absl::StatusOr<UniqueFd> connected = ConnectUnix(options_.socket_path);
      if (!connected.ok()) {
        if (!options_.reconnect) {
          return connected.status();
        }
        logger.V(2).Info("NRI runtime not reachable, retrying", "socket", options_.socket_path,
                         "err", Message(connected.status()));
        if (!SleepUnlessStopped(next_backoff())) {
          return absl::OkStatus();
        }
        continue;
      }
      fd = std::move(*connected);
    }

    auto started = Connection::Start(
        std::move(fd), {.serve_conn = kPluginServiceConn,
                        .call_conn = kRuntimeServiceConn,
                        .services = services_,
                        .workers = options_.workers,
                        .on_close = [this](const absl::Status&) {
                          std::lock_guard<std::mutex> lock(mu_);
                          cv_.notify_all();
                        }});
    if (!started.ok()) {
      return started.status();
    }
    std::shared_ptr<Connection> connection(std::move(*started));
    absl::Status registered = Register(*connection);
    if (registered.ok()) {
      std::unique_lock<std::mutex> lock(mu_);
      connection_ = connection;
      ++registrations_;
      backoff = options_.min_backoff;
      logger.Info("NRI plugin registered", "socket",
                  pre_launched() ? std::string("inherited fd") : options_.socket_path);
      cv_.wait(lock, [&] { return stop_ || connection->closed(); });
      connection_.reset();
    } else {
      logger.Error(registered, "NRI plugin registration failed");
    }
    connection->Close();
    connection->WaitClosed(std::chrono::seconds(5));
    const absl::Status why = registered.ok() ? connection->close_reason() : registered;
    // Destroying the connection joins its threads, which may still be inside a handler the
    // runtime gave up on (a timed-out CreateContainer): do it off this thread, so that a stuck
    // handler never delays the reconnection. Never on one of the connection's own threads either:
    // callers of UpdateContainers may briefly hold a reference.
    {
      std::lock_guard<std::mutex> lock(mu_);
      reapers_.emplace_back([doomed = std::move(connection)]() mutable {
        while (doomed.use_count() > 1) {
          std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
        doomed.reset();
      });
    }
    {
      std::lock_guard<std::mutex> lock(sync_mu_);
      sync_pods_.clear();
      sync_containers_.clear();
    }
    if (options_.on_close) {
      options_.on_close(why);
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stop_) {
        return absl::OkStatus();
      }
    }
    if (pre_launched() || !options_.reconnect) {
      return why.ok() ? Unavailable("NRI connection closed") : why;
    }
    logger.Info("NRI connection lost, reconnecting", "err", Message(why));
    if (!SleepUnlessStopped(next_backoff())) {
      return absl::OkStatus();
    }
  }
}

void Stub::Stop() {
  std::shared_ptr<Connection> connection;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    connection = connection_;
  }
  cv_.notify_all();
  if (connection) {
    connection->Close();
  }
}

std::shared_ptr<Connection> Stub::CurrentConnection() const {
  std::lock_guard<std::mutex> lock(mu_);
  return connection_;
}

absl::StatusOr<std::vector<api::ContainerUpdate>> Stub::UpdateContainers(
    const std::vector<api::ContainerUpdate>& updates,
    const std::vector<api::ContainerEviction>& evictions) {
  std::optional<RuntimeInfo> info = runtime();
  std::shared_ptr<Connection> connection = CurrentConnection();
  if (!connection || !info) {
    return Unavailable("NRI plugin " + options_.name + " is not connected to a runtime");
  }
  if (!SupportsSafeUpdateContainers(info->nri_version)) {
    return FailedPrecondition("runtime " + info->name + " " + info->version + " (NRI " +
                              (info->nri_version.known ? info->nri_version.text : "unknown") +
                              ") may deadlock on UpdateContainers; it needs NRI v0.12.1 or newer");
  }
  api::UpdateContainersRequest request;
  for (const auto& update : updates) {
    *request.add_update() = update;
  }
  for (const auto& eviction : evictions) {
    *request.add_evict() = eviction;
  }
  const auto timeout = info->request_timeout.count() > 0 ? info->request_timeout
                                                          : std::chrono::milliseconds(2000);
  DEVLET_ASSIGN_OR_RETURN(std::string payload,
                          connection->Call(kRuntimeService, "UpdateContainers",
                                           request.SerializeAsString(), timeout));
  api::UpdateContainersResponse response;
  if (!response.ParseFromString(payload)) {
    return Internal("undecodable UpdateContainers reply");
  }
  return std::vector<api::ContainerUpdate>(response.failed().begin(), response.failed().end());
}

std::optional<RuntimeInfo> Stub::runtime() const {
  std::lock_guard<std::mutex> lock(mu_);
  return runtime_;
}

uint32_t Stub::events() const {
  std::lock_guard<std::mutex> lock(mu_);
  return events_;
}

int Stub::registrations() const {
  std::lock_guard<std::mutex> lock(mu_);
  return registrations_;
}

bool Stub::connected() const {
  std::lock_guard<std::mutex> lock(mu_);
  return connection_ != nullptr && !connection_->closed();
}

}  // namespace devlet::nri
