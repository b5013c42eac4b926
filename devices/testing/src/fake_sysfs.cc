#include "devlet/devices/testing/fake_sysfs.h"

#include <stdlib.h>

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <system_error>

#include "devlet/common/status.h"

namespace devlet::devices::testing {
namespace {

namespace fs = std::filesystem;

absl::Status FsError(const std::error_code& ec, const std::string& what) {
  return ErrnoToStatus(ec.value(), what);
}

absl::Status WriteText(const fs::path& path, std::string_view text) {
  std::error_code ec;
  fs::create_directories(path.parent_path(), ec);
  if (ec) return FsError(ec, "creating " + path.parent_path().string());
  std::ofstream out(path, std::ios::trunc);
  out << text;
  if (!out) return Internal("writing " + path.string());
  return absl::OkStatus();
}

absl::Status Link(const fs::path& link, const fs::path& target) {
  std::error_code ec;
  fs::create_directories(link.parent_path(), ec);
  if (ec) return FsError(ec, "creating " + link.parent_path().string());
  fs::remove(link, ec);
  fs::create_symlink(target.lexically_relative(link.parent_path()), link, ec);
  if (ec) return FsError(ec, "linking " + link.string());
  return absl::OkStatus();
}

std::string Hex(unsigned value, int width) {
  char buffer[16];
  std::snprintf(buffer, sizeof(buffer), "0x%0*x", width, value);
  return buffer;
}

std::string Trim(std::string_view s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.remove_suffix(1);
  while (!s.empty() && (s.front() == '\n' || s.front() == ' ')) s.remove_prefix(1);
  return std::string(s);
}

// "0000:1a:00.0" + VF index -> "0000:1a:00.<2+i>" (first VF offset 2, stride 1, like ConnectX).
std::string VfAddress(const std::string& pf, int index) {
  unsigned domain = 0, bus = 0, dev = 0, fn = 0;
  std::sscanf(pf.c_str(), "%x:%x:%x.%x", &domain, &bus, &dev, &fn);
  unsigned routing = dev * 8 + fn + 2 + static_cast<unsigned>(index);
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "%04x:%02x:%02x.%x", domain, bus + routing / 256,
                (routing % 256) / 8, routing % 8);
  return buffer;
}

std::string DefaultParent(const std::string& address) {
  size_t colon = address.rfind(':');
  return "pci" + address.substr(0, colon);
}

}  // namespace

FakeSysfs::FakeSysfs() {
  std::string pattern = (fs::temp_directory_path() / "devlet-fake-sysfs-XXXXXX").string();
  if (mkdtemp(pattern.data()) == nullptr) std::abort();
  root_ = pattern;
  owned_ = true;
  real_ = NewRealSysfs(root_);
  for (const char* dir : {"bus/pci/devices", "bus/pci/drivers", "kernel/iommu_groups", "class/net",
                          "devices"}) {
    fs::create_directories(fs::path(root_) / dir);
  }
  (void)WriteText(fs::path(root_) / "bus/pci/drivers_probe", "");
}

FakeSysfs::FakeSysfs(std::string root) : root_(std::move(root)) {
  real_ = NewRealSysfs(root_);
  for (const char* dir : {"bus/pci/devices", "bus/pci/drivers", "kernel/iommu_groups", "class/net",
                          "devices"}) {
    fs::create_directories(fs::path(root_) / dir);
  }
  (void)WriteText(fs::path(root_) / "bus/pci/drivers_probe", "");
}

FakeSysfs::~FakeSysfs() {
  if (owned_) {
    std::error_code ec;
    fs::remove_all(root_, ec);
  }
}

std::string FakeSysfs::Root() const { return root_; }

absl::Status FakeSysfs::AddDriver(std::string_view name) {
  fs::path dir = fs::path(root_) / "bus/pci/drivers" / std::string(name);
  for (const char* file : {"bind", "unbind", "new_id", "remove_id"}) {
    DEVLET_RETURN_IF_ERROR(WriteText(dir / file, ""));
  }
  return absl::OkStatus();
}

std::string FakeSysfs::DeviceDir(std::string_view address) const {
  auto it = dirs_.find(address);
  return it == dirs_.end() ? "" : it->second;
}

