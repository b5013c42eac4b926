// devlet-simnode DIR: builds a simulated node's sysfs tree in DIR — the fake sysfs of
// devices/testing matching devices/tests/data/dgx-2s-8gpu-2nic.xml (2 NUMA nodes, 8 H100 GPUs,
// 2 ConnectX-7 NICs with SR-IOV) — for `devlet-node --sysfs-root DIR --topology-xml XML`.
#include <filesystem>
#include <iostream>

#include "devlet/common/status.h"
#include "devlet/devices/testing/fake_sysfs.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: devlet-simnode DIR   (DIR must not exist or be empty)\n";
    return 2;
  }
  std::error_code ec;
  if (std::filesystem::exists(argv[1], ec) && !std::filesystem::is_empty(argv[1], ec)) {
    std::cerr << "devlet-simnode: " << argv[1] << " is not empty\n";
    return 2;
  }
  devlet::devices::testing::FakeSysfs fake{std::string(argv[1])};
  absl::Status status = devlet::devices::testing::AddGpuServer(fake);
  if (!status.ok()) {
    std::cerr << "devlet-simnode: " << devlet::Message(status) << "\n";
    return 1;
  }
  std::cout << fake.Root() << "\n";
  return 0;
}
