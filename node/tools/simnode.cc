// devlet-simnode DIR [--vfio PCI_ADDRESS]...: builds a simulated node's sysfs tree in DIR — the
// fake sysfs of devices/testing matching devices/tests/data/dgx-2s-8gpu-2nic.xml (2 NUMA nodes,
// 8 H100 GPUs, 2 ConnectX-7 NICs with SR-IOV) — for `devlet-node --sysfs-root DIR
// --topology-xml XML`. --vfio binds a function to vfio-pci in the tree as an administrator would
// have before (devlet-node reads the tree as plain files, so the kernel's side of a rebind is
// not simulated while it runs; a VM claim on such a device finds it already bound).
#include <filesystem>
#include <iostream>

#include <string>
#include <vector>

#include "devlet/common/status.h"
#include "devlet/devices/actions.h"
#include "devlet/devices/testing/fake_sysfs.h"

int main(int argc, char** argv) {
  std::vector<std::string> vfio;
  bool usage = argc < 2;
  for (int i = 2; i < argc && !usage; i += 2) {
    usage = std::string(argv[i]) != "--vfio" || i + 1 >= argc;
    if (!usage) vfio.push_back(argv[i + 1]);
  }
  if (usage) {
    std::cerr << "usage: devlet-simnode DIR [--vfio PCI_ADDRESS]...   (DIR must not exist or be "
                 "empty)\n";
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
  devlet::devices::Preparer preparer(fake, [](const devlet::devices::JournalEntry&) {
    return absl::OkStatus();
  });
  for (const std::string& address : vfio) {
    absl::StatusOr<devlet::devices::ActionRecord> bound = preparer.BindVfio(address);
    if (!bound.ok()) {
      std::cerr << "devlet-simnode: --vfio " << address << ": " << devlet::Message(bound.status())
                << "\n";
      return 1;
    }
  }
  std::cout << fake.Root() << "\n";
  return 0;
}