std::string FakeSysfs::BoundDriver(std::string_view address) const {
  auto name = LinkBaseName(*real_, "bus/pci/devices/" + std::string(address) + "/driver");
  return name.ok() ? *name : "";
}

absl::Status FakeSysfs::AddPciDevice(const FakePciDevice& device) {
  const fs::path root(root_);
  const std::string parent = device.parent.empty() ? DefaultParent(device.address) : device.parent;
  const std::string rel = "devices/" + parent + "/" + device.address;
  const fs::path dir = root / rel;
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return FsError(ec, "creating " + dir.string());
  DEVLET_RETURN_IF_ERROR(WriteText(dir / "vendor", Hex(device.vendor_id, 4) + "\n"));
  DEVLET_RETURN_IF_ERROR(WriteText(dir / "device", Hex(device.device_id, 4) + "\n"));
  DEVLET_RETURN_IF_ERROR(
      WriteText(dir / "subsystem_vendor", Hex(device.subsystem_vendor_id, 4) + "\n"));
  DEVLET_RETURN_IF_ERROR(
      WriteText(dir / "subsystem_device", Hex(device.subsystem_device_id, 4) + "\n"));
  DEVLET_RETURN_IF_ERROR(WriteText(dir / "class", Hex(device.class_code, 6) + "\n"));
  DEVLET_RETURN_IF_ERROR(WriteText(dir / "numa_node", std::to_string(device.numa_node) + "\n"));
  DEVLET_RETURN_IF_ERROR(WriteText(dir / "driver_override", "(null)\n"));
  std::string resource;
  unsigned long long base = 0x200000000000ull;
  // BAR0: 16 MiB non-prefetchable registers; then the prefetchable BARs (64-bit, 2 slots each).
  char line[96];
  std::snprintf(line, sizeof(line), "0x%016llx 0x%016llx 0x%016llx\n", 0xb0000000ull,
                0xb0ffffffull, 0x40200ull);
  resource += line;
  int bars = 1;
  for (std::uint64_t size : device.prefetchable_bars) {
    std::snprintf(line, sizeof(line), "0x%016llx 0x%016llx 0x%016llx\n", base,
                  base + static_cast<unsigned long long>(size) - 1, 0x14220cull);
    resource += line;
    resource += "0x0000000000000000 0x0000000000000000 0x0000000000000000\n";
    base += size;
    bars += 2;
  }
  for (; bars < 7; ++bars) resource += "0x0000000000000000 0x0000000000000000 0x0000000000000000\n";
  DEVLET_RETURN_IF_ERROR(WriteText(dir / "resource", resource));
  DEVLET_RETURN_IF_ERROR(Link(root / "bus/pci/devices" / device.address, dir));
  int group = device.iommu_group.value_or(-1);
  if (group >= 0) {
    fs::path group_dir = root / "kernel/iommu_groups" / std::to_string(group);
    DEVLET_RETURN_IF_ERROR(Link(group_dir / "devices" / device.address, dir));
    DEVLET_RETURN_IF_ERROR(Link(dir / "iommu_group", group_dir));
  }
  if (device.sriov_total_vfs > 0) {
    DEVLET_RETURN_IF_ERROR(
        WriteText(dir / "sriov_totalvfs", std::to_string(device.sriov_total_vfs) + "\n"));
    DEVLET_RETURN_IF_ERROR(WriteText(dir / "sriov_numvfs", "0\n"));
    DEVLET_RETURN_IF_ERROR(WriteText(dir / "sriov_drivers_autoprobe", "1\n"));
  }
  devices_[device.address] = device;
  devices_[device.address].parent = parent;
  dirs_[device.address] = rel;
  DEVLET_RETURN_IF_ERROR(SetAerCounter(device.address, "fatal", 0));
  DEVLET_RETURN_IF_ERROR(SetAerCounter(device.address, "nonfatal", 0));
  DEVLET_RETURN_IF_ERROR(SetAerCounter(device.address, "correctable", 0));
  if (!device.driver.empty() && fs::exists(root / "bus/pci/drivers" / device.driver)) {
    DEVLET_RETURN_IF_ERROR(Bind(device.address, device.driver));
  }
  return absl::OkStatus();
}

