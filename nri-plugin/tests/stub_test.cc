#include "devlet/nri/stub.h"

#include <stdlib.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <future>
#include <thread>

#include "devlet/common/status.h"
#include "devlet/common/testing/status_matchers.h"
#include "devlet/nri/runtime_session.h"
#include "devlet/nri/version.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace devlet::nri {
namespace {

using ::devlet::testing::StatusIs;
using ::testing::HasSubstr;
using namespace std::chrono_literals;

TEST(VersionTest, InferenceAndMasks) {
  EXPECT_EQ(InferNriVersion("containerd", "v1.7.20").text, "v0.6.1");
  EXPECT_EQ(InferNriVersion("containerd", "1.7.3").text, "v0.3.0");
  EXPECT_EQ(InferNriVersion("containerd", "v2.1.3").text, "v0.8.0");
  EXPECT_EQ(InferNriVersion("containerd", "v2.2.0").text, "v0.10.0");
  EXPECT_EQ(InferNriVersion("containerd", "v2.2.0-rc.1").text, "v0.10.0");
  EXPECT_EQ(InferNriVersion("containerd", "v2.2.3").text, "v0.11.0");
  EXPECT_EQ(InferNriVersion("cri-o", "1.33.2").text, "v0.9.1-pre");
  EXPECT_EQ(InferNriVersion("cri-o", "1.26.1").text, "v0.2.0");
  EXPECT_FALSE(InferNriVersion("containerd", "v1.6.9").known);
  EXPECT_FALSE(InferNriVersion("podman", "v5.0.0").known);
  EXPECT_EQ(EffectiveNriVersion("v0.12.5", "containerd", "v1.7.0").text, "v0.12.5");
  EXPECT_EQ(EffectiveNriVersion("unknown", "containerd", "v1.7.0").text, "v0.3.0");
  EXPECT_EQ(ValidEventsMask(ParseNriVersion("v0.9.0")), 0x7FFu);
  EXPECT_EQ(ValidEventsMask(ParseNriVersion("v0.10.0")), 0x3FFFu);
  EXPECT_EQ(ValidEventsMask(NriVersion{}), 0x7FFu);
  EXPECT_FALSE(SupportsSafeUpdateContainers(ParseNriVersion("v0.12.0")));
  EXPECT_TRUE(SupportsSafeUpdateContainers(ParseNriVersion("v0.12.1")));
  EXPECT_FALSE(SupportsSafeUpdateContainers(ParseNriVersion("v0.12.1-rc.1")));
  EXPECT_TRUE(SupportsCdiDeviceAdjustment(ParseNriVersion("v0.8.0")));
  EXPECT_FALSE(SupportsCdiDeviceAdjustment(ParseNriVersion("v0.6.1")));
}

TEST(StubOptionsTest, Validation) {
  EXPECT_THAT(Stub::Create({}, {.name = "bad name", .index = "10", .use_environment = false}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("bad name")));
  EXPECT_THAT(Stub::Create({}, {.name = "devlet", .index = "1", .use_environment = false}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("two digits")));
}

TEST(StubOptionsTest, EnvironmentWins) {
  ::setenv(kPluginNameEnv, "from-env", 1);
  ::setenv(kPluginIdxEnv, "42", 1);
  ::setenv(kPluginSocketEnv, "3", 1);
  auto stub = Stub::Create({}, {.name = "devlet", .index = "10"});
  ::unsetenv(kPluginNameEnv);
  ::unsetenv(kPluginIdxEnv);
  ::unsetenv(kPluginSocketEnv);
  ASSERT_TRUE(stub.ok());
  EXPECT_EQ((*stub)->name(), "from-env");
  EXPECT_EQ((*stub)->index(), "42");
  EXPECT_TRUE((*stub)->pre_launched());
  ::setenv(kPluginSocketEnv, "three", 1);
  EXPECT_THAT(Stub::Create({}, {.name = "devlet", .index = "10"}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("NRI_PLUGIN_SOCKET")));
  ::unsetenv(kPluginSocketEnv);
}

struct Recorder {
  std::mutex mu;
  std::vector<std::string> events;
  size_t synced_pods = 0;
  size_t synced_containers = 0;
  void Add(std::string event) {
    std::lock_guard<std::mutex> lock(mu);
    events.push_back(std::move(event));
  }
  std::vector<std::string> Events() {
    std::lock_guard<std::mutex> lock(mu);
    return events;
  }
};

Handlers RecordingHandlers(Recorder& recorder) {
  Handlers h;
  h.run_pod_sandbox = [&recorder](const api::PodSandbox& pod) {
    recorder.Add("RunPodSandbox:" + pod.uid());
    return absl::OkStatus();
  };
  h.update_pod_sandbox = [&recorder](const api::UpdatePodSandboxRequest& request) {
    recorder.Add("UpdatePodSandbox:" + request.pod().uid());
    return absl::OkStatus();
  };
  h.remove_container = [&recorder](const api::PodSandbox&, const api::Container& ctr) {
    recorder.Add("RemoveContainer:" + ctr.id());
    return absl::OkStatus();
  };
  h.create_container = [&recorder](const api::PodSandbox& pod, const api::Container& ctr)
      -> absl::StatusOr<api::CreateContainerResponse> {
    recorder.Add("CreateContainer:" + ctr.id());
    if (pod.uid() == "refuse") {
      return FailedPrecondition("claim ns/gpu of pod refuse is not prepared");
    }
    api::CreateContainerResponse response;
    (*response.mutable_adjust()->mutable_annotations())["seen"] = pod.uid();
    return response;
  };
  h.synchronize = [&recorder](const std::vector<api::PodSandbox>& pods,
                              const std::vector<api::Container>& containers)
      -> absl::StatusOr<std::vector<api::ContainerUpdate>> {
    std::lock_guard<std::mutex> lock(recorder.mu);
    recorder.synced_pods = pods.size();
    recorder.synced_containers = containers.size();
    api::ContainerUpdate update;
    update.set_container_id("c0");
    return std::vector<api::ContainerUpdate>{update};
  };
  return h;
}

class StubTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/devlet-nri-XXXXXX";
    dir_ = ::mkdtemp(tmpl);
    socket_path_ = dir_ + "/nri.sock";
    auto listener = ListenUnix(socket_path_);
    ASSERT_TRUE(listener.ok());
    listener_ = std::move(*listener);
  }
  void TearDown() override {
    if (stub_) {
      stub_->Stop();
    }
    if (run_.valid()) {
      run_.wait();
    }
    std::filesystem::remove_all(dir_);
  }

  void StartStub(Handlers handlers, StubOptions options = {}) {
    options.name = "devlet";
    options.index = "10";
    options.socket_path = socket_path_;
    options.use_environment = false;
    options.min_backoff = 10ms;
    options.max_backoff = 50ms;
    auto stub = Stub::Create(std::move(handlers), std::move(options));
    ASSERT_TRUE(stub.ok()) << stub.status();
    stub_ = std::move(*stub);
    run_ = std::async(std::launch::async, [this] { return stub_->Run(); });
  }

  std::unique_ptr<RuntimeSession> Accept() {
    auto session = RuntimeSession::Accept(listener_.get(), 5s);
    EXPECT_TRUE(session.ok()) << session.status();
    return session.ok() ? std::move(*session) : nullptr;
  }

  std::string dir_;
  std::string socket_path_;
  UniqueFd listener_;
  std::unique_ptr<Stub> stub_;
  std::future<absl::Status> run_;
};

