#include "devlet/nri/runtime_session.h"

#include <utility>

namespace devlet::nri {

absl::StatusOr<std::unique_ptr<RuntimeSession>> RuntimeSession::Accept(
    int listen_fd, std::chrono::milliseconds timeout) {
  DEVLET_ASSIGN_OR_RETURN(UniqueFd fd, AcceptUnix(listen_fd));
  return Start(std::move(fd), timeout);
}

absl::StatusOr<std::unique_ptr<RuntimeSession>> RuntimeSession::Start(
    UniqueFd trunk, std::chrono::milliseconds timeout) {
  std::unique_ptr<RuntimeSession> session(new RuntimeSession());
  RuntimeSession* self = session.get();
  auto services = std::make_shared<ServiceRegistry>();
  services->Register(
      kRuntimeService, "RegisterPlugin",
      [self](const CallContext&, std::string_view payload) -> absl::StatusOr<std::string> {
        api::RegisterPluginRequest request;
        if (!request.ParseFromArray(payload.data(), static_cast<int>(payload.size()))) {
          return InvalidArgument("undecodable RegisterPlugin request");
        }
        // Notified under the lock: once Start sees registered_, this handler is done with cv_.
        std::lock_guard<std::mutex> lock(self->mu_);
        self->name_ = request.plugin_name();
        self->index_ = request.plugin_idx();
        self->registered_ = true;
        self->cv_.notify_all();
        return api::Empty().SerializeAsString();
      });
  services->Register(
      kRuntimeService, "UpdateContainers",
      [self](const CallContext&, std::string_view payload) -> absl::StatusOr<std::string> {
        api::UpdateContainersRequest request;
        if (!request.ParseFromArray(payload.data(), static_cast<int>(payload.size()))) {
          return InvalidArgument("undecodable UpdateContainers request");
        }
        std::lock_guard<std::mutex> lock(self->mu_);
        self->updates_.push_back(request);
        return api::UpdateContainersResponse().SerializeAsString();
      });
  DEVLET_ASSIGN_OR_RETURN(session->connection_,
                          Connection::Start(std::move(trunk),
                                            {.serve_conn = kRuntimeServiceConn,
                                             .call_conn = kPluginServiceConn,
                                             .services = services}));
  std::unique_lock<std::mutex> lock(session->mu_);
  if (!session->cv_.wait_for(lock, timeout, [&] { return session->registered_; })) {
    return DeadlineExceeded("plugin did not register in time");
  }
  lock.unlock();
  return session;
}

absl::StatusOr<uint32_t> RuntimeSession::Configure(const RuntimeConfig& config) {
  request_timeout_ = config.request_timeout;
  api::ConfigureRequest request;
  request.set_config(config.config);
  request.set_runtime_name(config.runtime_name);
  request.set_runtime_version(config.runtime_version);
  request.set_registration_timeout(config.registration_timeout.count());
  request.set_request_timeout(config.request_timeout.count());
  request.set_nri_version(config.nri_version);
  DEVLET_ASSIGN_OR_RETURN(api::ConfigureResponse reply,
                          Call<api::ConfigureResponse>("Configure", request));
  return static_cast<uint32_t>(reply.events());
}

absl::StatusOr<std::vector<api::ContainerUpdate>> RuntimeSession::Synchronize(
    const std::vector<api::PodSandbox>& pods, const std::vector<api::Container>& containers,
    size_t page) {
  size_t pod_pos = 0;
  size_t ctr_pos = 0;
  while (true) {
    api::SynchronizeRequest request;
    const size_t pod_n = page == 0 ? pods.size() : std::min(page, pods.size() - pod_pos);
    const size_t ctr_n =
        page == 0 ? containers.size() : std::min(page, containers.size() - ctr_pos);
    for (size_t i = 0; i < pod_n; ++i) {
      *request.add_pods() = pods[pod_pos + i];
    }
    for (size_t i = 0; i < ctr_n; ++i) {
      *request.add_containers() = containers[ctr_pos + i];
    }
    pod_pos += pod_n;
    ctr_pos += ctr_n;
    const bool more = pod_pos < pods.size() || ctr_pos < containers.size();
    request.set_more(more);
    DEVLET_ASSIGN_OR_RETURN(api::SynchronizeResponse reply,
                            Call<api::SynchronizeResponse>("Synchronize", request));
    if (!more) {
      return std::vector<api::ContainerUpdate>(reply.update().begin(), reply.update().end());
    }
    if (!reply.more() || reply.update_size() > 0) {
      return FailedPrecondition("plugin does not handle split sync requests");
    }
  }
}

std::string RuntimeSession::plugin_name() const {
  std::lock_guard<std::mutex> lock(mu_);
  return name_;
}

std::string RuntimeSession::plugin_index() const {
  std::lock_guard<std::mutex> lock(mu_);
  return index_;
}

std::vector<api::UpdateContainersRequest> RuntimeSession::updates() const {
  std::lock_guard<std::mutex> lock(mu_);
  return updates_;
}

}  // namespace devlet::nri