absl::Status FakeSysfs::CreateDriverChildren(const FakePciDevice& device, const std::string& driver) {
  // Only the device's native driver creates its netdev, RDMA and DRM children.
  if (driver != device.driver) return absl::OkStatus();
  const fs::path root(root_);
  const fs::path dir = root / dirs_[device.address];
  if (device.netdev) {
    fs::path net = dir / "net" / device.netdev->name;
    DEVLET_RETURN_IF_ERROR(WriteText(net / "address", device.netdev->mac + "\n"));
    DEVLET_RETURN_IF_ERROR(WriteText(net / "operstate", device.netdev->operstate + "\n"));
    DEVLET_RETURN_IF_ERROR(
        WriteText(net / "carrier", device.netdev->operstate == "up" ? "1\n" : "0\n"));
    DEVLET_RETURN_IF_ERROR(WriteText(net / "speed", std::to_string(device.netdev->speed_mbps) + "\n"));
    DEVLET_RETURN_IF_ERROR(Link(root / "class/net" / device.netdev->name, net));
  }
  for (const std::string& rdma : device.rdma_devices) {
    DEVLET_RETURN_IF_ERROR(WriteText(dir / "infiniband" / rdma / "ports/1/state", "4: ACTIVE\n"));
    // uverbs<N>, N from the RDMA device's trailing number (mlx5_1 -> uverbs1).
    size_t digits = rdma.find_last_not_of("0123456789") + 1;
    std::string index = digits < rdma.size() ? rdma.substr(digits) : "0";
    DEVLET_RETURN_IF_ERROR(
        WriteText(dir / "infiniband_verbs" / ("uverbs" + index) / "ibdev", rdma + "\n"));
  }
  for (const std::string& drm : device.drm_nodes) {
    DEVLET_RETURN_IF_ERROR(WriteText(dir / "drm" / drm / "dev", "226:0\n"));
  }
  return absl::OkStatus();
}

absl::Status FakeSysfs::RemoveDriverChildren(const FakePciDevice& device) {
  const fs::path root(root_);
  const fs::path dir = root / dirs_[device.address];
  std::error_code ec;
  if (device.netdev) fs::remove(root / "class/net" / device.netdev->name, ec);
  fs::remove_all(dir / "net", ec);
  fs::remove_all(dir / "infiniband", ec);
  fs::remove_all(dir / "infiniband_verbs", ec);
  fs::remove_all(dir / "drm", ec);
  return absl::OkStatus();
}

absl::Status FakeSysfs::Bind(const std::string& address, const std::string& driver) {
  auto it = devices_.find(address);
  if (it == devices_.end()) return ErrnoToStatus(ENODEV, "binding " + address);
  const fs::path root(root_);
  const fs::path dir = root / dirs_[address];
  if (fs::is_symlink(dir / "driver")) return ErrnoToStatus(EBUSY, "binding " + address);
  DEVLET_RETURN_IF_ERROR(Link(dir / "driver", root / "bus/pci/drivers" / driver));
  DEVLET_RETURN_IF_ERROR(Link(root / "bus/pci/drivers" / driver / address, dir));
  return CreateDriverChildren(it->second, driver);
}

absl::Status FakeSysfs::Unbind(const std::string& address) {
  auto it = devices_.find(address);
  if (it == devices_.end()) return ErrnoToStatus(ENODEV, "unbinding " + address);
  const fs::path root(root_);
  const fs::path dir = root / dirs_[address];
  std::string driver = BoundDriver(address);
  std::error_code ec;
  fs::remove(dir / "driver", ec);
  if (!driver.empty()) fs::remove(root / "bus/pci/drivers" / driver / address, ec);
  return RemoveDriverChildren(it->second);
}

