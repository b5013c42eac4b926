// The wired Agent on the simulated GPU server (hwloc XML + fake sysfs tree), through its real
// interfaces: ResourceSlices in a manifest directory, /healthz and /metrics over HTTP, the
// kubelet's DRAResourceHealth stream over the DRA socket, and hot-plug through uevents.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "agent_test_util.h"
#include "devlet/cdi/spec_dir.h"
#include "devlet/common/files.h"
#include "devlet/common/status.h"
#include "devlet/common/testing/status_matchers.h"
#include "devlet/devices/testing/fake_sysfs.h"
#include "devlet/devices/watcher.h"
#include "devlet/dra_kubelet/testing/kubelet_client.h"
#include "devlet/kube/client.h"
#include "devlet/node/adapters.h"
#include "devlet/node/agent.h"
#include "devlet/node/health_server.h"
#include "devlet/node/metrics.h"
#include "devlet/kube/codec.h"
#include "devlet/nri/runtime_session.h"
#include "devlet/nri/socket.h"
#include "nlohmann/json.hpp"
#include "dra-health/v1/api.grpc.pb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace devlet::node {
namespace {

namespace fs = std::filesystem;
namespace drav1 = ::k8s::io::kubelet::pkg::apis::dra::v1;
using ::devlet::dra_kubelet::testing::KubeletClient;
using ::devlet::node::testing::Eventually;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;
using namespace std::chrono_literals;

constexpr char kNic0[] = "0000:1a:00.0";  // nic-0 of the GPU server
constexpr char kGpu7[] = "0000:b9:00.0";  // gpu-7

// HttpGet sends one request to 127.0.0.1:port and returns the whole response.
std::string HttpRequest(int port, const std::string& method, const std::string& path) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    return "connect failed";
  }
  std::string request = method + " " + path + " HTTP/1.1\r\nHost: localhost\r\n\r\n";
  (void)::send(fd, request.data(), request.size(), MSG_NOSIGNAL);
  std::string response;
  char buffer[4096];
  ssize_t n;
  while ((n = ::recv(fd, buffer, sizeof(buffer), 0)) > 0) response.append(buffer, n);
  ::close(fd);
  return response;
}

// HealthStream is the kubelet's DRAResourceHealth (v1) stream on the agent's DRA socket.
class HealthStream {
 public:
  explicit HealthStream(const std::string& dra_socket)
      : stub_(::v1::DRAResourceHealth::NewStub(grpc::CreateChannel(
            "unix://" + dra_socket, grpc::InsecureChannelCredentials()))) {
    context_.set_deadline(std::chrono::system_clock::now() + 20s);
    reader_ = stub_->NodeWatchResources(&context_, {});
  }
  ~HealthStream() { Close(); }

  // Read reads the next snapshot; false when the stream has ended.
  bool Read() { return reader_->Read(&snapshot_); }

  // Entry returns `device`'s entry in the last snapshot, or nullptr.
  const ::v1::DeviceHealth* Entry(const std::string& device) const {
    for (const ::v1::DeviceHealth& entry : snapshot_.devices()) {
      if (entry.device().device_name() == device) return &entry;
    }
    return nullptr;
  }

  // ReadUntil reads snapshots until `device` has health `want` in one (the last snapshot read
  // counts), at most `reads` more; false when it never has.
  bool ReadUntil(const std::string& device, int want, int reads = 10) {
    for (int i = 0; i < reads; ++i) {
      const ::v1::DeviceHealth* entry = Entry(device);
      if (entry != nullptr && entry->health() == want) return true;
      if (!Read()) return false;
    }
    return false;
  }

  const ::v1::NodeWatchResourcesResponse& snapshot() const { return snapshot_; }

  // Close ends the stream from the kubelet's side (the tests do so before they stop the agent).
  void Close() {
    if (reader_ == nullptr) return;
    context_.TryCancel();
    reader_->Finish();
    reader_.reset();
  }

 private:
  std::unique_ptr<::v1::DRAResourceHealth::Stub> stub_;
  grpc::ClientContext context_;
  std::unique_ptr<grpc::ClientReader<::v1::NodeWatchResourcesResponse>> reader_;
  ::v1::NodeWatchResourcesResponse snapshot_;
};

class AgentTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ::unsetenv("NRI_PLUGIN_SOCKET");
    dir_ = fs::path("/tmp") / ("node-agent-" + std::to_string(::getpid()) + "-" +
                               ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "manifests");
    ASSERT_OK(devices::testing::AddGpuServer(fake_));
    ASSERT_OK_AND_ASSIGN(store_, kube::ManifestStore::Open({.dir = (dir_ / "manifests").string()}));
  }
  void TearDown() override { fs::remove_all(dir_); }

  AgentOptions Options() { return testing::SimulatedServerOptions(dir_, fake_); }

  // CreateClaim stores the ResourceClaim in `yaml` where the agent reads claims.
  void CreateClaim(const std::string& yaml) {
    absl::StatusOr<std::vector<kube::Object>> objects = kube::Decode(yaml);
    ASSERT_OK(objects.status());
    ASSERT_EQ(objects->size(), 1u);
    ASSERT_OK(store_->Create(objects->at(0)).status());
  }

  // Taints returns the taints of every published device that has some.
  std::map<std::string, std::vector<kube::DeviceTaint>> Taints() {
    std::map<std::string, std::vector<kube::DeviceTaint>> out;
    absl::StatusOr<std::vector<kube::ResourceSlice>> slices =
        kube::ListAs<kube::ResourceSlice>(*store_, {.field_driver = "devlet.io"});
    EXPECT_OK(slices.status());
    if (!slices.ok()) return out;
    for (const kube::ResourceSlice& slice : *slices) {
      for (const kube::Device& device : slice.spec.devices) {
        if (!device.taints.empty()) out[device.name] = device.taints;
      }
    }
    return out;
  }

  // DeviceNames returns the published device names.
  std::vector<std::string> DeviceNames() {
    std::vector<std::string> out;
    absl::StatusOr<std::vector<kube::ResourceSlice>> slices =
        kube::ListAs<kube::ResourceSlice>(*store_, {.field_driver = "devlet.io"});
    if (!slices.ok()) return out;
    for (const kube::ResourceSlice& slice : *slices) {
      for (const kube::Device& device : slice.spec.devices) out.push_back(device.name);
    }
    return out;
  }

  // StartWithRuntime starts the agent with an NRI socket of its own (`name` keeps the path under
  // sun_path's 108 bytes) and plays the runtime's side of the NRI handshake.
  void StartWithRuntime(const std::string& name, AgentOptions& options) {
    options.nri_socket = "/tmp/" + name + "-" + std::to_string(::getpid()) + ".sock";
    options.nri_after_registration = false;
    ASSERT_OK_AND_ASSIGN(nri_listener_, nri::ListenUnix(options.nri_socket));
    ASSERT_OK_AND_ASSIGN(agent_, Agent::Start(options, *store_));
    ASSERT_OK_AND_ASSIGN(runtime_, nri::RuntimeSession::Accept(nri_listener_.get(), 10s));
    ASSERT_OK(runtime_->Configure({}).status());
    ASSERT_OK(runtime_->Synchronize({}, {}).status());
  }

  fs::path dir_;
  devices::testing::FakeSysfs fake_;
  std::unique_ptr<kube::ManifestStore> store_;
  nri::UniqueFd nri_listener_;
  std::unique_ptr<Agent> agent_;
  std::unique_ptr<nri::RuntimeSession> runtime_;
};

TEST_F(AgentTest, HealthTaintsFollowLinkAndRemovalAndGoAwayOnRecovery) {
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Agent> agent, Agent::Start(Options(), *store_));
  EXPECT_EQ(agent->CheckHealthNow(), 0);
  EXPECT_THAT(Taints(), IsEmpty());
  std::int64_t generation = agent->Status().slice_generation;

  // nic-0's link goes down: NoSchedule.
  ASSERT_OK(fake_.SetOperstate(kNic0, "down"));
  EXPECT_EQ(agent->CheckHealthNow(), 1);
  auto taints = Taints();
  ASSERT_EQ(taints.size(), 1u);
  ASSERT_TRUE(taints.contains("nic-0"));
  EXPECT_EQ(taints["nic-0"][0].key, "devlet.io/unhealthy");
  EXPECT_EQ(taints["nic-0"][0].value, "LinkDown");
  EXPECT_EQ(taints["nic-0"][0].effect, "NoSchedule");
  EXPECT_TRUE(taints["nic-0"][0].time_added.has_value());
  EXPECT_GT(agent->Status().slice_generation, generation);
  // Nothing changed: no new generation (the taint keeps its timeAdded).
  generation = agent->Status().slice_generation;
  EXPECT_EQ(agent->CheckHealthNow(), 1);
  EXPECT_EQ(agent->Status().slice_generation, generation);

  // gpu-7 falls off the bus (no rescan yet): NoExecute on it as well.
  ASSERT_OK(fake_.RemovePciDevice(kGpu7));
  EXPECT_EQ(agent->CheckHealthNow(), 2);
  taints = Taints();
  ASSERT_TRUE(taints.contains("gpu-7"));
  EXPECT_EQ(taints["gpu-7"][0].value, "DeviceRemoved");
  EXPECT_EQ(taints["gpu-7"][0].effect, "NoExecute");
  EXPECT_EQ(agent->metrics().Value(kDevicesMetric, {{"health", "Unhealthy"}}), 0)
      << "gauges are collected at scrape time";
  std::string metrics = agent->MetricsText();
  EXPECT_THAT(metrics, HasSubstr("devlet_node_devices{health=\"Unhealthy\"} 2\n"));

  // The link comes back: nic-0's taint goes, gpu-7's stays.
  ASSERT_OK(fake_.SetOperstate(kNic0, "up"));
  EXPECT_EQ(agent->CheckHealthNow(), 1);
  taints = Taints();
  EXPECT_FALSE(taints.contains("nic-0"));
  EXPECT_TRUE(taints.contains("gpu-7"));
  agent->Stop();
}

