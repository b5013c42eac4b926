// devlet-node (the binary) in API server mode against a real kube-apiserver v1.37.2, started by
// apiserver-runner (DEVLET_TEST_KUBECONFIG): on the simulated GPU server it publishes nothing
// while its Node is missing, then ResourceSlices owned by the Node (the API server validates the
// slices and the owner reference), recreates them when they are deleted, and stops cleanly on
// SIGTERM. Skips without the runner.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "devlet/common/testing/status_matchers.h"
#include "devlet/devices/testing/fake_sysfs.h"
#include "devlet/kube/kubeconfig.h"
#include "devlet/kube/rest_client.h"

namespace devlet {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

constexpr char kNode[] = "devlet-it-node";

class DevletNodeApiServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    kubeconfig_ = std::getenv("DEVLET_TEST_KUBECONFIG") ? std::getenv("DEVLET_TEST_KUBECONFIG") : "";
    if (kubeconfig_.empty()) GTEST_SKIP() << "run through apiserver-runner";
    ASSERT_OK_AND_ASSIGN(kube::RestConfig config, kube::LoadKubeconfig(kubeconfig_));
    config.qps = 50;
    config.burst = 100;
    ASSERT_OK_AND_ASSIGN(store_, kube::ApiServerStore::Create(config));
    dir_ = fs::path("/tmp") / ("devlet-node-it-" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    ASSERT_OK(devices::testing::AddGpuServer(fake_));
  }
  void TearDown() override {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    if (store_) {
      for (const kube::ResourceSlice& slice : Slices()) {
        (void)store_->Delete(kube::Kind::kResourceSlice, {.name = slice.metadata.name}, "");
      }
      (void)store_->Delete(kube::Kind::kNode, {.name = kNode}, "");
    }
    fs::remove_all(dir_);
  }

  void StartDevletNode() {
    std::vector<std::string> args = {
        DEVLET_NODE_BINARY, "--node-name", kNode, "--kubeconfig", kubeconfig_,
        "--topology-xml", std::string(DEVLET_DEVICES_TESTDATA) + "/dgx-2s-8gpu-2nic.xml",
        "--sysfs-root", fake_.Root(), "--cdi-root", (dir_ / "cdi").string(),
        "--kubelet-registrar-directory-path", (dir_ / "registry").string(),
        "--kubelet-plugins-directory-path", (dir_ / "plugins").string(), "--nri-socket", "",
        "--healthcheck-port", "-1", "--kube-api-qps", "50", "--kube-api-burst", "100"};
    pid_ = ::fork();
    ASSERT_GE(pid_, 0);
    if (pid_ == 0) {
      ::unsetenv("NRI_PLUGIN_SOCKET");
      std::vector<char*> argv;
      for (std::string& arg : args) argv.push_back(arg.data());
      argv.push_back(nullptr);
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
  }

  std::vector<kube::ResourceSlice> Slices() {
    absl::StatusOr<std::vector<kube::ResourceSlice>> slices =
        kube::ListAs<kube::ResourceSlice>(*store_, {.field_node_name = kNode});
    EXPECT_OK(slices.status());
    return slices.ok() ? *slices : std::vector<kube::ResourceSlice>();
  }

  // WaitForSlices polls until `count` slices exist (or 30 s passed).
  std::vector<kube::ResourceSlice> WaitForSlices(size_t count) {
    std::vector<kube::ResourceSlice> slices;
    for (int i = 0; i < 300; ++i) {
      slices = Slices();
      if (slices.size() == count) break;
      std::this_thread::sleep_for(100ms);
    }
    return slices;
  }

  std::string kubeconfig_;
  std::unique_ptr<kube::ApiServerStore> store_;
  fs::path dir_;
  devices::testing::FakeSysfs fake_;
  pid_t pid_ = -1;
};

TEST_F(DevletNodeApiServerTest, PublishesForItsNodeRepairsDeletedSlicesAndStopsCleanly) {
  StartDevletNode();
  std::this_thread::sleep_for(3s);
  ASSERT_EQ(::waitpid(pid_, nullptr, WNOHANG), 0) << "devlet-node exited";
  EXPECT_THAT(Slices(), ::testing::IsEmpty()) << "published before the Node exists";

  kube::Node node;
  node.metadata.name = kNode;
  ASSERT_OK_AND_ASSIGN(kube::Object created, store_->Create(node));
  const std::string node_uid = kube::MetadataOf(created).uid;
  std::vector<kube::ResourceSlice> slices = WaitForSlices(1);
  ASSERT_EQ(slices.size(), 1u) << "the simulated GPU server fits one slice";
  const kube::ResourceSlice& slice = slices[0];
  EXPECT_EQ(slice.spec.driver, "devlet.io");
  EXPECT_EQ(slice.spec.node_name.value_or(""), kNode);
  EXPECT_EQ(slice.spec.devices.size(), 12u);
  ASSERT_EQ(slice.metadata.owner_references.size(), 1u);
  EXPECT_EQ(slice.metadata.owner_references[0].api_version, "v1");
  EXPECT_EQ(slice.metadata.owner_references[0].kind, "Node");
  EXPECT_EQ(slice.metadata.owner_references[0].name, kNode);
  EXPECT_EQ(slice.metadata.owner_references[0].uid, node_uid);

  // Deleted behind devlet-node's back (the kubelet does this when it starts): recreated.
  ASSERT_OK(store_->Delete(kube::Kind::kResourceSlice, {.name = slice.metadata.name}, ""));
  std::vector<kube::ResourceSlice> repaired;
  for (int i = 0; i < 300; ++i) {
    repaired = Slices();
    if (!repaired.empty() && repaired[0].metadata.uid != slice.metadata.uid) break;
    std::this_thread::sleep_for(100ms);
  }
  ASSERT_EQ(repaired.size(), 1u);
  EXPECT_NE(repaired[0].metadata.uid, slice.metadata.uid);
  EXPECT_EQ(repaired[0].spec.devices.size(), 12u);

  ASSERT_EQ(::kill(pid_, SIGTERM), 0);
  int status = 0;
  bool exited = false;
  for (int i = 0; i < 200 && !exited; ++i) {
    exited = ::waitpid(pid_, &status, WNOHANG) == pid_;
    if (!exited) std::this_thread::sleep_for(50ms);
  }
  ASSERT_TRUE(exited) << "devlet-node did not stop within 10 s of SIGTERM";
  pid_ = -1;
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_FALSE(fs::exists(dir_ / "registry" / "devlet.io-reg.sock"));
  EXPECT_EQ(Slices().size(), 1u) << "slices stay published across a restart";
}

}  // namespace
}  // namespace devlet