absl::Status FakeSysfs::SetNumVfs(const std::string& pf_address, int count) {
  auto it = devices_.find(pf_address);
  if (it == devices_.end()) return ErrnoToStatus(ENODEV, "sriov_numvfs");
  const FakePciDevice pf = it->second;
  if (count < 0 || count > pf.sriov_total_vfs) return ErrnoToStatus(ERANGE, "sriov_numvfs");
  const fs::path root(root_);
  const fs::path pf_dir = root / dirs_[pf_address];
  auto current = ReadInt(*real_, dirs_[pf_address] + "/sriov_numvfs");
  int now = current.ok() ? static_cast<int>(*current) : 0;
  if (count == now) return absl::OkStatus();
  if (now != 0 && count != 0) return ErrnoToStatus(EBUSY, "sriov_numvfs");
  if (count == 0) {
    for (int i = 0; i < now; ++i) {
      std::string vf = VfAddress(pf_address, i);
      DEVLET_RETURN_IF_ERROR(RemovePciDevice(vf));
      std::error_code ec;
      fs::remove(pf_dir / ("virtfn" + std::to_string(i)), ec);
    }
  } else {
    auto autoprobe = ReadInt(*real_, dirs_[pf_address] + "/sriov_drivers_autoprobe");
    for (int i = 0; i < count; ++i) {
      FakePciDevice vf;
      vf.address = VfAddress(pf_address, i);
      vf.parent = pf.parent;
      vf.vendor_id = pf.vendor_id;
      vf.device_id = pf.vf_device_id;
      vf.subsystem_vendor_id = pf.subsystem_vendor_id;
      vf.subsystem_device_id = pf.subsystem_device_id;
      vf.class_code = pf.class_code;
      vf.driver = pf.vf_driver;
      vf.numa_node = pf.numa_node;
      vf.iommu_group = next_iommu_group_++;
      if (pf.netdev) {
        char mac[32];
        std::snprintf(mac, sizeof(mac), "02:00:00:%02x:%02x:%02x", (i >> 16) & 0xff, (i >> 8) & 0xff,
                      i & 0xff);
        vf.netdev = FakeNetdev{.name = pf.netdev->name + "v" + std::to_string(i),
                               .mac = mac,
                               .operstate = pf.netdev->operstate,
                               .speed_mbps = pf.netdev->speed_mbps};
      }
      bool probe = autoprobe.ok() && *autoprobe == 1;
      std::string driver = vf.driver;
      if (!probe) vf.driver.clear();
      DEVLET_RETURN_IF_ERROR(AddPciDevice(vf));
      devices_[vf.address].driver = driver;  // native driver for a later drivers_probe
      const fs::path vf_dir = root / dirs_[vf.address];
      DEVLET_RETURN_IF_ERROR(Link(vf_dir / "physfn", pf_dir));
      DEVLET_RETURN_IF_ERROR(Link(pf_dir / ("virtfn" + std::to_string(i)), vf_dir));
    }
  }
  return WriteText(pf_dir / "sriov_numvfs", std::to_string(count) + "\n");
}

absl::Status FakeSysfs::RemovePciDevice(std::string_view address_view) {
  const std::string address(address_view);
  auto it = devices_.find(address);
  if (it == devices_.end()) return NotFound("no fake PCI device " + address);
  const fs::path root(root_);
  (void)Unbind(address);
  std::error_code ec;
  if (it->second.iommu_group) {
    fs::remove(root / "kernel/iommu_groups" / std::to_string(*it->second.iommu_group) / "devices" /
                   address,
               ec);
  }
  fs::remove(root / "bus/pci/devices" / address, ec);
  fs::remove_all(root / dirs_[address], ec);
  devices_.erase(it);
  dirs_.erase(address);
  return absl::OkStatus();
}

absl::Status FakeSysfs::SetOperstate(std::string_view address, std::string_view operstate) {
  auto it = devices_.find(address);
  if (it == devices_.end() || !it->second.netdev) {
    return NotFound("no fake netdev on " + std::string(address));
  }
  it->second.netdev->operstate = std::string(operstate);
  fs::path net = fs::path(root_) / dirs_[std::string(address)] / "net" / it->second.netdev->name;
  if (!fs::exists(net)) return absl::OkStatus();  // unbound: applied at the next bind
  DEVLET_RETURN_IF_ERROR(WriteText(net / "operstate", std::string(operstate) + "\n"));
  return WriteText(net / "carrier", operstate == "up" ? "1\n" : "0\n");
}