// AER as a health source at agent level: PCIe AER counters of gpu-3 that grow taint it in the
// published slice (non-fatal: NoSchedule; fatal: NoExecute, not downgraded by later non-fatal
// ones) and make it UNHEALTHY in the kubelet's DRAResourceHealth stream; AER has no "cleared"
// state in sysfs (the counters only grow until a reset), so devlet calls the device recovered
// after HealthOptions::aer_recovery_checks (3) checks without new errors: taint and Unhealthy go.
TEST_F(AgentTest, AerErrorsTaintUntilQuietChecks) {
  constexpr char kGpu3[] = "0000:3a:00.0";
  // Counters present at the first check are the baseline (errors from before devlet started).
  ASSERT_OK(fake_.SetAerCounter(kGpu3, "fatal", 0));
  ASSERT_OK(fake_.SetAerCounter(kGpu3, "nonfatal", 4));
  ASSERT_OK(fake_.SetAerCounter(kGpu3, "correctable", 0));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Agent> agent, Agent::Start(Options(), *store_));
  EXPECT_EQ(agent->CheckHealthNow(), 0);
  EXPECT_THAT(Taints(), IsEmpty());

  HealthStream health(agent->Status().dra_socket);
  ASSERT_TRUE(health.Read());
  ASSERT_TRUE(health.ReadUntil("gpu-3", ::v1::HEALTHY));

  // Two new non-fatal errors.
  ASSERT_OK(fake_.SetAerCounter(kGpu3, "nonfatal", 6));
  EXPECT_EQ(agent->CheckHealthNow(), 1);
  auto taints = Taints();
  ASSERT_TRUE(taints.contains("gpu-3"));
  EXPECT_EQ(taints["gpu-3"][0].key, "devlet.io/unhealthy");
  EXPECT_EQ(taints["gpu-3"][0].value, "AERNonFatalError");
  EXPECT_EQ(taints["gpu-3"][0].effect, "NoSchedule");
  ASSERT_TRUE(health.ReadUntil("gpu-3", ::v1::UNHEALTHY));
  EXPECT_THAT(health.Entry("gpu-3")->message(), HasSubstr("AERNonFatalError"));
  EXPECT_THAT(health.Entry("gpu-3")->message(), HasSubstr("2 new non-fatal PCIe AER error(s)"));

  // A fatal error: NoExecute.
  ASSERT_OK(fake_.SetAerCounter(kGpu3, "fatal", 1));
  EXPECT_EQ(agent->CheckHealthNow(), 1);
  taints = Taints();
  ASSERT_TRUE(taints.contains("gpu-3"));
  EXPECT_EQ(taints["gpu-3"][0].value, "AERFatalError");
  EXPECT_EQ(taints["gpu-3"][0].effect, "NoExecute");

  // Quiet checks: still unhealthy for two, recovered at the third.
  EXPECT_EQ(agent->CheckHealthNow(), 1);
  EXPECT_EQ(agent->CheckHealthNow(), 1);
  EXPECT_EQ(Taints()["gpu-3"][0].value, "AERFatalError");
  EXPECT_EQ(agent->CheckHealthNow(), 0);
  EXPECT_THAT(Taints(), IsEmpty());
  EXPECT_TRUE(health.ReadUntil("gpu-3", ::v1::HEALTHY));
  health.Close();
  agent->Stop();
}

