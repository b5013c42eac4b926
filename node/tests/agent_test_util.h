// Shared set-up of the Agent tests: devlet-node's Agent on the simulated GPU server of
// devices/testing (hwloc XML + a fake sysfs tree), and polling for what it does off the caller's
// thread.
#pragma once

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>

#include "devlet/devices/testing/fake_sysfs.h"
#include "devlet/node/agent.h"

namespace devlet::node::testing {

// SimulatedServerOptions returns the options of an Agent on `fake` (which holds the GPU server)
// for node-1, with its directories below `dir`, no NRI socket and no periodic rescan. Health checks
// are left to the test (CheckHealthNow): the interval is an hour.
inline AgentOptions SimulatedServerOptions(const std::filesystem::path& dir,
                                           const devices::testing::FakeSysfs& fake) {
  AgentOptions options;
  options.node_name = "node-1";
  options.cdi_root = (dir / "cdi").string();
  options.registrar_dir = (dir / "registry").string();
  options.plugins_dir = (dir / "plugins").string();
  options.sysfs_root = fake.Root();
  options.topology_xml = std::string(DEVLET_DEVICES_TESTDATA) + "/dgx-2s-8gpu-2nic.xml";
  options.nri_socket = "";
  options.rescan_interval = std::chrono::milliseconds(0);
  options.health_interval = std::chrono::hours(1);
  return options;
}

// Eventually asks `done` until it says true or `timeout` has passed, `interval` apart, and
// returns its last answer: for what the Agent does in its own threads (publishing, status writes).
template <typename Done>
bool Eventually(Done done, std::chrono::milliseconds timeout = std::chrono::seconds(10),
                std::chrono::milliseconds interval = std::chrono::milliseconds(100)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!done()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(interval);
  }
  return true;
}

}  // namespace devlet::node::testing