absl::Status FakeSysfs::SetAerCounter(std::string_view address, std::string_view kind, int total) {
  auto it = dirs_.find(address);
  if (it == dirs_.end()) return NotFound("no fake PCI device " + std::string(address));
  std::string text;
  if (kind == "fatal") {
    text = "Undefined 0\nDLP " + std::to_string(total) +
           "\nSDES 0\nTLP 0\nFCP 0\nCmpltTO 0\nCmpltAbrt 0\nUnxCmplt 0\nRxOF 0\nMalfTLP 0\nECRC 0\n"
           "UnsupReq 0\nACSViol 0\nTOTAL_ERR_FATAL " +
           std::to_string(total) + "\n";
  } else if (kind == "nonfatal") {
    text = "Undefined 0\nDLP 0\nSDES 0\nTLP 0\nFCP 0\nCmpltTO " + std::to_string(total) +
           "\nCmpltAbrt 0\nUnxCmplt 0\nRxOF 0\nMalfTLP 0\nECRC 0\nUnsupReq 0\nACSViol 0\n"
           "TOTAL_ERR_NONFATAL " +
           std::to_string(total) + "\n";
  } else if (kind == "correctable") {
    text = "RxErr 0\nBadTLP " + std::to_string(total) +
           "\nBadDLLP 0\nRollover 0\nTimeout 0\nNonFatalErr 0\nCorrIntErr 0\nHeaderOF 0\n"
           "TOTAL_ERR_COR " +
           std::to_string(total) + "\n";
  } else {
    return InvalidArgument("AER kind must be fatal, nonfatal or correctable");
  }
  return WriteText(fs::path(root_) / it->second / ("aer_dev_" + std::string(kind)), text);
}

absl::Status FakeSysfs::AddMdevType(std::string_view address, std::string_view type,
                                    std::string_view name, int available_instances) {
  auto it = dirs_.find(address);
  if (it == dirs_.end()) return NotFound("no fake PCI device " + std::string(address));
  const fs::path dir = fs::path(root_) / it->second / "mdev_supported_types" / std::string(type);
  DEVLET_RETURN_IF_ERROR(WriteText(dir / "name", std::string(name) + "\n"));
  DEVLET_RETURN_IF_ERROR(WriteText(dir / "device_api", "vfio-pci\n"));
  DEVLET_RETURN_IF_ERROR(
      WriteText(dir / "available_instances", std::to_string(available_instances) + "\n"));
  DEVLET_RETURN_IF_ERROR(WriteText(dir / "create", ""));
  std::error_code ec;
  fs::create_directories(dir / "devices", ec);
  if (ec) return FsError(ec, "creating " + (dir / "devices").string());
  return absl::OkStatus();
}

absl::Status FakeSysfs::CreateMdev(const std::string& type_dir, const std::string& uuid) {
  // The kernel's uuid_parse: 36 characters, dashes at 8/13/18/23, hex digits elsewhere.
  bool valid = uuid.size() == 36;
  for (size_t i = 0; valid && i < uuid.size(); ++i) {
    valid = (i == 8 || i == 13 || i == 18 || i == 23) ? uuid[i] == '-'
                                                      : std::isxdigit(static_cast<unsigned char>(uuid[i]));
  }
  if (!valid) return ErrnoToStatus(EINVAL, "writing " + uuid + " to " + type_dir + "/create");
  const fs::path root(root_);
  std::error_code exists_error;
  if (fs::exists(root / "bus/mdev/devices" / uuid, exists_error)) {
    return ErrnoToStatus(EEXIST, "writing " + uuid + " to " + type_dir + "/create");
  }
  auto available = ReadInt(*real_, type_dir + "/available_instances");
  if (!available.ok() || *available <= 0) {
    return ErrnoToStatus(EUSERS, "writing " + uuid + " to " + type_dir + "/create");
  }
  // type_dir is <parent dir>/mdev_supported_types/<type>.
  const fs::path parent_dir = fs::path(type_dir).parent_path().parent_path();
  const fs::path mdev = root / parent_dir / uuid;
  DEVLET_RETURN_IF_ERROR(WriteText(mdev / "remove", ""));
  DEVLET_RETURN_IF_ERROR(Link(mdev / "mdev_type", root / type_dir));
  DEVLET_RETURN_IF_ERROR(Link(root / type_dir / "devices" / uuid, mdev));
  DEVLET_RETURN_IF_ERROR(Link(root / "bus/mdev/devices" / uuid, mdev));
  return WriteText(root / type_dir / "available_instances", std::to_string(*available - 1) + "\n");
}