TEST_F(AgentTest, MetricsAndHealthzOverHttp) {
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Agent> agent, Agent::Start(Options(), *store_));
  Agent* raw = agent.get();
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<HealthServer> server,
                       HealthServer::Start(
                           0, [raw] { return raw->Healthy(); }, [raw] { return raw->MetricsText(); }));
  std::string healthz = HttpRequest(server->port(), "GET", "/healthz");
  EXPECT_THAT(healthz, HasSubstr("HTTP/1.1 200 OK"));
  EXPECT_THAT(healthz, HasSubstr("\r\n\r\nok\n"));

  std::string metrics = HttpRequest(server->port(), "GET", "/metrics?x=1");
  EXPECT_THAT(metrics, HasSubstr("HTTP/1.1 200 OK"));
  EXPECT_THAT(metrics, HasSubstr("Content-Type: text/plain; version=0.0.4"));
  EXPECT_THAT(metrics, HasSubstr("# TYPE devlet_node_device_prepare_total counter\n"));
  EXPECT_THAT(metrics,
              HasSubstr("# TYPE devlet_node_device_prepare_duration_seconds histogram\n"));
  EXPECT_THAT(metrics, HasSubstr("devlet_node_devices{health=\"Healthy\"} 12\n"));
  EXPECT_THAT(metrics, HasSubstr("devlet_node_resourceslice_generation 1\n"));
  EXPECT_THAT(metrics, HasSubstr("devlet_node_kubelet_registered 0\n"));
  EXPECT_THAT(metrics, HasSubstr("devlet_node_prepared_claims 0\n"));

  std::string head = HttpRequest(server->port(), "HEAD", "/healthz");
  EXPECT_THAT(head, HasSubstr("Content-Length: 3\r\n"));
  EXPECT_THAT(head, Not(HasSubstr("ok\n")));
  EXPECT_THAT(HttpRequest(server->port(), "POST", "/healthz"), HasSubstr("405"));
  EXPECT_THAT(HttpRequest(server->port(), "GET", "/nope"), HasSubstr("404"));

  // Without the DRA socket the agent is not healthy.
  fs::remove(agent->Status().dra_socket);
  EXPECT_THAT(HttpRequest(server->port(), "GET", "/healthz"),
              HasSubstr("HTTP/1.1 503 Service Unavailable"));
  server->Stop();
  agent->Stop();
}

TEST_F(AgentTest, KubeletHealthStreamReportsUnhealthyAndRecovery) {
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Agent> agent, Agent::Start(Options(), *store_));
  HealthStream health(agent->Status().dra_socket);
  ASSERT_TRUE(health.Read());
  ASSERT_NE(health.Entry("nic-0"), nullptr);
  EXPECT_EQ(health.Entry("nic-0")->health(), ::v1::HEALTHY);
  EXPECT_EQ(health.snapshot().devices(0).device().pool_name(), "node-1");

  ASSERT_OK(fake_.SetOperstate(kNic0, "down"));
  agent->CheckHealthNow();
  ASSERT_TRUE(health.ReadUntil("nic-0", ::v1::UNHEALTHY));
  EXPECT_THAT(health.Entry("nic-0")->message(), HasSubstr("LinkDown"));

  ASSERT_OK(fake_.SetOperstate(kNic0, "up"));
  agent->CheckHealthNow();
  EXPECT_TRUE(health.ReadUntil("nic-0", ::v1::HEALTHY));
  health.Close();
  agent->Stop();
}

TEST_F(AgentTest, UeventRescanRepublishesWithoutTheUnpluggedDevice) {
  devices::ManualUeventSource uevents;
  AgentOptions options = Options();
  options.uevent_source = &uevents;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Agent> agent, Agent::Start(options, *store_));
  std::vector<std::string> before = DeviceNames();
  ASSERT_THAT(before, ::testing::Contains("gpu-7"));
  std::int64_t generation = agent->Status().slice_generation;

  // An irrelevant event changes nothing.
  uevents.Push({.action = "change", .devpath = "/devices/virtual/block/loop0", .subsystem = "block"});
  std::this_thread::sleep_for(1500ms);
  EXPECT_EQ(agent->Status().slice_generation, generation);

  ASSERT_OK(fake_.RemovePciDevice(kGpu7));
  uevents.Push({.action = "remove",
                .devpath = "/devices/pci0000:b7/0000:b7:02.0/0000:b9:00.0",
                .subsystem = "pci"});
  Eventually([&] { return agent->Status().slice_generation != generation; });
  EXPECT_GT(agent->Status().slice_generation, generation);
  std::vector<std::string> after = DeviceNames();
  EXPECT_THAT(after, Not(::testing::Contains("gpu-7")));
  EXPECT_EQ(after.size(), before.size() - 1);
  // Gone devices lose their health state too (nothing left to taint).
  EXPECT_EQ(agent->CheckHealthNow(), 0);
  agent->Stop();
}

TEST_F(AgentTest, DeletedSlicesAreRepairedThroughTheWatch) {
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Agent> agent, Agent::Start(Options(), *store_));
  ASSERT_OK_AND_ASSIGN(std::vector<kube::ResourceSlice> slices,
                       kube::ListAs<kube::ResourceSlice>(*store_, {.field_driver = "devlet.io"}));
  ASSERT_FALSE(slices.empty());
  for (const kube::ResourceSlice& slice : slices) {
    ASSERT_OK(store_->Delete(kube::Kind::kResourceSlice, {.name = slice.metadata.name}));
  }
  std::vector<std::string> names;
  Eventually([&] {
    names = DeviceNames();
    return !names.empty();
  });
  EXPECT_EQ(names.size(), 12u);  // 8 GPUs, 2 NICs, 2 CPU devices
  agent->Stop();
}