api::PodSandbox Pod(std::string uid) {
  api::PodSandbox pod;
  pod.set_id("sandbox-" + uid);
  pod.set_uid(uid);
  pod.set_name("pod-" + uid);
  pod.set_namespace_("default");
  return pod;
}

TEST_F(StubTest, RegisterConfigureEventsAndSubscription) {
  Recorder recorder;
  StartStub(RecordingHandlers(recorder));
  auto session = Accept();
  ASSERT_NE(session, nullptr);
  EXPECT_EQ(session->plugin_name(), "devlet");
  EXPECT_EQ(session->plugin_index(), "10");
  const uint32_t want = EventBit(api::RUN_POD_SANDBOX) | EventBit(api::UPDATE_POD_SANDBOX) |
                        EventBit(api::CREATE_CONTAINER) | EventBit(api::REMOVE_CONTAINER);
  EXPECT_THAT(session->Configure({}), devlet::testing::IsOkAndHolds(want));
  // A containerd 1.7 runtime does not know UpdatePodSandbox: the bit is dropped.
  EXPECT_THAT(session->Configure({.runtime_name = "containerd",
                                  .runtime_version = "v1.7.20",
                                  .nri_version = ""}),
              devlet::testing::IsOkAndHolds(want & 0x7FFu));
  ASSERT_TRUE(stub_->runtime().has_value());
  EXPECT_EQ(stub_->runtime()->nri_version.text, "v0.6.1");
  EXPECT_TRUE(stub_->runtime()->nri_version_inferred);

  api::RunPodSandboxRequest run;
  *run.mutable_pod() = Pod("u1");
  ASSERT_OK(session->Call<api::RunPodSandboxResponse>("RunPodSandbox", run));
  api::StateChangeEvent state;
  state.set_event(api::RUN_POD_SANDBOX);
  *state.mutable_pod() = Pod("u2");
  ASSERT_OK(session->Call<api::Empty>("StateChange", state));
  state.set_event(api::REMOVE_CONTAINER);
  state.mutable_container()->set_id("ctr9");
  ASSERT_OK(session->Call<api::Empty>("StateChange", state));

  api::CreateContainerRequest create;
  *create.mutable_pod() = Pod("u1");
  create.mutable_container()->set_id("ctr1");
  auto reply = session->Call<api::CreateContainerResponse>("CreateContainer", create);
  ASSERT_OK(reply);
  EXPECT_EQ(reply->adjust().annotations().at("seen"), "u1");
  *create.mutable_pod() = Pod("refuse");
  EXPECT_THAT(session->Call<api::CreateContainerResponse>("CreateContainer", create),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("not prepared")));
  // Events without a handler are answered (empty), unknown methods are Unimplemented.
  api::StopContainerRequest stop;
  ASSERT_OK(session->Call<api::StopContainerResponse>("StopContainer", stop));
  EXPECT_THAT(session->Call<api::Empty>("NoSuchMethod", stop),
              StatusIs(absl::StatusCode::kUnimplemented));
  EXPECT_THAT(recorder.Events(),
              ::testing::ElementsAre("RunPodSandbox:u1", "RunPodSandbox:u2",
                                     "RemoveContainer:ctr9", "CreateContainer:ctr1",
                                     "CreateContainer:ctr1"));
}

