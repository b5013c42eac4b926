// Randomized differential test: random CDI specs (several specs, devices, every kind of edit,
// colliding env keys, mount destinations and device paths, real and minimal device nodes) and
// random OCI specs, injected by both our cdi/ module and the reference library (cdi-peer).
// DEVLET_CDI_RANDOM_CASES sets the number of cases (default 150); the seed is the case number.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "devlet/cdi/codec.h"
#include "devlet/cdi/edits.h"
#include "devlet/cdi/spec_dir.h"
#include "devlet/common/status.h"
#include "devlet/common/testing/status_matchers.h"

namespace devlet::cdi {

nlohmann::json RunPeerForTest(const std::vector<std::string>& args);  // reference_test.cc

namespace {

using nlohmann::json;
namespace fs = std::filesystem;

class Gen {
 public:
  explicit Gen(unsigned seed) : rng_(seed) {}
  int Int(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
  bool Chance(int percent) { return Int(1, 100) <= percent; }
  template <typename T>
  const T& Pick(const std::vector<T>& v) {
    return v[static_cast<size_t>(Int(0, static_cast<int>(v.size()) - 1))];
  }

 private:
  std::mt19937 rng_;
};

const std::vector<std::string> kEnvKeys = {"A", "B", "PATH", "HOME", "X_Y"};
const std::vector<std::string> kPermissions = {"", "r", "rw", "rwm", "none", "m"};
const std::vector<std::string> kDestinations = {"/a", "/a/b", "/a/b/c", "/opt/x/",
                                                "/usr/lib/../lib/y", "/proc", "/dev", "/"};
const std::vector<std::string> kMountTypes = {"", "", "bind", "tmpfs"};
const std::vector<std::string> kMountOptions = {"ro", "bind", "rbind", "idmap", "nosuid"};
const std::vector<std::string> kHookNames = {"prestart", "createRuntime", "createContainer",
                                             "startContainer", "poststart", "poststop"};
const std::vector<std::uint32_t> kGids = {0, 5, 6, 1000};

DeviceNode RandomNode(Gen& g) {
  DeviceNode n;
  switch (g.Int(0, 4)) {
    case 0: n.path = "/dev/null"; break;
    case 1: n.path = "/dev/zero"; break;
    case 2: n.path = "/dev/c-full"; n.host_path = "/dev/full"; break;
    case 3: {
      const int k = g.Int(0, 3);
      n.path = "/dev/fake" + std::to_string(k);
      n.type = "c";
      n.major = 200 + k;
      n.minor = g.Int(0, 3);
      break;
    }
    default: n.path = "/dev/fifo-min"; n.type = "p"; break;
  }
  n.permissions = g.Pick(kPermissions);
  if (g.Chance(20)) n.file_mode = static_cast<std::uint32_t>(g.Pick(std::vector<int>{0600, 0666}));
  if (g.Chance(25)) n.uid = g.Pick(kGids);
  if (g.Chance(25)) n.gid = g.Pick(kGids);
  return n;
}

ContainerEdits RandomEdits(Gen& g, bool device_level) {
  ContainerEdits e;
  for (int i = g.Int(0, 3); i > 0; --i) {
    e.env.push_back(g.Pick(kEnvKeys) + "=" + std::to_string(g.Int(0, 99)));
  }
  for (int i = g.Int(0, 2); i > 0; --i) e.device_nodes.push_back(RandomNode(g));
  for (int i = g.Int(0, 3); i > 0; --i) {
    Mount m{.host_path = "/h/" + std::to_string(g.Int(0, 9)),
            .container_path = g.Pick(kDestinations),
            .type = g.Pick(kMountTypes)};
    for (const std::string& o : kMountOptions) {
      if (g.Chance(25)) m.options.push_back(o);
    }
    e.mounts.push_back(std::move(m));
  }
  for (int i = g.Int(0, 2); i > 0; --i) {
    Hook h{.hook_name = g.Pick(kHookNames), .path = "/bin/h" + std::to_string(g.Int(0, 9))};
    if (g.Chance(50)) h.args = {"h", "--x=" + std::to_string(g.Int(0, 9))};
    if (g.Chance(30)) h.env = {"K=V"};
    if (g.Chance(30)) h.timeout = g.Int(1, 10);
    e.hooks.push_back(std::move(h));
  }
  if (g.Chance(15)) {
    IntelRdt rdt{.clos_id = g.Pick(std::vector<std::string>{"a", "b", "/", ""})};
    if (g.Chance(30)) rdt.schemata = std::vector<std::string>{"L3:0=f"};
    if (g.Chance(20)) rdt.enable_monitoring = true;
    if (g.Chance(30)) rdt.l3_cache_schema = "L3:0=ff";
    e.intel_rdt = rdt;
  }
  for (int i = g.Int(0, 3); i > 0; --i) {
    if (g.Chance(40)) e.additional_gids.push_back(g.Pick(kGids));
  }
  if (g.Chance(10)) {
    const int k = g.Int(0, 2);
    e.net_devices.push_back({"eth" + std::to_string(k), "net" + std::to_string(k)});
  }
  if (device_level && e.IsEmpty()) e.env.push_back("NONEMPTY=1");
  return e;
}

json RandomOci(Gen& g) {
  json user = {{"uid", g.Pick(std::vector<int>{0, 1000})}, {"gid", g.Pick(std::vector<int>{0, 5})}};
  if (g.Chance(30)) user["additionalGids"] = {5, 7};
  json env = json::array();
  for (int i = g.Int(0, 3); i > 0; --i) env.push_back(g.Pick(kEnvKeys) + "=img");
  json oci = {{"ociVersion", "1.2.0"},
              {"process", {{"user", user}, {"cwd", "/"}, {"args", {"sh"}}, {"env", env}}},
              {"root", {{"path", "rootfs"}}}};
  json mounts = json::array();
  for (int i = g.Int(0, 3); i > 0; --i) {
    mounts.push_back({{"destination", g.Pick(kDestinations)}, {"type", "tmpfs"}, {"source", "x"}});
  }
  if (!mounts.empty()) oci["mounts"] = mounts;
  json linux_ = json::object();
  if (g.Chance(50)) {
    linux_["devices"] = {{{"path", "/dev/zero"}, {"type", "c"}, {"major", 9}, {"minor", 9}},
                         {{"path", "/dev/keep"}, {"type", "c"}, {"major", 8}, {"minor", 8}}};
    linux_["resources"] = {{"devices", {{{"allow", false}, {"access", "rwm"}}}}};
  }
  if (g.Chance(30)) {
    linux_["namespaces"] = {{{"type", "mount"}}, {{"type", "user"}}};
    json mapping = {{{"containerID", 0}, {"hostID", 100000}, {"size", 65536}}};
    if (g.Chance(80)) linux_["uidMappings"] = mapping;
    if (g.Chance(80)) linux_["gidMappings"] = mapping;
  }
  if (g.Chance(20)) linux_["intelRdt"] = {{"closID", "old"}};
  if (!linux_.empty()) oci["linux"] = linux_;
  return oci;
}

class RandomTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("cdi_random_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(RandomTest, InjectionMatchesTheReferenceLibrary) {
  int cases = 150;
  if (const char* env = std::getenv("DEVLET_CDI_RANDOM_CASES")) cases = std::atoi(env);
  int succeeded = 0;
  for (int seed = 1; seed <= cases; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    Gen g(static_cast<unsigned>(seed));
    const fs::path specs = dir_ / std::to_string(seed);
    std::vector<std::string> names;
    for (int s = g.Int(1, 3); s > 0; --s) {
      Spec spec{.kind = "v" + std::to_string(s) + ".com/c"};
      if (g.Chance(50)) spec.container_edits = RandomEdits(g, false);
      for (int d = g.Int(1, 3); d > 0; --d) {
        const std::string name = (g.Chance(30) ? std::to_string(d) + "x" : "d" + std::to_string(d));
        spec.devices.push_back({.name = name, .container_edits = RandomEdits(g, true)});
        names.push_back(spec.kind + "=" + name);
      }
      // Invalid merged edits (closID "" is fine; duplicate net devices are not) are part of the
      // test: both sides must refuse them at injection.
      absl::StatusOr<std::string> path =
          WriteSpec(specs.string(), TransientSpecName(spec.Vendor(), spec.Class(), "claim"), spec);
      ASSERT_TRUE(path.ok()) << path.status();
    }
    std::vector<std::string> request;
    for (int i = g.Int(1, 4); i > 0; --i) request.push_back(g.Pick(names));
    if (g.Chance(10)) request.push_back("missing.com/c=nope");

    const fs::path oci_path = dir_ / ("config-" + std::to_string(seed) + ".json");
    std::ofstream(oci_path) << RandomOci(g).dump();
    std::string joined;
    for (const std::string& r : request) joined += (joined.empty() ? "" : ",") + r;
    const json peer = RunPeerForTest({"-spec-dir", specs.string(), "-oci", oci_path.string(),
                                      "-devices", joined});

    const Registry registry = Registry::Load({specs.string()});
    ASSERT_TRUE(peer.at("errors").empty()) << peer.at("errors").dump();
    ASSERT_EQ(peer.at("devices").get<std::vector<std::string>>(), registry.DeviceNames());
    const std::string input = peer.at("input").dump();
    absl::StatusOr<ContainerEdits> edits = registry.Resolve(request);
    absl::StatusOr<std::string> ours =
        edits.ok() ? InjectEdits(input, *edits) : absl::StatusOr<std::string>(edits.status());
    if (peer.contains("error")) {
      EXPECT_FALSE(ours.ok()) << "the reference library failed with: " << peer.at("error");
    } else {
      ASSERT_TRUE(ours.ok()) << ours.status();
      EXPECT_EQ(json::parse(*ours), peer.at("output"))
          << "ours:      " << *ours << "\nreference: " << peer.at("output").dump();
      ++succeeded;
    }
  }
  EXPECT_GT(succeeded, cases / 2);
}

}  // namespace
}  // namespace devlet::cdi