TEST_F(AgentTest, PreparedClaimGetsReadyStatusAndUnprepareClearsIt) {
  ASSERT_NO_FATAL_FAILURE(CreateClaim(R"(
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: train, namespace: ml, uid: claim-uid-1}
spec: {devices: {requests: [{name: gpu, exactly: {deviceClassName: gpu.devlet.io}}]}}
status:
  allocation:
    devices:
      results: [{request: gpu, driver: devlet.io, pool: node-1, device: gpu-0}]
  reservedFor: [{resource: pods, name: p, uid: pod-uid-1}]
)"));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Agent> agent, Agent::Start(Options(), *store_));
  KubeletClient kubelet(agent->Status().dra_socket);
  const dra_kubelet::ClaimRef train{"ml", "train", "claim-uid-1"};
  ASSERT_OK(kubelet.Prepare(train).status());
  // The status is written off the kubelet's path: wait for it.
  auto devices = [&] {
    absl::StatusOr<kube::ResourceClaim> claim =
        kube::GetAs<kube::ResourceClaim>(*store_, "ml", "train");
    return claim.ok() ? claim->status.devices : std::vector<kube::AllocatedDeviceStatus>{};
  };
  Eventually([&] { return !devices().empty(); }, 5s, 10ms);
  std::vector<kube::AllocatedDeviceStatus> written = devices();
  ASSERT_EQ(written.size(), 1u);
  EXPECT_EQ(written[0].driver, "devlet.io");
  EXPECT_EQ(written[0].pool, "node-1");
  EXPECT_EQ(written[0].device, "gpu-0");
  ASSERT_EQ(written[0].conditions.size(), 1u);
  EXPECT_EQ(written[0].conditions[0].type, "Ready");
  EXPECT_EQ(written[0].conditions[0].status, "True");

  ASSERT_OK(kubelet.Unprepare(train));
  Eventually([&] { return devices().empty(); }, 5s, 10ms);
  EXPECT_THAT(devices(), IsEmpty());
  agent->Stop();
}

// Issue 13 §2.5: a reboot keeps the checkpoint and the preparation journal but not the kernel's
// driver bindings. The kubelet prepares the pod's claims again before it starts the containers;
// in a new boot (another boot id) that prepare binds the GPU to vfio-pci again, in the same boot
// it trusts what is recorded. Through the DRA socket, on the simulated GPU server's sysfs.
TEST_F(AgentTest, AfterARebootTheKubeletsPrepareBindsTheVfioGpuAgain) {
  (void)fake_.AddDriver("vfio-pci");  // may already be registered
  ASSERT_NO_FATAL_FAILURE(CreateClaim(R"(
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: vm, namespace: virt, uid: claim-uid-vm}
spec: {devices: {requests: [{name: gpu, exactly: {deviceClassName: vfio.devlet.io}}]}}
status:
  allocation:
    devices:
      results: [{request: gpu, driver: devlet.io, pool: node-1, device: gpu-7}]
      config:
      - source: FromClass
        requests: [gpu]
        opaque:
          driver: devlet.io
          parameters: {apiVersion: devlet.io/v1alpha1, kind: DeviceConfig, bindDriver: vfio-pci}
  reservedFor: [{resource: pods, name: p, uid: pod-uid-vm}]
)"));
  const std::string original = fake_.BoundDriver(kGpu7);
  ASSERT_NE(original, "vfio-pci");
  const fs::path boot_id = dir_ / "boot_id";
  AgentOptions options = Options();
  options.sysfs = &fake_;  // a kernel that binds drivers
  options.boot_id_file = boot_id.string();
  const dra_kubelet::ClaimRef vm{"virt", "vm", "claim-uid-vm"};
  auto prepare_in_boot = [&](const std::string& boot) -> absl::Status {
    DEVLET_RETURN_IF_ERROR(WriteFileAtomically(boot_id.string(), boot + "\n", 0644));
    absl::StatusOr<std::unique_ptr<Agent>> agent = Agent::Start(options, *store_);
    if (!agent.ok()) return agent.status();
    absl::Status prepared = KubeletClient((*agent)->Status().dra_socket).Prepare(vm).status();
    (*agent)->Stop();
    return prepared;
  };
  // What the kernel does at boot: the GPU's own driver binds it again.
  auto reboot_kernel = [&] {
    ASSERT_OK(fake_.WriteFile("bus/pci/drivers/vfio-pci/unbind", kGpu7));
    ASSERT_OK(fake_.WriteFile(std::string("bus/pci/devices/") + kGpu7 + "/driver_override", "\n"));
    ASSERT_OK(fake_.WriteFile("bus/pci/drivers/" + original + "/bind", kGpu7));
    ASSERT_EQ(fake_.BoundDriver(kGpu7), original);
  };

  ASSERT_OK(prepare_in_boot("boot-1"));
  EXPECT_EQ(fake_.BoundDriver(kGpu7), "vfio-pci");

  reboot_kernel();
  ASSERT_OK(prepare_in_boot("boot-1"));  // the same boot: the record is trusted
  EXPECT_EQ(fake_.BoundDriver(kGpu7), original);

  ASSERT_OK(prepare_in_boot("boot-2"));
  EXPECT_EQ(fake_.BoundDriver(kGpu7), "vfio-pci");

  // Unprepare gives the GPU back to its own driver; the boot id file is required.
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Agent> agent, Agent::Start(options, *store_));
  ASSERT_OK(KubeletClient(agent->Status().dra_socket).Unprepare(vm));
  EXPECT_EQ(fake_.BoundDriver(kGpu7), original);
  agent->Stop();
  fs::remove(boot_id);
  EXPECT_THAT(Agent::Start(options, *store_).status().message(),
              HasSubstr("boot id file " + boot_id.string() + " is missing or empty"));
}