TEST_F(StubTest, UndecodablePayloadIsRefusedAndTheConnectionSurvives) {
  Recorder recorder;
  StartStub(RecordingHandlers(recorder));
  auto session = Accept();
  ASSERT_NE(session, nullptr);
  EXPECT_THAT(session->connection().Call(kPluginService, "CreateContainer",
                                         std::string("\x0a\xff\xff\xff\xff\x0f", 6), 2s),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("undecodable")));
  api::CreateContainerRequest create;
  *create.mutable_pod() = Pod("u1");
  ASSERT_OK(session->Call<api::CreateContainerResponse>("CreateContainer", create));
}

TEST_F(StubTest, SynchronizePaging) {
  Recorder recorder;
  StartStub(RecordingHandlers(recorder));
  auto session = Accept();
  ASSERT_NE(session, nullptr);
  ASSERT_OK(session->Configure({}));
  std::vector<api::PodSandbox> pods;
  std::vector<api::Container> containers;
  for (int i = 0; i < 10; ++i) {
    pods.push_back(Pod("p" + std::to_string(i)));
  }
  for (int i = 0; i < 7; ++i) {
    api::Container c;
    c.set_id("c" + std::to_string(i));
    containers.push_back(c);
  }
  auto updates = session->Synchronize(pods, containers, 3);
  ASSERT_OK(updates);
  EXPECT_EQ(updates->size(), 1u);
  EXPECT_EQ(recorder.synced_pods, 10u);
  EXPECT_EQ(recorder.synced_containers, 7u);
  // A second full sync is not merged with the first.
  ASSERT_OK(session->Synchronize(pods, {}, 0));
  EXPECT_EQ(recorder.synced_pods, 10u);
  EXPECT_EQ(recorder.synced_containers, 0u);
}