absl::Status FakeSysfs::RemoveMdev(const std::string& uuid) {
  const fs::path root(root_);
  auto real = real_->RealPath("bus/mdev/devices/" + uuid);
  if (!real.ok()) return ErrnoToStatus(ENODEV, "removing mdev " + uuid);
  auto type_dir = real_->RealPath(*real + "/mdev_type");
  std::error_code ec;
  fs::remove(root / "bus/mdev/devices" / uuid, ec);
  fs::remove_all(root / *real, ec);
  if (type_dir.ok()) {
    fs::remove(root / *type_dir / "devices" / uuid, ec);
    auto available = ReadInt(*real_, *type_dir + "/available_instances");
    if (available.ok()) {
      return WriteText(root / *type_dir / "available_instances",
                       std::to_string(*available + 1) + "\n");
    }
  }
  return absl::OkStatus();
}

absl::Status FakeSysfs::SetNotResponding(std::string_view address, bool not_responding) {
  auto it = devices_.find(address);
  if (it == devices_.end()) return NotFound("no fake PCI device " + std::string(address));
  const fs::path dir = fs::path(root_) / dirs_[std::string(address)];
  return WriteText(dir / "vendor",
                   not_responding ? std::string("0xffff\n") : Hex(it->second.vendor_id, 4) + "\n");
}

absl::Status FakeSysfs::SetRdmaPortState(std::string_view address, std::string_view state) {
  auto it = devices_.find(address);
  if (it == devices_.end() || it->second.rdma_devices.empty()) {
    return NotFound("no fake RDMA device on " + std::string(address));
  }
  const fs::path dir = fs::path(root_) / dirs_[std::string(address)] / "infiniband" /
                       it->second.rdma_devices.front() / "ports/1/state";
  return WriteText(dir, std::string(state) + "\n");
}

void FakeSysfs::FailWrites(std::string path_suffix, int error_number) {
  failures_.emplace_back(std::move(path_suffix), error_number);
}

void FakeSysfs::ClearFailures() { failures_.clear(); }

absl::StatusOr<std::string> FakeSysfs::ReadFile(std::string_view path) const {
  return real_->ReadFile(path);
}
bool FakeSysfs::Exists(std::string_view path) const { return real_->Exists(path); }
absl::StatusOr<std::string> FakeSysfs::ReadLink(std::string_view path) const {
  return real_->ReadLink(path);
}
absl::StatusOr<std::string> FakeSysfs::RealPath(std::string_view path) const {
  return real_->RealPath(path);
}
absl::StatusOr<std::vector<std::string>> FakeSysfs::ListDir(std::string_view path) const {
  return real_->ListDir(path);
}