// KEP-5304 deferred metadata through the real sockets: a NIC claim prepared over the DRA socket
// gets a metadata file without network data; the runtime's RunPodSandbox over NRI (with the pod's
// addresses after CNI) rewrites it with generation 2 and networkData (the netdev of nic-0 as
// sysfs shows it, the pod's IPs as CIDRs) and publishes the same in status.devices; the file
// is the one the container's CDI mount names; unprepare removes it.
TEST_F(AgentTest, NriRunPodSandboxAddsNetworkData) {
  ASSERT_NO_FATAL_FAILURE(CreateClaim(R"(
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: fast-net, namespace: net, uid: claim-uid-nic}
spec: {devices: {requests: [{name: nic, exactly: {deviceClassName: nic.devlet.io}}]}}
status:
  allocation:
    devices:
      results: [{request: nic, driver: devlet.io, pool: node-1, device: nic-0}]
  reservedFor: [{resource: pods, name: p, uid: pod-uid-nic}]
)"));
  AgentOptions options = Options();
  ASSERT_NO_FATAL_FAILURE(StartWithRuntime("node-agent-nri", options));

  KubeletClient kubelet(agent_->Status().dra_socket);
  const dra_kubelet::ClaimRef fast_net{"net", "fast-net", "claim-uid-nic"};
  ASSERT_OK_AND_ASSIGN(drav1::NodePrepareResourceResponse prepared, kubelet.Prepare(fast_net));
  ASSERT_EQ(prepared.devices_size(), 1);
  const std::vector<std::string> cdi_ids(prepared.devices(0).cdi_device_ids().begin(),
                                         prepared.devices(0).cdi_device_ids().end());
  const fs::path metadata_dir = dir_ / "plugins/devlet.io/dra-device-metadata/net_fast-net";
  const fs::path metadata_file = metadata_dir / "nic/metadata.json";
  auto first_object = [&]() -> nlohmann::json {
    std::ifstream in(metadata_file);
    std::string line;
    if (!std::getline(in, line)) return nullptr;
    return nlohmann::json::parse(line);
  };
  nlohmann::json before = first_object();
  ASSERT_FALSE(before.is_null());
  EXPECT_EQ(before["metadata"]["generation"], 1);
  EXPECT_FALSE(before["requests"][0]["devices"][0].contains("networkData"));

  nri::api::RunPodSandboxRequest run;
  run.mutable_pod()->set_id("sandbox-1");
  run.mutable_pod()->set_uid("pod-uid-nic");
  run.mutable_pod()->set_name("p");
  run.mutable_pod()->set_namespace_("net");
  run.mutable_pod()->add_ips("10.244.1.7");
  run.mutable_pod()->add_ips("fd00:10:244:1::7");
  ASSERT_OK(runtime_->Call<nri::api::RunPodSandboxResponse>("RunPodSandbox", run).status());

  // Done when RunPodSandbox returns: the file is complete before any container starts.
  nlohmann::json after = first_object();
  ASSERT_FALSE(after.is_null());
  EXPECT_EQ(after["metadata"]["generation"], 2);
  const nlohmann::json& device = after["requests"][0]["devices"][0];
  EXPECT_EQ(device["name"], "nic-0");
  EXPECT_EQ(device["attributes"]["resource.kubernetes.io/pciBusID"]["string"], kNic0);
  EXPECT_EQ(device["networkData"], nlohmann::json::parse(R"({"interfaceName": "ens1f0np0",
      "ips": ["10.244.1.7/32", "fd00:10:244:1::7/128"], "hardwareAddress": "b8:3f:d2:0a:00:10"})"));

  // status.devices[].networkData: written off the runtime's path, so wait for it.
  auto network_data = [&]() -> std::optional<kube::NetworkDeviceData> {
    absl::StatusOr<kube::ResourceClaim> claim =
        kube::GetAs<kube::ResourceClaim>(*store_, "net", "fast-net");
    if (!claim.ok() || claim->status.devices.empty()) return std::nullopt;
    return claim->status.devices[0].network_data;
  };
  Eventually([&] { return network_data().has_value(); }, 5s, 10ms);
  std::optional<kube::NetworkDeviceData> published = network_data();
  ASSERT_TRUE(published.has_value());
  EXPECT_EQ(published->interface_name, "ens1f0np0");
  EXPECT_EQ(published->hardware_address, "b8:3f:d2:0a:00:10");
  EXPECT_THAT(published->ips, ::testing::ElementsAre("10.244.1.7/32", "fd00:10:244:1::7/128"));

  // A sidecar that names no claim: the kubelet passes it no CDI device, devlet leaves it alone.
  nri::api::CreateContainerRequest create;
  *create.mutable_pod() = run.pod();
  create.mutable_container()->set_id("ctr-0");
  create.mutable_container()->set_name("sidecar");
  create.mutable_container()->set_pod_sandbox_id("sandbox-1");
  ASSERT_OK_AND_ASSIGN(nri::api::CreateContainerResponse untouched,
                       runtime_->Call<nri::api::CreateContainerResponse>("CreateContainer", create));
  EXPECT_EQ(untouched.adjust().ByteSizeLong(), 0u);

  // The app names the claim: the runtime applied the kubelet's CDI devices (their environment
  // carries devlet's marker). Its CDI names include the metadata device, whose spec mounts this
  // very file.
  create.mutable_container()->set_id("ctr-1");
  create.mutable_container()->set_name("app");
  ASSERT_OK_AND_ASSIGN(cdi::ContainerEdits applied,
                       cdi::Registry::Load({(dir_ / "cdi").string()}).Resolve(cdi_ids));
  for (const std::string& env : applied.env) create.mutable_container()->add_env(env);
  ASSERT_OK_AND_ASSIGN(nri::api::CreateContainerResponse created,
                       runtime_->Call<nri::api::CreateContainerResponse>("CreateContainer", create));
  std::vector<std::string> names;
  for (const auto& cdi : created.adjust().cdi_devices()) names.push_back(cdi.name());
  EXPECT_THAT(names, ::testing::Contains("devlet.io/metadata=claim-uid-nic_nic"));
  EXPECT_THAT(cdi_ids, ::testing::Contains("devlet.io/metadata=claim-uid-nic_nic"));
  std::ifstream spec_in(dir_ / "cdi/devlet.io_metadata_claim-uid-nic_nic.json");
  nlohmann::json spec = nlohmann::json::parse(spec_in);
  EXPECT_EQ(spec["devices"][0]["containerEdits"]["mounts"][0]["hostPath"], metadata_file.string());

  // A second RunPodSandbox with the same addresses changes nothing.
  ASSERT_OK(runtime_->Call<nri::api::RunPodSandboxResponse>("RunPodSandbox", run).status());
  EXPECT_EQ(first_object()["metadata"]["generation"], 2);

  ASSERT_OK(kubelet.Unprepare(fast_net));
  EXPECT_FALSE(fs::exists(metadata_dir));
  EXPECT_FALSE(fs::exists(dir_ / "cdi/devlet.io_metadata_claim-uid-nic_nic.json"));
  // A pod whose claims are gone: RunPodSandbox still succeeds.
  ASSERT_OK(runtime_->Call<nri::api::RunPodSandboxResponse>("RunPodSandbox", run).status());
  agent_->Stop();
  fs::remove(options.nri_socket);
}