TEST_F(StubTest, StateChangeOnlyModeRefusesDedicatedRpcs) {
  Recorder recorder;
  StartStub(RecordingHandlers(recorder), {.state_change_only = true});
  auto session = Accept();
  ASSERT_NE(session, nullptr);
  api::RunPodSandboxRequest run;
  *run.mutable_pod() = Pod("u1");
  EXPECT_THAT(session->Call<api::RunPodSandboxResponse>("RunPodSandbox", run),
              StatusIs(absl::StatusCode::kUnimplemented, HasSubstr("method RunPodSandbox")));
  api::StateChangeEvent state;
  state.set_event(api::RUN_POD_SANDBOX);
  *state.mutable_pod() = Pod("u1");
  ASSERT_OK(session->Call<api::Empty>("StateChange", state));
  EXPECT_THAT(recorder.Events(), ::testing::ElementsAre("RunPodSandbox:u1"));
}


// Every event, through its dedicated rpc and (for the events without a reply of their own) through
// StateChange: reaches its own handler, and only that one.
Handlers HandlersForEveryEvent(Recorder& recorder) {
  Handlers h;
  auto pod = [&recorder](std::string name) {
    return [&recorder, name](const api::PodSandbox& p) {
      recorder.Add(name + ":" + p.uid());
      return absl::OkStatus();
    };
  };
  auto ctr = [&recorder](std::string name) {
    return [&recorder, name](const api::PodSandbox&, const api::Container& c) {
      recorder.Add(name + ":" + c.id());
      return absl::OkStatus();
    };
  };
  h.run_pod_sandbox = pod("RunPodSandbox");
  h.update_pod_sandbox = [&recorder](const api::UpdatePodSandboxRequest& request) {
    recorder.Add("UpdatePodSandbox:" + request.pod().uid());
    return absl::OkStatus();
  };
  h.post_update_pod_sandbox = pod("PostUpdatePodSandbox");
  h.stop_pod_sandbox = pod("StopPodSandbox");
  h.remove_pod_sandbox = pod("RemovePodSandbox");
  h.create_container = [&recorder](const api::PodSandbox&, const api::Container& c)
      -> absl::StatusOr<api::CreateContainerResponse> {
    recorder.Add("CreateContainer:" + c.id());
    api::CreateContainerResponse response;
    (*response.mutable_adjust()->mutable_annotations())["by"] = "create";
    return response;
  };
  h.post_create_container = ctr("PostCreateContainer");
  h.start_container = ctr("StartContainer");
  h.post_start_container = ctr("PostStartContainer");
  h.update_container = [&recorder](const api::PodSandbox&, const api::Container& c,
                                   const api::LinuxResources& resources)
      -> absl::StatusOr<api::UpdateContainerResponse> {
    recorder.Add("UpdateContainer:" + c.id() + ":" + resources.cpu().cpus());
    return api::UpdateContainerResponse();
  };
  h.post_update_container = ctr("PostUpdateContainer");
  h.stop_container = [&recorder](const api::PodSandbox&, const api::Container& c)
      -> absl::StatusOr<api::StopContainerResponse> {
    recorder.Add("StopContainer:" + c.id());
    return FailedPrecondition("stop refused for " + c.id());
  };
  h.remove_container = ctr("RemoveContainer");
  h.validate_container_adjustment = [&recorder](
      const api::ValidateContainerAdjustmentRequest& request)
      -> absl::StatusOr<api::ValidateContainerAdjustmentResponse> {
    recorder.Add("ValidateContainerAdjustment:" + request.container().id());
    api::ValidateContainerAdjustmentResponse response;
    response.set_reject(true);
    return response;
  };
  return h;
}