absl::Status FakeSysfs::WriteFile(std::string_view path_view, std::string_view value) {
  const std::string path(path_view);
  for (const auto& [suffix, error] : failures_) {
    if (path.size() >= suffix.size() && path.compare(path.size() - suffix.size(), suffix.size(), suffix) == 0) {
      return ErrnoToStatus(error, "writing \"" + Trim(value) + "\" to " + root_ + "/" + path);
    }
  }
  if (!real_->Exists(path)) {
    return ErrnoToStatus(ENOENT, "writing " + root_ + "/" + path);
  }
  // Resolve the parent directory so that writes through links (`<dev>/driver/unbind`) are seen
  // for what they are.
  fs::path p(path);
  DEVLET_ASSIGN_OR_RETURN(std::string parent, real_->RealPath(p.parent_path().string()));
  const std::string name = p.filename().string();
  const std::string arg = Trim(value);
  absl::Status status = absl::OkStatus();
  bool handled = false;
  fs::path parent_path(parent);
  if (parent_path.parent_path() == "bus/pci/drivers" && (name == "unbind" || name == "bind")) {
    handled = true;
    const std::string driver = parent_path.filename().string();
    if (!devices_.contains(arg)) {
      status = ErrnoToStatus(ENODEV, "writing " + arg + " to " + path);
    } else if (name == "unbind") {
      if (BoundDriver(arg) != driver) {
        status = ErrnoToStatus(ENODEV, "writing " + arg + " to " + path);
      } else {
        status = Unbind(arg);
      }
    } else {
      status = Bind(arg, driver);
    }
  } else if (parent == "bus/pci" && name == "drivers_probe") {
    handled = true;
    if (!devices_.contains(arg)) {
      status = ErrnoToStatus(ENODEV, "writing " + arg + " to " + path);
    } else if (BoundDriver(arg).empty()) {
      std::string override_driver =
          Trim(real_->ReadFile(dirs_[arg] + "/driver_override").value_or(""));
      std::string driver = override_driver.empty() || override_driver == "(null)"
                               ? devices_[arg].driver
                               : override_driver;
      if (!driver.empty() && real_->Exists("bus/pci/drivers/" + driver)) status = Bind(arg, driver);
    }
  } else if (name == "driver_override") {
    handled = true;
    status = WriteText(fs::path(root_) / path, arg.empty() ? "(null)\n" : arg + "\n");
  } else if (name == "create" && parent_path.parent_path().filename() == "mdev_supported_types") {
    handled = true;
    status = CreateMdev(parent, arg);
  } else if (name == "remove" && real_->Exists(parent + "/mdev_type")) {
    handled = true;
    status = arg == "1" ? RemoveMdev(parent_path.filename().string())
                        : ErrnoToStatus(EINVAL, "writing " + arg + " to " + path);
  } else if (name == "sriov_numvfs") {
    handled = true;
    std::string address = fs::path(parent).filename().string();
    int count = -1;
    try {
      count = std::stoi(arg);
    } catch (...) {
      status = ErrnoToStatus(EINVAL, "writing " + arg + " to " + path);
    }
    if (status.ok()) status = SetNumVfs(address, count);
  }
  if (!handled) status = real_->WriteFile(path, value);
  if (status.ok()) writes_.push_back(path + "=" + arg);
  return status;
}

absl::Status AddNicServer(FakeSysfs& fake) {
  for (const char* driver : {"ice", "iavf", "ast", "vfio-pci", "pcieport"}) {
    DEVLET_RETURN_IF_ERROR(fake.AddDriver(driver));
  }
  const unsigned roots[] = {0x17, 0x31, 0x4b, 0x65};
  int group = 50;
  for (int n = 0; n < 4; ++n) {
    for (int f = 0; f < 2; ++f) {
      char address[32], parent[64], mac[32];
      std::snprintf(address, sizeof(address), "0000:%02x:00.%d", roots[n] + 1, f);
      std::snprintf(parent, sizeof(parent), "pci0000:%02x/0000:%02x:02.0", roots[n], roots[n]);
      std::snprintf(mac, sizeof(mac), "40:a6:b7:%02x:%02x:%02x", n, f, 0x10 + n * 2 + f);
      FakePciDevice port{.address = address, .parent = parent, .vendor_id = 0x8086,
                         .device_id = 0x1592, .subsystem_vendor_id = 0x8086,
                         .subsystem_device_id = 0x0002, .class_code = 0x020000, .driver = "ice",
                         .numa_node = 0, .iommu_group = group++,
                         .prefetchable_bars = {32ull << 20, 64ull << 10}};
      port.netdev = FakeNetdev{.name = "ens" + std::to_string(n + 1) + "f" + std::to_string(f),
                               .mac = mac, .operstate = "up", .speed_mbps = 100000};
      port.sriov_total_vfs = 64;
      port.vf_device_id = 0x1889;
      port.vf_driver = "iavf";
      DEVLET_RETURN_IF_ERROR(fake.AddPciDevice(port));
    }
  }
  FakePciDevice bmc{.address = "0000:03:00.0", .parent = "pci0000:02/0000:02:00.0",
                    .vendor_id = 0x1a03, .device_id = 0x2000, .subsystem_vendor_id = 0x15d9,
                    .subsystem_device_id = 0x1c48, .class_code = 0x030000, .driver = "ast",
                    .numa_node = 0, .iommu_group = 70, .prefetchable_bars = {64ull << 20}};
  bmc.drm_nodes = {"card0"};
  return fake.AddPciDevice(bmc);
}

