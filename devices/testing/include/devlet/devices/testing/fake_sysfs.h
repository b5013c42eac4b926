// File: devlet/devices/testing/fake_sysfs.h
//
// A fake kernel for tests and simulated nodes: builds a sysfs tree in a directory (PCI devices with
// their real path under devices/pci<dom>:<bus>/..., drivers, IOMMU groups, netdevs, RDMA devices,
// SR-IOV, AER counters) and, as a devlet::devices::Sysfs, reacts to writes the way the kernel does:
//
//   - `bus/pci/drivers/<drv>/unbind` <- BDF: removes the device's `driver` link (and its netdev and
//     RDMA device, which belong to the driver); ENODEV when the device is not bound to <drv>;
//   - `bus/pci/drivers/<drv>/bind` <- BDF: binds (EBUSY when already bound);
//   - `bus/pci/drivers_probe` <- BDF: binds an unbound device to its `driver_override`, or when that
//     is empty to the device's native driver, if that driver is registered;
//   - `<dev>/sriov_numvfs` <- N: ERANGE above sriov_totalvfs, EBUSY when changing a non-zero count
//     to another non-zero count, otherwise creates or removes the VFs (device directories,
//     `virtfn<i>`/`physfn` links, IOMMU groups, and a bound VF driver when
//     `sriov_drivers_autoprobe` is 1);
//   - `<dev>/mdev_supported_types/<type>/create` <- UUID: creates the mdev (a directory under the
//     parent, `mdev_type` link, `bus/mdev/devices/<uuid>` link) and decrements
//     available_instances; EINVAL for a malformed UUID, EEXIST for a used one, EUSERS when none is
//     available; `bus/mdev/devices/<uuid>/remove` <- 1 removes it again;
//   - any write can be made to fail with FailWrites(path, errno).
//
//   FakeSysfs fake;  // a fresh temp dir, removed on destruction
//   ASSERT_OK(AddGpuServer(fake));
//   auto discoverer = NewDiscoverer({.sysfs_root = fake.Root()});
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "devlet/devices/sysfs.h"

namespace devlet::devices::testing {

// FakeNetdev is the network interface a NIC's driver creates.
struct FakeNetdev {
  std::string name;
  std::string mac;
  std::string operstate = "up";
  int speed_mbps = 100000;
};

// FakePciDevice describes one PCI function to create.
struct FakePciDevice {
  std::string address;        // "0000:18:00.0"
  std::string parent;         // path below devices/, e.g. "pci0000:15/0000:15:01.0"; default
                              // "pci<domain>:<bus>" of the address
  std::uint16_t vendor_id = 0;
  std::uint16_t device_id = 0;
  std::uint16_t subsystem_vendor_id = 0;
  std::uint16_t subsystem_device_id = 0;
  std::uint32_t class_code = 0;  // 24-bit, e.g. 0x030200
  std::string driver;            // native driver; bound at creation when registered
  int numa_node = -1;
  std::optional<int> iommu_group;
  std::vector<std::uint64_t> prefetchable_bars;  // sizes in bytes
  std::optional<FakeNetdev> netdev;
  std::vector<std::string> rdma_devices;
  std::vector<std::string> drm_nodes;
  int sriov_total_vfs = 0;  // > 0 makes it an SR-IOV PF
  std::uint16_t vf_device_id = 0;
  std::string vf_driver;
};

// FakeSysfs is a sysfs tree plus the fake kernel that reacts to writes.
class FakeSysfs final : public Sysfs {
 public:
  // A fresh temporary directory, removed on destruction.
  FakeSysfs();
  // An existing (or new) directory that is kept (simulated nodes).
  explicit FakeSysfs(std::string root);
  ~FakeSysfs() override;
  FakeSysfs(const FakeSysfs&) = delete;
  FakeSysfs& operator=(const FakeSysfs&) = delete;

