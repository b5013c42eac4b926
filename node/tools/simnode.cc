// devlet-simnode DIR [--vfio PCI_ADDRESS]... [--sriov-nic] [--serve]: builds a simulated node's
// sysfs tree in DIR — the fake sysfs of devices/testing matching
// devices/tests/data/dgx-2s-8gpu-2nic.xml (2 NUMA nodes, 8 H100 GPUs, 2 ConnectX-7 NICs with
// SR-IOV) — for `devlet-node --sysfs-root DIR --topology-xml XML`.
//
//   --vfio ADDRESS  binds a function to vfio-pci in the tree, as an administrator would have before.
//   --sriov-nic     adds a third ConnectX-7 (0000:3b:00.0, ens3f0np0, NUMA node 0, 8 VFs possible,
//                   none created) that the XML lacks: discovery finds it in sysfs, as it finds
//                   functions hwloc does not report. The demo's SR-IOV profile hands out its VFs.
//   --serve         stays running as the node's kernel for sriov_numvfs: when devlet-node (or
//                   anyone) writes N to a PF's sriov_numvfs, the VFs appear in the tree (device
//                   directories, virtfn/physfn links, IOMMU groups, the VF driver's netdev when
//                   sriov_drivers_autoprobe is 1), and writing 0 removes them, with the kernel's
//                   refusals (ERANGE above sriov_totalvfs, EBUSY from one non-zero count to
//                   another: the value is put back and the refusal logged, so the writer sees no
//                   VFs appear). Writes are noticed by polling every 10 ms; a real kernel reacts
//                   inside the write, which is why devlet waits for the virtfn links. Prints
//                   "serving" once the tree is complete; exits 0 on SIGTERM/SIGINT or when DIR is
//                   removed. Other writes (driver binding, mdev) stay plain files: bind such
//                   devices beforehand with --vfio.
#include <signal.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "devlet/common/status.h"
#include "devlet/devices/actions.h"
#include "devlet/devices/testing/fake_sysfs.h"

namespace {

namespace fs = std::filesystem;
using devlet::devices::testing::FakeNetdev;
using devlet::devices::testing::FakePciDevice;
using devlet::devices::testing::FakeSysfs;

std::atomic<bool> g_stop{false};

void OnSignal(int) { g_stop = true; }

// AddSriovNic adds the third ConnectX-7 of --sriov-nic, behind host bridge 0000:38 (NUMA 0).
absl::Status AddSriovNic(FakeSysfs& fake) {
  FakePciDevice nic;
  nic.address = "0000:3b:00.0";
  nic.parent = "pci0000:38/0000:38:03.0";
  nic.vendor_id = 0x15b3;
  nic.device_id = 0x1021;
  nic.subsystem_vendor_id = 0x15b3;
  nic.subsystem_device_id = 0x0041;
  nic.class_code = 0x020000;
  nic.driver = "mlx5_core";
  nic.numa_node = 0;
  nic.iommu_group = 32;
  nic.prefetchable_bars = {32ull << 20};
  nic.netdev = FakeNetdev{.name = "ens3f0np0", .mac = "b8:3f:d2:0a:02:10", .operstate = "up",
                          .speed_mbps = 200000};
  nic.rdma_devices = {"mlx5_2"};
  nic.sriov_total_vfs = 8;
  nic.vf_device_id = 0x101e;
  nic.vf_driver = "mlx5_core";
  return fake.AddPciDevice(nic);
}

std::string ReadValue(const fs::path& path) {
  std::ifstream in(path);
  std::string value;
  std::getline(in, value);
  while (!value.empty() && (value.back() == ' ' || value.back() == '\r')) value.pop_back();
  return value;
}

// PhysicalFunctions returns the sysfs-relative sriov_numvfs files of the tree's SR-IOV PFs.
std::vector<std::string> PhysicalFunctions(const FakeSysfs& fake) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(fs::path(fake.Root()) / "bus/pci/devices", ec)) {
    const std::string address = entry.path().filename().string();
    const std::string dir = fake.DeviceDir(address);
    if (!dir.empty() && fs::exists(fs::path(fake.Root()) / dir / "sriov_totalvfs", ec)) {
      out.push_back(dir + "/sriov_numvfs");
    }
  }
  return out;
}

// Serve plays the kernel for sriov_numvfs writes until a signal or the tree's removal.
int Serve(FakeSysfs& fake) {
  struct sigaction action {};
  action.sa_handler = OnSignal;
  ::sigaction(SIGTERM, &action, nullptr);
  ::sigaction(SIGINT, &action, nullptr);
  const fs::path root(fake.Root());
  std::map<std::string, std::string> applied;  // sriov_numvfs file -> value the kernel holds
  for (const std::string& file : PhysicalFunctions(fake)) applied[file] = ReadValue(root / file);
  std::cout << "serving " << applied.size() << " SR-IOV physical function(s)" << std::endl;
  std::error_code ec;
  while (!g_stop) {
    if (!fs::exists(root, ec)) return 0;  // the demo removed the node
    for (auto& [file, value] : applied) {
      const std::string written = ReadValue(root / file);
      if (written.empty() || written == value) continue;
      // Put the kernel's value back, then apply the write as the kernel would.
      std::ofstream(root / file, std::ios::trunc) << value << "\n";
      absl::Status status = fake.WriteFile(file, written);
      if (!status.ok()) {
        std::cerr << "devlet-simnode: kernel refused " << written << " > " << file << ": "
                  << devlet::Message(status) << std::endl;
        continue;
      }
      std::cout << "kernel: " << file << " " << value << " -> " << written << std::endl;
      value = written;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> vfio;
  bool sriov_nic = false;
  bool serve = false;
  bool usage = argc < 2;
  for (int i = 2; i < argc && !usage; ++i) {
    const std::string arg = argv[i];
    if (arg == "--vfio" && i + 1 < argc) {
      vfio.push_back(argv[++i]);
    } else if (arg == "--sriov-nic") {
      sriov_nic = true;
    } else if (arg == "--serve") {
      serve = true;
    } else {
      usage = true;
    }
  }
  if (usage) {
    std::cerr << "usage: devlet-simnode DIR [--vfio PCI_ADDRESS]... [--sriov-nic] [--serve]   "
                 "(DIR must not exist or be empty)\n";
    return 2;
  }
  std::error_code ec;
  if (fs::exists(argv[1], ec) && !fs::is_empty(argv[1], ec)) {
    std::cerr << "devlet-simnode: " << argv[1] << " is not empty\n";
    return 2;
  }
  FakeSysfs fake{std::string(argv[1])};
  absl::Status status = devlet::devices::testing::AddGpuServer(fake);
  if (status.ok() && sriov_nic) status = AddSriovNic(fake);
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
  std::cout << fake.Root() << std::endl;
  return serve ? Serve(fake) : 0;
}
