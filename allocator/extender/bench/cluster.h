// File: allocator/extender/bench/cluster.h (private to the extender's benchmark and its tests)
//
// A synthetic GPU cluster for driving devlet-extender at scale: every node has eight GPUs (model,
// memory capacity, numaNode, pcieRoot, pciBusID) and four NICs (numaNode, pcieRoot), like a
// typical 8-GPU training box; DeviceClasses `gpu` and `nic`; a share of the GPUs already allocated
// by existing claims (so allocate mode sees a partly used cluster); and pods whose claims ask for
// one GPU, two GPUs on one NUMA node, or a GPU and a NIC on one PCIe root.
//
//   devlet::extender::bench::ClusterSpec spec{.nodes = 500};
//   DEVLET_RETURN_IF_ERROR(devlet::extender::bench::Populate(spec, state));
//   std::string body = devlet::extender::bench::ExtenderArgsJson(
//       devlet::extender::bench::PodKind::kTwoGpusSameNuma, spec);
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "devlet/extender/extender.h"

namespace devlet::extender::bench {

// ClusterSpec sizes the synthetic cluster.
struct ClusterSpec {
  int nodes = 500;
  // Node i has (i % (busy_modulus)) of its GPUs allocated already (0 disables), so nodes range
  // from empty to busy_modulus-1 GPUs in use.
  int busy_modulus = 4;
};

// PodKind is the shape of the pod being scheduled.
enum class PodKind {
  kOneGpu,            // one claim, one GPU
  kTwoGpusSameNuma,   // one claim, two GPUs with matchAttribute numaNode
  kGpuNicSamePcieRoot,  // one claim, a GPU and a NIC with matchAttribute pcieRoot
};

// AllPodKinds lists every PodKind, for loops.
std::vector<PodKind> AllPodKinds();
// PodKindName names a kind for reports ("1gpu", "2gpu-numa", "gpu+nic-pcie").
std::string_view PodKindName(PodKind kind);

// NodeName is the name of node `i` ("node-00042").
std::string NodeName(int i);

// Populate applies the classes, slices, nodes, busy claims and the benchmark pods' (unallocated)
// claims to `state` and marks it synced.
absl::Status Populate(const ClusterSpec& spec, ClusterState& state);

// ChurnClaim is an allocated claim named `churn-<slot>` holding gpu-4 of node `n`: applying it
// for another node moves it, which changes the allocations of two nodes, as binding a pod does.
kube::ResourceClaim ChurnClaim(int slot, int n);

// PodJson is the pod of `kind` as kube-scheduler sends it (informer object: no apiVersion/kind,
// with the usual metadata, containers, tolerations and status a real pod carries).
std::string PodJson(PodKind kind);

// ExtenderArgsJson is the filter/prioritize body for the pod over all nodes of `spec`, as the
// scheduler encodes it for a nodeCacheCapable extender: {"Pod":..,"Nodes":null,"NodeNames":[..]}.
std::string ExtenderArgsJson(PodKind kind, const ClusterSpec& spec);

}  // namespace devlet::extender::bench