  // Builders.
  absl::Status AddDriver(std::string_view name);
  absl::Status AddPciDevice(const FakePciDevice& device);
  // Hot-unplug: removes the device directory and every link to it.
  absl::Status RemovePciDevice(std::string_view address);
  absl::Status SetOperstate(std::string_view address, std::string_view operstate);
  // kind: "fatal", "nonfatal" or "correctable"; writes aer_dev_<kind> with that TOTAL_ERR_* count.
  absl::Status SetAerCounter(std::string_view address, std::string_view kind, int total);
  // Offers a mediated device type on a device (mdev_supported_types/<type> with name, device_api
  // vfio-pci and available_instances).
  absl::Status AddMdevType(std::string_view address, std::string_view type, std::string_view name,
                           int available_instances);
  // Makes config-space reads fail the way a device that fell off the bus does (vendor 0xffff).
  absl::Status SetNotResponding(std::string_view address, bool not_responding);
  // Sets the state of port 1 of an RDMA device of the function ("4: ACTIVE", "1: DOWN").
  absl::Status SetRdmaPortState(std::string_view address, std::string_view state);

  // Fault injection: writes to a path ending in `path_suffix` fail with `error_number`.
  void FailWrites(std::string path_suffix, int error_number);
  void ClearFailures();

  // Every successful write so far, as "path=value" (value without trailing newline).
  const std::vector<std::string>& writes() const { return writes_; }

  // DeviceDir returns the device's real directory relative to the root.
  std::string DeviceDir(std::string_view address) const;
  // BoundDriver returns the device's driver or "" (reads the `driver` link).
  std::string BoundDriver(std::string_view address) const;

  // Sysfs.
  std::string Root() const override;
  absl::StatusOr<std::string> ReadFile(std::string_view path) const override;
  absl::Status WriteFile(std::string_view path, std::string_view value) override;
  bool Exists(std::string_view path) const override;
  absl::StatusOr<std::string> ReadLink(std::string_view path) const override;
  absl::StatusOr<std::string> RealPath(std::string_view path) const override;
  absl::StatusOr<std::vector<std::string>> ListDir(std::string_view path) const override;

 private:
  absl::Status Bind(const std::string& address, const std::string& driver);
  absl::Status Unbind(const std::string& address);
  absl::Status SetNumVfs(const std::string& pf, int count);
  absl::Status CreateDriverChildren(const FakePciDevice& device, const std::string& driver);
  absl::Status RemoveDriverChildren(const FakePciDevice& device);
  absl::Status CreateMdev(const std::string& type_dir, const std::string& uuid);
  absl::Status RemoveMdev(const std::string& uuid);

  std::string root_;
  bool owned_ = false;
  std::unique_ptr<Sysfs> real_;
  std::map<std::string, FakePciDevice, std::less<>> devices_;
  std::map<std::string, std::string, std::less<>> dirs_;  // address -> relative real dir
  std::vector<std::pair<std::string, int>> failures_;
  std::vector<std::string> writes_;
  int next_iommu_group_ = 200;
};

// AddGpuServer builds the sysfs of the machine in devices/tests/data/dgx-2s-8gpu-2nic.xml:
// drivers nvidia, mlx5_core, vfio-pci and pcieport registered; 8 H100 GPUs (10de:2330, nvidia,
// 128 GiB BAR1) at 0000:18/19/39/3a/9a/9b/b8/b9:00.0, NUMA 0 for buses < 0x80 and 1 above, each
// in its own IOMMU group; 2 ConnectX-7 NICs (15b3:1021, mlx5_core) at 0000:1a:00.0 (ens1f0np0,
// mlx5_0) and 0000:9c:00.0 (ens2f0np0, mlx5_1), 200 Gb/s, link up, SR-IOV with 8 VFs possible
// (VF 15b3:101e, driver mlx5_core), none created.
absl::Status AddGpuServer(FakeSysfs& fake);

// AddNicServer builds the sysfs of the machine in devices/tests/data/nic-1s-8port.xml: drivers
// ice, iavf, ast, vfio-pci; 4 dual-port E810-C (8086:1592, ice) at 0000:18/32/4c/66:00.{0,1}
// behind root ports 0000:17/31/4b/65:02.0, netdevs ens<N>f<F> with the XML's MACs, 100 Gb/s, link
// up, NUMA 0, SR-IOV with up to 64 VFs (8086:1889, iavf); and the BMC's VGA controller
// (1a03:2000, ast, class 0x030000) at 0000:03:00.0 with a 64 MiB BAR.
absl::Status AddNicServer(FakeSysfs& fake);

}  // namespace devlet::devices::testing
