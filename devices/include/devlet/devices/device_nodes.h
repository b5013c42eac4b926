// File: devlet/devices/device_nodes.h
//
// The host device nodes a container or VM needs for a PCI function as it is bound right now, for
// the CDI specs the node agent writes after preparation:
//
//   vfio-pci          /dev/vfio/<iommu group>           + shared /dev/vfio/vfio
//     with iommufd    + /dev/vfio/devices/vfio<N> (from <dev>/vfio-dev/vfio<N>) + shared /dev/iommu,
//                     when sysfs has the iommu misc device (class/misc/iommu)
//   nvidia            /dev/nvidia<minor> (with a procfs)  + shared /dev/nvidiactl, /dev/nvidia-uvm,
//                                                         /dev/nvidia-uvm-tools
//   DRM (GPUs)        /dev/dri/card<N>, /dev/dri/renderD<M>
//   RDMA (NICs)       /dev/infiniband/uverbs<N>         + shared /dev/infiniband/rdma_cm
//
//   DEVLET_ASSIGN_OR_RETURN(DeviceNodeSet nodes, DeviceNodesFor(sysfs, "0000:18:00.0"));
//
// Not covered: NVIDIA MIG capability nodes; mediated devices (a VMM opens them through the
// vfio group of the mdev, /sys/bus/mdev/devices/<uuid>/iommu_group; the node agent passes the
// UUID instead).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "devlet/devices/sysfs.h"

namespace devlet::devices {

// DeviceNodeSet lists host paths.
struct DeviceNodeSet {
  std::vector<std::string> device_nodes;  // this function's own nodes
  std::vector<std::string> shared_nodes;  // nodes every user of this kind needs once per container
  bool operator==(const DeviceNodeSet&) const = default;
};

// DeviceNodesFor reads the function's binding from sysfs (and, for NVIDIA GPUs, the device minor
// from `procfs`, a Sysfs rooted at /proc; nullptr skips it); NotFound when the function is gone,
// FailedPrecondition when it is bound to vfio-pci without an IOMMU group.
absl::StatusOr<DeviceNodeSet> DeviceNodesFor(const Sysfs& sysfs, std::string_view pci_address,
                                             const Sysfs* procfs = nullptr);

}  // namespace devlet::devices