template <typename Request>
Request PodAndContainer(const std::string& id) {
  Request request;
  *request.mutable_pod() = Pod("p-" + id);
  request.mutable_container()->set_id("c-" + id);
  return request;
}

TEST(SubscriptionTest, EveryHandlerSubscribesItsEvent) {
  Recorder recorder;
  EXPECT_EQ(SubscribedEvents(HandlersForEveryEvent(recorder)), 0x3FFFu);
  EXPECT_EQ(SubscribedEvents(Handlers()), 0u);
  Handlers one;
  one.post_start_container = [](const api::PodSandbox&, const api::Container&) {
    return absl::OkStatus();
  };
  EXPECT_EQ(SubscribedEvents(one), EventBit(api::POST_START_CONTAINER));
}

TEST_F(StubTest, EveryEventReachesItsHandler) {
  Recorder recorder;
  StartStub(HandlersForEveryEvent(recorder));
  auto session = Accept();
  ASSERT_NE(session, nullptr);
  EXPECT_THAT(session->Configure({}), devlet::testing::IsOkAndHolds(0x3FFFu));
  EXPECT_THAT(session->Configure({.nri_version = "v0.9.0"}),
              devlet::testing::IsOkAndHolds(0x7FFu));

  api::RunPodSandboxRequest run;
  *run.mutable_pod() = Pod("run");
  ASSERT_OK(session->Call<api::RunPodSandboxResponse>("RunPodSandbox", run));
  api::UpdatePodSandboxRequest update_pod;
  *update_pod.mutable_pod() = Pod("upd");
  ASSERT_OK(session->Call<api::UpdatePodSandboxResponse>("UpdatePodSandbox", update_pod));
  api::PostUpdatePodSandboxRequest post_update_pod;
  *post_update_pod.mutable_pod() = Pod("pupd");
  ASSERT_OK(
      session->Call<api::PostUpdatePodSandboxResponse>("PostUpdatePodSandbox", post_update_pod));
  api::StopPodSandboxRequest stop_pod;
  *stop_pod.mutable_pod() = Pod("stop");
  ASSERT_OK(session->Call<api::StopPodSandboxResponse>("StopPodSandbox", stop_pod));
  api::RemovePodSandboxRequest remove_pod;
  *remove_pod.mutable_pod() = Pod("rm");
  ASSERT_OK(session->Call<api::RemovePodSandboxResponse>("RemovePodSandbox", remove_pod));

  auto created = session->Call<api::CreateContainerResponse>(
      "CreateContainer", PodAndContainer<api::CreateContainerRequest>("create"));
  ASSERT_OK(created);
  EXPECT_EQ(created->adjust().annotations().at("by"), "create");
  ASSERT_OK(session->Call<api::PostCreateContainerResponse>(
      "PostCreateContainer", PodAndContainer<api::PostCreateContainerRequest>("pcreate")));
  ASSERT_OK(session->Call<api::StartContainerResponse>(
      "StartContainer", PodAndContainer<api::StartContainerRequest>("start")));
  ASSERT_OK(session->Call<api::PostStartContainerResponse>(
      "PostStartContainer", PodAndContainer<api::PostStartContainerRequest>("pstart")));
  auto update = PodAndContainer<api::UpdateContainerRequest>("update");
  update.mutable_linux_resources()->mutable_cpu()->set_cpus("0-3");
  ASSERT_OK(session->Call<api::UpdateContainerResponse>("UpdateContainer", update));
  ASSERT_OK(session->Call<api::PostUpdateContainerResponse>(
      "PostUpdateContainer", PodAndContainer<api::PostUpdateContainerRequest>("pupdate")));
  EXPECT_THAT(session->Call<api::StopContainerResponse>(
                  "StopContainer", PodAndContainer<api::StopContainerRequest>("stop")),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("stop refused for c-stop")));
  ASSERT_OK(session->Call<api::RemoveContainerResponse>(
      "RemoveContainer", PodAndContainer<api::RemoveContainerRequest>("rm")));
  api::ValidateContainerAdjustmentRequest validate;
  validate.mutable_container()->set_id("c-val");
  auto validated = session->Call<api::ValidateContainerAdjustmentResponse>(
      "ValidateContainerAdjustment", validate);
  ASSERT_OK(validated);
  EXPECT_TRUE(validated->reject());

  // The same events through StateChange (pre-v0.12 runtimes); the events with a reply of their
  // own never come that way and are ignored.
  for (api::Event event :
       {api::RUN_POD_SANDBOX, api::STOP_POD_SANDBOX, api::REMOVE_POD_SANDBOX,
        api::CREATE_CONTAINER, api::POST_CREATE_CONTAINER, api::START_CONTAINER,
        api::POST_START_CONTAINER, api::UPDATE_CONTAINER, api::POST_UPDATE_CONTAINER,
        api::STOP_CONTAINER, api::REMOVE_CONTAINER, api::UPDATE_POD_SANDBOX,
        api::POST_UPDATE_POD_SANDBOX, api::VALIDATE_CONTAINER_ADJUSTMENT}) {
    auto state = PodAndContainer<api::StateChangeEvent>("sc" + std::to_string(event));
    state.set_event(event);
    ASSERT_OK(session->Call<api::Empty>("StateChange", state)) << event;
  }

  EXPECT_THAT(
      recorder.Events(),
      ::testing::ElementsAre(
          "RunPodSandbox:run", "UpdatePodSandbox:upd", "PostUpdatePodSandbox:pupd",
          "StopPodSandbox:stop", "RemovePodSandbox:rm", "CreateContainer:c-create",
          "PostCreateContainer:c-pcreate", "StartContainer:c-start",
          "PostStartContainer:c-pstart", "UpdateContainer:c-update:0-3",
          "PostUpdateContainer:c-pupdate", "StopContainer:c-stop", "RemoveContainer:c-rm",
          "ValidateContainerAdjustment:c-val",
          // StateChange:
          "RunPodSandbox:p-sc1", "StopPodSandbox:p-sc2", "RemovePodSandbox:p-sc3",
          "PostCreateContainer:c-sc5", "StartContainer:c-sc6", "PostStartContainer:c-sc7",
          "PostUpdateContainer:c-sc9", "RemoveContainer:c-sc11", "PostUpdatePodSandbox:p-sc13"));
}