// Issue 13 §2.4 (KEP-5729): a claim reserved for a PodGroup names no pod in reservedFor. The
// kubelet prepares it once per pod of the group (the first prepare does the work); a container
// of any pod that names it (through the CDI devices the kubelet gave it) gets its devices. A
// claim reserved for another pod still fails closed. Through the DRA and NRI sockets.
TEST_F(AgentTest, ClaimReservedForAPodGroupServesEveryPodOfTheGroup) {
  ASSERT_NO_FATAL_FAILURE(CreateClaim(R"(
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: shared, namespace: train, uid: claim-uid-group}
spec: {devices: {requests: [{name: gpu, exactly: {deviceClassName: gpu.devlet.io}}]}}
status:
  allocation:
    devices:
      results: [{request: gpu, driver: devlet.io, pool: node-1, device: gpu-3}]
  reservedFor: [{apiGroup: scheduling.k8s.io, resource: podgroups, name: job, uid: group-uid-1}]
)"));
  ASSERT_NO_FATAL_FAILURE(CreateClaim(R"(
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: private, namespace: train, uid: claim-uid-private}
spec: {devices: {requests: [{name: gpu, exactly: {deviceClassName: gpu.devlet.io}}]}}
status:
  allocation:
    devices:
      results: [{request: gpu, driver: devlet.io, pool: node-1, device: gpu-4}]
  reservedFor: [{resource: pods, name: x, uid: pod-uid-x}]
)"));
  AgentOptions options = Options();
  ASSERT_NO_FATAL_FAILURE(StartWithRuntime("node-agent-nri-group", options));
  KubeletClient kubelet(agent_->Status().dra_socket);
  const dra_kubelet::ClaimRef shared{"train", "shared", "claim-uid-group"};
  const dra_kubelet::ClaimRef private_claim{"train", "private", "claim-uid-private"};
  ASSERT_OK_AND_ASSIGN(drav1::NodePrepareResourceResponse prepared, kubelet.Prepare(shared));
  ASSERT_OK(kubelet.Prepare(shared).status());  // the group's second pod
  ASSERT_OK_AND_ASSIGN(drav1::NodePrepareResourceResponse other, kubelet.Prepare(private_claim));
  auto applied_env = [&](const drav1::NodePrepareResourceResponse& response) {
    std::vector<std::string> ids;
    for (const auto& device : response.devices()) {
      ids.insert(ids.end(), device.cdi_device_ids().begin(), device.cdi_device_ids().end());
    }
    absl::StatusOr<cdi::ContainerEdits> edits =
        cdi::Registry::Load({(dir_ / "cdi").string()}).Resolve(ids);
    EXPECT_OK(edits.status());
    return edits.ok() ? edits->env : std::vector<std::string>{};
  };
  auto create_in_pod = [&](const std::string& pod_uid, const std::vector<std::string>& env) {
    nri::api::CreateContainerRequest create;
    create.mutable_pod()->set_id("sandbox-" + pod_uid);
    create.mutable_pod()->set_uid(pod_uid);
    create.mutable_pod()->set_name(pod_uid);
    create.mutable_pod()->set_namespace_("train");
    create.mutable_container()->set_id("ctr-" + pod_uid);
    create.mutable_container()->set_name("worker");
    create.mutable_container()->set_pod_sandbox_id("sandbox-" + pod_uid);
    for (const std::string& entry : env) create.mutable_container()->add_env(entry);
    return runtime_->Call<nri::api::CreateContainerResponse>("CreateContainer", create);
  };
  for (const std::string pod : {"pod-uid-a", "pod-uid-b"}) {
    ASSERT_OK_AND_ASSIGN(nri::api::CreateContainerResponse created,
                         create_in_pod(pod, applied_env(prepared)));
    // Whether devlet hands the runtime CDI names or the edits themselves (its CDI policy).
    std::vector<std::string> given;
    for (const auto& cdi : created.adjust().cdi_devices()) given.push_back(cdi.name());
    for (const auto& env : created.adjust().env()) given.push_back(env.key() + "=" + env.value());
    EXPECT_THAT(given, ::testing::AnyOf(::testing::Contains(prepared.devices(0).cdi_device_ids(0)),
                                        ::testing::Contains("DEVLET_DEVICE_GPU_3=node-1/gpu-3")))
        << pod;
  }
  absl::StatusOr<nri::api::CreateContainerResponse> refused =
      create_in_pod("pod-uid-c", applied_env(other));
  EXPECT_THAT(refused.status().message(), HasSubstr("has not prepared that claim for this pod"));

  ASSERT_OK(kubelet.Unprepare(shared));
  ASSERT_OK(kubelet.Unprepare(private_claim));
  agent_->Stop();
  fs::remove(options.nri_socket);
}

TEST(PodIpToCidrTest, AddressesBecomeHostPrefixes) {
  EXPECT_THAT(PodIpToCidr("10.244.1.7"), devlet::testing::IsOkAndHolds("10.244.1.7/32"));
  EXPECT_THAT(PodIpToCidr("fd00::7"), devlet::testing::IsOkAndHolds("fd00::7/128"));
  EXPECT_THAT(PodIpToCidr("10.244.1.0/24"), devlet::testing::IsOkAndHolds("10.244.1.0/24"));
  EXPECT_THAT(PodIpToCidr("10.244.1.7/33"), devlet::testing::StatusIs(
                                                absl::StatusCode::kInvalidArgument,
                                                HasSubstr("prefix longer than 32")));
  EXPECT_THAT(PodIpToCidr("eth0"), devlet::testing::StatusIs(absl::StatusCode::kInvalidArgument,
                                                             HasSubstr("not an IP address")));
  EXPECT_THAT(PodIpToCidr("10.0.0.1/"), devlet::testing::StatusIs(
                                            absl::StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace devlet::node