absl::Status AddGpuServer(FakeSysfs& fake) {
  for (const char* driver : {"nvidia", "mlx5_core", "vfio-pci", "pcieport"}) {
    DEVLET_RETURN_IF_ERROR(fake.AddDriver(driver));
  }
  struct Slot {
    const char* address;
    const char* parent;
    int numa;
  };
  const Slot gpus[] = {
      {"0000:18:00.0", "pci0000:15/0000:15:01.0/0000:16:00.0/0000:17:00.0", 0},
      {"0000:19:00.0", "pci0000:15/0000:15:01.0/0000:16:00.0/0000:17:01.0", 0},
      {"0000:39:00.0", "pci0000:38/0000:38:01.0", 0},
      {"0000:3a:00.0", "pci0000:38/0000:38:02.0", 0},
      {"0000:9a:00.0", "pci0000:97/0000:97:01.0/0000:98:00.0/0000:99:00.0", 1},
      {"0000:9b:00.0", "pci0000:97/0000:97:01.0/0000:98:00.0/0000:99:01.0", 1},
      {"0000:b8:00.0", "pci0000:b7/0000:b7:01.0", 1},
      {"0000:b9:00.0", "pci0000:b7/0000:b7:02.0", 1},
  };
  int group = 10;
  int card = 1;
  for (const Slot& slot : gpus) {
    FakePciDevice gpu;
    gpu.address = slot.address;
    gpu.parent = slot.parent;
    gpu.vendor_id = 0x10de;
    gpu.device_id = 0x2330;
    gpu.subsystem_vendor_id = 0x10de;
    gpu.subsystem_device_id = 0x16c1;
    gpu.class_code = 0x030200;
    gpu.driver = "nvidia";
    gpu.numa_node = slot.numa;
    gpu.iommu_group = group++;
    gpu.prefetchable_bars = {128ull << 30, 32ull << 20};
    gpu.drm_nodes = {"card" + std::to_string(card), "renderD" + std::to_string(128 + card)};
    ++card;
    DEVLET_RETURN_IF_ERROR(fake.AddPciDevice(gpu));
  }
  const Slot nics[] = {
      {"0000:1a:00.0", "pci0000:15/0000:15:01.0/0000:16:00.0/0000:17:02.0", 0},
      {"0000:9c:00.0", "pci0000:97/0000:97:01.0/0000:98:00.0/0000:99:02.0", 1},
  };
  for (int i = 0; i < 2; ++i) {
    FakePciDevice nic;
    nic.address = nics[i].address;
    nic.parent = nics[i].parent;
    nic.vendor_id = 0x15b3;
    nic.device_id = 0x1021;
    nic.subsystem_vendor_id = 0x15b3;
    nic.subsystem_device_id = 0x0041;
    nic.class_code = 0x020000;
    nic.driver = "mlx5_core";
    nic.numa_node = nics[i].numa;
    nic.iommu_group = 30 + i;
    nic.prefetchable_bars = {32ull << 20};
    char mac[32];
    std::snprintf(mac, sizeof(mac), "b8:3f:d2:0a:%02x:10", i);
    nic.netdev = FakeNetdev{.name = "ens" + std::to_string(i + 1) + "f0np0", .mac = mac,
                            .operstate = "up", .speed_mbps = 200000};
    nic.rdma_devices = {"mlx5_" + std::to_string(i)};
    nic.sriov_total_vfs = 8;
    nic.vf_device_id = 0x101e;
    nic.vf_driver = "mlx5_core";
    DEVLET_RETURN_IF_ERROR(fake.AddPciDevice(nic));
  }
  return absl::OkStatus();
}

}  // namespace devlet::devices::testing