TEST_F(StubTest, StateChangeOnlyModeRefusesEveryDedicatedRpcWithAFallback) {
  Recorder recorder;
  StartStub(HandlersForEveryEvent(recorder), {.state_change_only = true});
  auto session = Accept();
  ASSERT_NE(session, nullptr);
  for (const char* method :
       {"RunPodSandbox", "PostUpdatePodSandbox", "StopPodSandbox", "RemovePodSandbox"}) {
    api::RunPodSandboxRequest request;
    *request.mutable_pod() = Pod("x");
    EXPECT_THAT(session->Call<api::Empty>(method, request),
                StatusIs(absl::StatusCode::kUnimplemented, HasSubstr(method)));
  }
  for (const char* method : {"PostCreateContainer", "StartContainer", "PostStartContainer",
                             "PostUpdateContainer", "RemoveContainer"}) {
    EXPECT_THAT(session->Call<api::Empty>(method,
                                          PodAndContainer<api::StartContainerRequest>("x")),
                StatusIs(absl::StatusCode::kUnimplemented, HasSubstr(method)));
  }
  // The events with a reply of their own are served as usual.
  ASSERT_OK(session->Call<api::CreateContainerResponse>(
      "CreateContainer", PodAndContainer<api::CreateContainerRequest>("create")));
  api::UpdatePodSandboxRequest update_pod;
  *update_pod.mutable_pod() = Pod("upd");
  ASSERT_OK(session->Call<api::UpdatePodSandboxResponse>("UpdatePodSandbox", update_pod));
  EXPECT_THAT(recorder.Events(),
              ::testing::ElementsAre("CreateContainer:c-create", "UpdatePodSandbox:upd"));
}
TEST_F(StubTest, ReconnectsAfterRuntimeGoesAway) {
  Recorder recorder;
  std::atomic<int> closes{0};
  StartStub(RecordingHandlers(recorder), {.on_close = [&](const absl::Status&) { ++closes; }});
  auto first = Accept();
  ASSERT_NE(first, nullptr);
  // The session sees RegisterPlugin before the stub reads the reply: wait for the stub's side.
  for (int i = 0; i < 200 && stub_->registrations() < 1; ++i) {
    std::this_thread::sleep_for(5ms);
  }
  ASSERT_EQ(stub_->registrations(), 1);
  first->connection().Close();
  first.reset();
  auto second = Accept();
  ASSERT_NE(second, nullptr);
  ASSERT_OK(second->Configure({}));
  for (int i = 0; i < 200 && stub_->registrations() < 2; ++i) {
    std::this_thread::sleep_for(5ms);
  }
  EXPECT_EQ(stub_->registrations(), 2);
  EXPECT_EQ(closes.load(), 1);
  api::CreateContainerRequest create;
  *create.mutable_pod() = Pod("u1");
  ASSERT_OK(second->Call<api::CreateContainerResponse>("CreateContainer", create));
}

