#include "devlet/devices/device_nodes.h"

#include "devlet/common/status.h"

namespace devlet::devices {

absl::StatusOr<DeviceNodeSet> DeviceNodesFor(const Sysfs& sysfs, std::string_view pci_address,
                                             const Sysfs* procfs) {
  const std::string dev = "bus/pci/devices/" + std::string(pci_address);
  if (!sysfs.Exists(dev)) {
    return NotFound("PCI device " + std::string(pci_address) + " is gone");
  }
  DeviceNodeSet nodes;
  auto driver = LinkBaseName(sysfs, dev + "/driver");
  if (driver.ok() && *driver == "vfio-pci") {
    auto group = LinkBaseName(sysfs, dev + "/iommu_group");
    if (!group.ok()) {
      return FailedPrecondition("PCI device " + std::string(pci_address) +
                                " is bound to vfio-pci but has no IOMMU group");
    }
    nodes.device_nodes.push_back("/dev/vfio/" + *group);
    nodes.shared_nodes.push_back("/dev/vfio/vfio");
    // iommufd: the per-device cdev (kernel >= 6.2, CONFIG_VFIO_DEVICE_CDEV) plus /dev/iommu let a
    // VMM skip the legacy container; both kinds are handed over and the VMM picks one.
    auto cdevs = sysfs.ListDir(dev + "/vfio-dev");
    const bool iommufd =
        sysfs.Exists("class/misc/iommu") || sysfs.Exists("devices/virtual/misc/iommu");
    if (cdevs.ok() && iommufd) {
      for (const std::string& name : *cdevs) {
        if (name.rfind("vfio", 0) == 0) nodes.device_nodes.push_back("/dev/vfio/devices/" + name);
      }
      nodes.shared_nodes.push_back("/dev/iommu");
    }
    return nodes;
  }
  if (driver.ok() && *driver == "nvidia" && procfs != nullptr) {
    NvidiaInfo info = ReadNvidiaInfo(*procfs, pci_address);
    if (info.minor) {
      nodes.device_nodes.push_back("/dev/nvidia" + std::to_string(*info.minor));
      nodes.shared_nodes = {"/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools"};
    }
  }
  if (auto drm = sysfs.ListDir(dev + "/drm"); drm.ok()) {
    for (const std::string& name : *drm) {
      if (name.rfind("card", 0) == 0 || name.rfind("renderD", 0) == 0) {
        nodes.device_nodes.push_back("/dev/dri/" + name);
      }
    }
  }
  if (auto verbs = sysfs.ListDir(dev + "/infiniband_verbs"); verbs.ok() && !verbs->empty()) {
    for (const std::string& name : *verbs) nodes.device_nodes.push_back("/dev/infiniband/" + name);
    nodes.shared_nodes.push_back("/dev/infiniband/rdma_cm");
  }
  return nodes;
}

}  // namespace devlet::devices