TEST_F(StubTest, UpdateContainersNeedsSafeRuntime) {
  Recorder recorder;
  StartStub(RecordingHandlers(recorder));
  auto session = Accept();
  ASSERT_NE(session, nullptr);
  ASSERT_OK(session->Configure({.nri_version = "v0.12.0"}));
  for (int i = 0; i < 100 && !stub_->connected(); ++i) {
    std::this_thread::sleep_for(10ms);
  }
  api::ContainerUpdate update;
  update.set_container_id("c1");
  update.mutable_linux()->mutable_resources()->mutable_cpu()->set_cpus("0-3");
  EXPECT_THAT(stub_->UpdateContainers({update}),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("deadlock")));
  ASSERT_OK(session->Configure({.nri_version = "v0.12.1"}));
  ASSERT_OK(stub_->UpdateContainers({update}));
  ASSERT_EQ(session->updates().size(), 1u);
  EXPECT_EQ(session->updates()[0].update(0).linux().resources().cpu().cpus(), "0-3");
}

TEST(PreLaunchedStubTest, InheritedSocket) {
  auto fds = SocketPair();
  ASSERT_TRUE(fds.ok());
  Recorder recorder;
  auto stub = Stub::Create(RecordingHandlers(recorder),
                           {.name = "devlet",
                            .index = "05",
                            .socket_fd = fds->first.release(),
                            .use_environment = false});
  ASSERT_TRUE(stub.ok());
  auto run = std::async(std::launch::async, [&] { return (*stub)->Run(); });
  auto session = RuntimeSession::Start(std::move(fds->second), 5s);
  ASSERT_TRUE(session.ok()) << session.status();
  EXPECT_EQ((*session)->plugin_index(), "05");
  ASSERT_OK((*session)->Configure({}));
  (*session)->connection().Close();
  ASSERT_EQ(run.wait_for(5s), std::future_status::ready);
  EXPECT_THAT(run.get(), StatusIs(absl::StatusCode::kUnavailable));
}

TEST(ExternalStubTest, NoReconnectReturnsConnectError) {
  auto stub = Stub::Create({}, {.name = "devlet",
                                .index = "10",
                                .socket_path = "/nonexistent/nri.sock",
                                .use_environment = false,
                                .reconnect = false});
  ASSERT_TRUE(stub.ok());
  EXPECT_THAT((*stub)->Run(), StatusIs(absl::StatusCode::kNotFound));
}

}  // namespace
}  // namespace devlet::nri
