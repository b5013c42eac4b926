// devlet-node-demo: plays the cluster around devlet-node for the standalone demo
// (scripts/demo.sh):
//
//   devlet-node-demo bind --manifests DIR --allocated FILE --pod NS/NAME
//       the scheduler's binding: the allocated claims (devlet-alloc's output List) get
//       status.reservedFor = the pod and are written into DIR, one file each.
//   devlet-node-demo run --manifests DIR --pod NS/NAME [--pod ...] --registrar-dir D --driver X
//       --nri-socket S --cdi-root C [--report FILE]
//       the kubelet and the container runtime for the pods: registration (GetInfo,
//       NotifyRegistrationStatus) through D/X-reg.sock, NodePrepareResources (DRA v1) for each
//       pod's claims, then as the runtime on S: Configure, Synchronize, and per pod
//       RunPodSandbox, CreateContainer for each container (printing the adjustment, the CDI
//       edits it resolves to and the device-metadata files mounted), Stop/Remove, and finally
//       NodeUnprepareResources. Exits 0 only when every step worked and the files the plugin
//       wrote were removed again.
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "devlet/cdi/spec_dir.h"
#include "devlet/common/flags.h"
#include "devlet/common/log.h"
#include "devlet/common/status.h"
#include "devlet/kube/client.h"
#include "devlet/nri/runtime_session.h"
#include "devlet/nri/socket.h"
#include "dra/v1/api.grpc.pb.h"
#include "google/protobuf/util/json_util.h"
#include "nlohmann/json.hpp"
#include "pluginregistration/v1/api.grpc.pb.h"

namespace {

namespace fs = std::filesystem;
namespace kube = devlet::kube;
namespace nri = devlet::nri;
namespace dra = k8s::io::kubelet::pkg::apis::dra::v1;
using nlohmann::ordered_json;

struct Flags {
  std::string manifests;
  std::string allocated;
  std::string pod;
  std::vector<std::string> pods;
  std::string registrar_dir;
  std::string driver = "devlet.io";
  std::string nri_socket;
  std::string cdi_root;
  std::string report;
  int timeout_seconds = 30;
};

int failures = 0;

void Step(const std::string& title) { std::cout << "\n==> " << title << "\n"; }
void Ok(const std::string& what) { std::cout << "    ok   " << what << "\n"; }
void Fail(const std::string& what) {
  ++failures;
  std::cout << "    FAIL " << what << "\n";
}

absl::StatusOr<kube::Pod> GetPod(kube::ObjectStore& store, const std::string& ref) {
  auto slash = ref.find('/');
  std::string ns = slash == std::string::npos ? "default" : ref.substr(0, slash);
  std::string name = slash == std::string::npos ? ref : ref.substr(slash + 1);
  return kube::GetAs<kube::Pod>(store, ns, name);
}

std::string ProtoJson(const google::protobuf::Message& message) {
  std::string out;
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = false;
  options.preserve_proto_field_names = true;
  (void)google::protobuf::util::MessageToJsonString(message, &out, options);
  return out;
}

ordered_json EditsJson(const devlet::cdi::ContainerEdits& edits) {
  ordered_json out = ordered_json::object();
  if (!edits.env.empty()) out["env"] = edits.env;
  if (!edits.device_nodes.empty()) {
    ordered_json nodes = ordered_json::array();
    for (const auto& node : edits.device_nodes) {
      nodes.push_back(node.host_path.empty() || node.host_path == node.path
                          ? node.path
                          : node.host_path + " -> " + node.path);
    }
    out["deviceNodes"] = nodes;
  }
  if (!edits.mounts.empty()) {
    ordered_json mounts = ordered_json::array();
    for (const auto& m : edits.mounts) {
      mounts.push_back(m.host_path + " -> " + m.container_path);
    }
    out["mounts"] = mounts;
  }
  return out;
}

std::string AttributeText(const kube::DeviceAttribute& a) {
  if (a.int_value) return std::to_string(*a.int_value);
  if (a.bool_value) return *a.bool_value ? "true" : "false";
  if (a.string_value) return *a.string_value;
  if (a.version_value) return *a.version_value;
  return "[list]";
}

std::string Attr(const kube::Device& device, const std::string& driver, const std::string& name) {
  auto it = device.attributes.find(name);
  if (it == device.attributes.end()) it = device.attributes.find(driver + "/" + name);
  return it == device.attributes.end() ? "-" : AttributeText(it->second);
}

// Slices prints the node's published ResourceSlices as a table.
int Slices(const Flags& flags) {
  absl::StatusOr<std::unique_ptr<kube::ManifestStore>> store =
      kube::ManifestStore::Open({.dir = flags.manifests});
  if (!store.ok()) {
    std::cerr << devlet::Message(store.status()) << "\n";
    return 1;
  }
  absl::StatusOr<std::vector<kube::ResourceSlice>> slices =
      kube::ListAs<kube::ResourceSlice>(**store, {.field_driver = flags.driver});
  if (!slices.ok() || slices->empty()) {
    std::cerr << "no ResourceSlices of driver " << flags.driver << " in " << flags.manifests << "\n";
    return 1;
  }
  int devices = 0;
  for (const kube::ResourceSlice& slice : *slices) {
    std::printf("ResourceSlice %s  pool %s generation %lld (%lld slices)  %zu devices  %zu counter sets\n",
                slice.metadata.name.c_str(), slice.spec.pool.name.c_str(),
                static_cast<long long>(slice.spec.pool.generation),
                static_cast<long long>(slice.spec.pool.resource_slice_count),
                slice.spec.devices.size(), slice.spec.shared_counters.size());
    std::printf("  %-14s %-6s %-14s %-5s %-12s %s\n", "DEVICE", "TYPE", "PCI", "NUMA", "PCIE-ROOT",
                "CAPACITY");
    for (const kube::Device& d : slice.spec.devices) {
      std::string capacity;
      for (const auto& [name, cap] : d.capacity) {
        capacity += (capacity.empty() ? "" : " ") + name + "=" + cap.value.str();
      }
      std::printf("  %-14s %-6s %-14s %-5s %-12s %s\n", d.name.c_str(),
                  Attr(d, flags.driver, "type").c_str(),
                  Attr(d, flags.driver, "resource.kubernetes.io/pciBusID").c_str(),
                  Attr(d, flags.driver, "resource.kubernetes.io/numaNode").c_str(),
                  Attr(d, flags.driver, "resource.kubernetes.io/pcieRoot").c_str(), capacity.c_str());
      ++devices;
    }
  }
  std::printf("%d devices published\n", devices);
  return 0;
}

int Bind(const Flags& flags) {
  absl::StatusOr<std::unique_ptr<kube::ManifestStore>> store =
      kube::ManifestStore::Open({.dir = flags.manifests});
  if (!store.ok()) {
    std::cerr << devlet::Message(store.status()) << "\n";
    return 1;
  }
  absl::StatusOr<kube::Pod> pod = GetPod(**store, flags.pod);
  if (!pod.ok()) {
    std::cerr << "bind: " << devlet::Message(pod.status()) << "\n";
    return 1;
  }
  std::ifstream in(flags.allocated);
  std::stringstream text;
  text << in.rdbuf();
  absl::StatusOr<std::vector<kube::Object>> objects =
      kube::Decode(text.str(), {.source = flags.allocated});
  if (!objects.ok()) {
    std::cerr << "bind: " << devlet::Message(objects.status()) << "\n";
    return 1;
  }
  int bound = 0;
  for (kube::Object& object : *objects) {
    auto* claim = std::get_if<kube::ResourceClaim>(&object);
    if (claim == nullptr) continue;
    if (!claim->status.allocation) {
      std::cerr << "bind: ResourceClaim " << claim->metadata.name << " is not allocated\n";
      return 1;
    }
    if (claim->metadata.namespace_.empty()) claim->metadata.namespace_ = "default";
    claim->status.reserved_for = {
        {.api_group = "", .resource = "pods", .name = pod->metadata.name, .uid = pod->metadata.uid}};
    claim->metadata.resource_version.clear();
    absl::StatusOr<kube::Object> written = (*store)->Create(object);
    if (absl::IsAlreadyExists(written.status())) {
      written = (*store)->Update(object);
    }
    if (!written.ok()) {
      std::cerr << "bind: " << devlet::Message(written.status()) << "\n";
      return 1;
    }
    std::cout << "bound ResourceClaim " << claim->metadata.namespace_ << "/" << claim->metadata.name
              << " (uid " << kube::MetadataOf(*written).uid << ") to pod "
              << pod->metadata.namespace_ << "/" << pod->metadata.name << " -> "
              << (*store)->FileFor(*written) << "\n";
    ++bound;
  }
  if (bound == 0) {
    std::cerr << "bind: no ResourceClaim in " << flags.allocated << "\n";
    return 1;
  }
  return 0;
}

std::vector<std::string> CdiFiles(const std::string& cdi_root) {
  std::vector<std::string> out;
  std::error_code ec;
  for (fs::directory_iterator it(cdi_root, ec), end; !ec && it != end; it.increment(ec)) {
    out.push_back(it->path().filename().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

// PodRun is one pod the demo walks through the kubelet and the runtime.
struct PodRun {
  kube::Pod pod;
  std::vector<kube::ResourceClaim> claims;
  std::map<std::string, std::vector<dra::Device>> prepared;  // by claim UID
  nri::api::PodSandbox sandbox;
  std::vector<nri::api::Container> created;
  ordered_json report = ordered_json::object();
};

// MetadataJson reads a device-metadata file the container gets mounted (KEP-5304): a stream of
// JSON documents, the same metadata in each API version the kubelet may read; the first one is
// returned.
ordered_json MetadataJson(const std::string& path) {
  std::ifstream in(path);
  if (!in) return "unreadable: " + path;
  try {
    ordered_json first;
    in >> first;
    return first;
  } catch (const std::exception& e) {
    return "not JSON: " + path + ": " + e.what();
  }
}

// PrepareClaims sends NodePrepareResources for one pod's claims and records the answer.
bool PrepareClaims(const Flags& flags, kube::ObjectStore& store, dra::DRAPlugin::Stub& dra_stub,
                   PodRun& run) {
  const auto timeout = std::chrono::seconds(flags.timeout_seconds);
  const kube::Pod& pod = run.pod;
  Step("kubelet: NodePrepareResources for pod " + pod.metadata.namespace_ + "/" +
       pod.metadata.name + " (uid " + pod.metadata.uid + ")");
  for (const kube::PodResourceClaim& ref : pod.spec.resource_claims) {
    if (!ref.resource_claim_name) {
      Fail("pod claim " + ref.name + ": only resourceClaimName is supported by the demo");
      continue;
    }
    absl::StatusOr<kube::ResourceClaim> claim =
        kube::GetAs<kube::ResourceClaim>(store, pod.metadata.namespace_, *ref.resource_claim_name);
    if (!claim.ok()) {
      Fail(devlet::Message(claim.status()));
      continue;
    }
    run.claims.push_back(*std::move(claim));
  }
  dra::NodePrepareResourcesRequest prepare;
  for (const kube::ResourceClaim& claim : run.claims) {
    dra::Claim* c = prepare.add_claims();
    c->set_namespace_(claim.metadata.namespace_);
    c->set_name(claim.metadata.name);
    c->set_uid(claim.metadata.uid);
  }
  dra::NodePrepareResourcesResponse prepared;
  {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + timeout);
    grpc::Status status = dra_stub.NodePrepareResources(&context, prepare, &prepared);
    if (!status.ok()) {
      Fail("NodePrepareResources: " + status.error_message());
      return false;
    }
  }
  ordered_json prepare_report = ordered_json::object();
  for (const kube::ResourceClaim& claim : run.claims) {
    auto it = prepared.claims().find(claim.metadata.uid);
    std::string who = "claim " + claim.metadata.namespace_ + "/" + claim.metadata.name;
    if (it == prepared.claims().end()) {
      Fail(who + ": no answer");
      continue;
    }
    if (!it->second.error().empty()) {
      Fail(who + ": " + it->second.error());
      continue;
    }
    ordered_json devices = ordered_json::array();
    run.prepared[claim.metadata.uid].assign(it->second.devices().begin(),
                                            it->second.devices().end());
    for (const dra::Device& device : it->second.devices()) {
      std::string ids;
      for (const std::string& id : device.cdi_device_ids()) ids += (ids.empty() ? "" : " ") + id;
      Ok(who + ": " + device.pool_name() + "/" + device.device_name() + "  CDI: " + ids);
      devices.push_back({{"pool", device.pool_name()},
                         {"device", device.device_name()},
                         {"cdiDeviceIds", std::vector<std::string>(device.cdi_device_ids().begin(),
                                                                   device.cdi_device_ids().end())}});
    }
    prepare_report[claim.metadata.namespace_ + "/" + claim.metadata.name] = devices;
  }
  run.report["prepared"] = prepare_report;
  return true;
}

// CdiDevicesOf is what the kubelet passes the runtime for one container (CRI
// ContainerConfig.CDI_devices): the CDI IDs of the prepared devices of the claims, and requests,
// the container names in its resources; nothing for a container that names none.
std::vector<std::string> CdiDevicesOf(const PodRun& run, const kube::Container& spec) {
  std::vector<std::string> ids;
  for (const kube::ContainerResourceClaim& ref : spec.resources.claims) {
    for (const kube::PodResourceClaim& pod_claim : run.pod.spec.resource_claims) {
      if (pod_claim.name != ref.name || !pod_claim.resource_claim_name) continue;
      for (const kube::ResourceClaim& claim : run.claims) {
        if (claim.metadata.name != *pod_claim.resource_claim_name) continue;
        auto prepared = run.prepared.find(claim.metadata.uid);
        if (prepared == run.prepared.end()) continue;
        for (const dra::Device& device : prepared->second) {
          if (!ref.request.empty() &&
              std::find(device.request_names().begin(), device.request_names().end(),
                        ref.request) == device.request_names().end()) {
            continue;
          }
          for (const std::string& id : device.cdi_device_ids()) {
            if (std::find(ids.begin(), ids.end(), id) == ids.end()) ids.push_back(id);
          }
        }
      }
    }
  }
  return ids;
}

// CreateContainers plays RunPodSandbox and CreateContainer for one pod and prints what each
// container got. Like containerd, the runtime applies the CDI devices the kubelet passes for a
// container (their environment, with devlet's markers) before NRI's CreateContainer. The pod's addresses are what a CNI would have given the `ordinal`-th pod of
// the node (10.244.0.10+n, fd00:10:244::a+n): RunPodSandbox carries them, as after CNI.
void CreateContainers(const Flags& flags, nri::RuntimeSession& session, PodRun& run, int ordinal) {
  const kube::Pod& pod = run.pod;
  // The UID's tail: the demo's pods share a UID prefix.
  run.sandbox.set_id("sandbox-" + pod.metadata.uid.substr(pod.metadata.uid.size() > 12
                                                              ? pod.metadata.uid.size() - 12
                                                              : 0));
  run.sandbox.set_name(pod.metadata.name);
  run.sandbox.set_uid(pod.metadata.uid);
  run.sandbox.set_namespace_(pod.metadata.namespace_);
  char ipv6[64];
  std::snprintf(ipv6, sizeof(ipv6), "fd00:10:244::%x", 10 + ordinal);
  run.sandbox.add_ips("10.244.0." + std::to_string(10 + ordinal));
  run.sandbox.add_ips(ipv6);
  run.report["podIPs"] = {run.sandbox.ips(0), run.sandbox.ips(1)};
  Step("runtime: RunPodSandbox " + pod.metadata.namespace_ + "/" + pod.metadata.name +
       " (pod IPs " + run.sandbox.ips(0) + ", " + run.sandbox.ips(1) + " from the network setup)");
  nri::api::RunPodSandboxRequest run_request;
  *run_request.mutable_pod() = run.sandbox;
  if (auto r = session.Call<nri::api::RunPodSandboxResponse>("RunPodSandbox", run_request); !r.ok()) {
    Fail("RunPodSandbox: " + devlet::Message(r.status()));
  } else {
    Ok("RunPodSandbox " + run.sandbox.id());
  }
  devlet::cdi::Registry registry = devlet::cdi::Registry::Load({flags.cdi_root});
  ordered_json containers = ordered_json::object();
  int index = 0;
  std::vector<kube::Container> specs = pod.spec.init_containers;
  specs.insert(specs.end(), pod.spec.containers.begin(), pod.spec.containers.end());
  for (const kube::Container& spec : specs) {
    Step("runtime: CreateContainer " + pod.metadata.namespace_ + "/" + pod.metadata.name + "/" +
         spec.name);
    nri::api::Container container;
    const std::vector<std::string> kubelet_cdi = CdiDevicesOf(run, spec);
    if (kubelet_cdi.empty()) {
      Ok("the kubelet passes no CDI device (the container names no claim)");
    } else {
      absl::StatusOr<devlet::cdi::ContainerEdits> applied = registry.Resolve(kubelet_cdi);
      if (!applied.ok()) {
        Fail("the kubelet's CDI devices do not resolve in " + flags.cdi_root + ": " +
             devlet::Message(applied.status()));
        continue;
      }
      for (const std::string& env : applied->env) container.add_env(env);
      Ok("the kubelet passes " + std::to_string(kubelet_cdi.size()) +
         " CDI devices; the runtime applied their environment (" +
         std::to_string(applied->env.size()) + " entries, devlet's claim markers among them)");
    }
    container.set_id("ctr-" + run.sandbox.id().substr(8) + "-" + std::to_string(index++) + "-" +
                     spec.name);
    container.set_pod_sandbox_id(run.sandbox.id());
    container.set_name(spec.name);
    container.mutable_linux()->mutable_resources()->mutable_cpu()->set_cpus("0-31");
    nri::api::CreateContainerRequest create;
    *create.mutable_pod() = run.sandbox;
    *create.mutable_container() = container;
    absl::StatusOr<nri::api::CreateContainerResponse> reply =
        session.Call<nri::api::CreateContainerResponse>("CreateContainer", create);
    if (!reply.ok()) {
      Fail("CreateContainer " + spec.name + ": " + devlet::Message(reply.status()));
      continue;
    }
    run.created.push_back(container);
    const nri::api::ContainerAdjustment& adjust = reply->adjust();
    ordered_json c = ordered_json::object();
    c["adjustment"] = ordered_json::parse(ProtoJson(adjust));
    std::vector<std::string> names;
    for (const auto& d : adjust.cdi_devices()) names.push_back(d.name());
    for (const auto& d : adjust.linux().devices()) Ok("device node " + d.path());
    ordered_json metadata = ordered_json::object();
    for (const auto& m : adjust.mounts()) {
      Ok("mount " + m.source() + " -> " + m.destination());
      if (m.destination().ends_with("-metadata.json")) {
        metadata[m.destination()] = MetadataJson(m.source());
      }
    }
    for (const auto& e : adjust.env()) Ok("env " + e.key() + "=" + e.value());
    for (const std::string& name : names) Ok("CDI device " + name);
    const auto& cpu = adjust.linux().resources().cpu();
    c["cpus"] = cpu.cpus();
    c["mems"] = cpu.mems();
    if (!cpu.cpus().empty()) {
      Ok("cpuset.cpus " + cpu.cpus() + "  cpuset.mems " + cpu.mems() +
         "  (NUMA-aligned with the devices)");
    }
    if (cpu.has_quota()) {
      c["cpuQuota"] = cpu.quota().value();
      c["cpuPeriod"] = cpu.has_period() ? cpu.period().value() : 0;
      Ok("cpu quota " + std::to_string(cpu.quota().value()) + " per period " +
         std::to_string(cpu.has_period() ? cpu.period().value() : 0) + "  (DRA-allocated CPUs)");
    }
    if (adjust.linux().resources().has_memory() && adjust.linux().resources().memory().has_limit()) {
      c["memoryLimit"] = adjust.linux().resources().memory().limit().value();
      Ok("memory limit " + std::to_string(adjust.linux().resources().memory().limit().value()) +
         " bytes  (DRA-allocated memory)");
    }
    if (!names.empty()) {
      absl::StatusOr<devlet::cdi::ContainerEdits> edits = registry.Resolve(names);
      if (!edits.ok()) {
        Fail("the CDI devices do not resolve in " + flags.cdi_root + ": " +
             devlet::Message(edits.status()));
      } else {
        c["cdiEdits"] = EditsJson(*edits);
        for (const auto& m : edits->mounts) {
          if (m.container_path.ends_with("-metadata.json")) {
            metadata[m.container_path] = MetadataJson(m.host_path);
          }
        }
        std::cout << "    the runtime injects (CDI): " << c["cdiEdits"].dump() << "\n";
      }
    }
    if (!metadata.empty()) {
      c["metadata"] = metadata;
      for (const auto& [where, content] : metadata.items()) {
        std::cout << "    device metadata " << where << ": " << content.dump() << "\n";
      }
    }
    containers[spec.name] = c;
  }
  run.report["containers"] = containers;
  bool any_devices = false;
  for (const auto& [name, c] : containers.items()) {
    if (c["adjustment"].contains("CDI_devices") || c.contains("cdiEdits") ||
        (c["adjustment"].contains("linux") && c["adjustment"]["linux"].contains("devices"))) {
      any_devices = true;
    }
  }
  if (!run.claims.empty() && !any_devices) Fail("no container of the pod got devices");
}

// RemovePod plays StopContainer/RemoveContainer/StopPodSandbox/RemovePodSandbox.
void RemovePod(nri::RuntimeSession& session, PodRun& run) {
  for (const nri::api::Container& container : run.created) {
    nri::api::StopContainerRequest stop;
    *stop.mutable_pod() = run.sandbox;
    *stop.mutable_container() = container;
    if (auto r = session.Call<nri::api::StopContainerResponse>("StopContainer", stop); !r.ok()) {
      Fail("StopContainer: " + devlet::Message(r.status()));
    }
    nri::api::RemoveContainerRequest remove;
    *remove.mutable_pod() = run.sandbox;
    *remove.mutable_container() = container;
    if (auto r = session.Call<nri::api::RemoveContainerResponse>("RemoveContainer", remove);
        !r.ok()) {
      Fail("RemoveContainer: " + devlet::Message(r.status()));
    }
  }
  nri::api::StopPodSandboxRequest stop_pod;
  *stop_pod.mutable_pod() = run.sandbox;
  if (auto r = session.Call<nri::api::StopPodSandboxResponse>("StopPodSandbox", stop_pod); !r.ok()) {
    Fail("StopPodSandbox: " + devlet::Message(r.status()));
  }
  nri::api::RemovePodSandboxRequest remove_pod;
  *remove_pod.mutable_pod() = run.sandbox;
  if (auto r = session.Call<nri::api::RemovePodSandboxResponse>("RemovePodSandbox", remove_pod);
      !r.ok()) {
    Fail("RemovePodSandbox: " + devlet::Message(r.status()));
  }
  Ok("pod " + run.pod.metadata.namespace_ + "/" + run.pod.metadata.name +
     ": containers and sandbox stopped and removed");
}

int Run(const Flags& flags) {
  using namespace std::chrono_literals;
  const auto timeout = std::chrono::seconds(flags.timeout_seconds);
  ordered_json report = ordered_json::object();
  absl::StatusOr<std::unique_ptr<kube::ManifestStore>> store =
      kube::ManifestStore::Open({.dir = flags.manifests});
  if (!store.ok()) {
    std::cerr << devlet::Message(store.status()) << "\n";
    return 1;
  }
  std::vector<PodRun> runs;
  for (const std::string& ref : flags.pods) {
    absl::StatusOr<kube::Pod> pod = GetPod(**store, ref);
    if (!pod.ok()) {
      std::cerr << "run: " << devlet::Message(pod.status()) << "\n";
      return 1;
    }
    runs.push_back({.pod = *std::move(pod)});
  }

  // The runtime listens first: devlet-node connects once the kubelet registered it.
  absl::StatusOr<nri::UniqueFd> listener = nri::ListenUnix(flags.nri_socket);
  if (!listener.ok()) {
    std::cerr << "run: " << devlet::Message(listener.status()) << "\n";
    return 1;
  }

  // ---- kubelet: registration ----
  Step("kubelet: plugin registration");
  const std::string reg_socket = flags.registrar_dir + "/" + flags.driver + "-reg.sock";
  for (int i = 0; i < flags.timeout_seconds * 10 && !fs::exists(reg_socket); ++i) {
    std::this_thread::sleep_for(100ms);
  }
  auto reg_channel = grpc::CreateChannel("unix://" + reg_socket, grpc::InsecureChannelCredentials());
  auto registration = pluginregistration::Registration::NewStub(reg_channel);
  pluginregistration::PluginInfo info;
  {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + timeout);
    grpc::Status status = registration->GetInfo(&context, pluginregistration::InfoRequest(), &info);
    if (!status.ok()) {
      Fail("GetInfo on " + reg_socket + ": " + status.error_message());
      return 1;
    }
  }
  Ok("GetInfo: type=" + info.type() + " name=" + info.name() + " endpoint=" + info.endpoint());
  std::string versions;
  for (const std::string& v : info.supported_versions()) versions += (versions.empty() ? "" : ",") + v;
  Ok("supported versions: " + versions);
  report["registration"] = {{"type", info.type()}, {"name", info.name()},
                            {"endpoint", info.endpoint()}, {"versions", versions}};
  if (info.type() != "DRAPlugin" || info.name() != flags.driver) Fail("unexpected PluginInfo");
  {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + timeout);
    pluginregistration::RegistrationStatus notify;
    notify.set_plugin_registered(true);
    pluginregistration::RegistrationStatusResponse response;
    grpc::Status status = registration->NotifyRegistrationStatus(&context, notify, &response);
    if (!status.ok()) Fail("NotifyRegistrationStatus: " + status.error_message());
    else Ok("NotifyRegistrationStatus(registered=true)");
  }

  // ---- kubelet: prepare every pod's claims ----
  auto dra_channel =
      grpc::CreateChannel("unix://" + info.endpoint(), grpc::InsecureChannelCredentials());
  auto dra_stub = dra::DRAPlugin::NewStub(dra_channel);
  for (PodRun& run : runs) {
    if (!PrepareClaims(flags, **store, *dra_stub, run)) return 1;
  }
  std::vector<std::string> cdi_files = CdiFiles(flags.cdi_root);
  report["cdiSpecs"] = cdi_files;
  for (const std::string& file : cdi_files) Ok("CDI spec written: " + flags.cdi_root + "/" + file);
  if (cdi_files.empty()) Fail("no CDI spec in " + flags.cdi_root);

  // ---- runtime: NRI ----
  Step("runtime: NRI plugin connects to " + flags.nri_socket);
  absl::StatusOr<std::unique_ptr<nri::RuntimeSession>> session =
      nri::RuntimeSession::Accept(listener->get(), timeout);
  if (!session.ok()) {
    Fail("no NRI plugin connected: " + devlet::Message(session.status()));
    return 1;
  }
  Ok("RegisterPlugin: " + (*session)->plugin_index() + "-" + (*session)->plugin_name());
  nri::RuntimeConfig config;
  config.runtime_name = "devlet-demo-runtime";
  absl::StatusOr<uint32_t> events = (*session)->Configure(config);
  if (!events.ok()) {
    Fail("Configure: " + devlet::Message(events.status()));
    return 1;
  }
  Ok("Configure: event mask 0x" + [&] {
    char buf[16];
    std::snprintf(buf, sizeof(buf), "%x", *events);
    return std::string(buf);
  }());
  if (auto sync = (*session)->Synchronize({}, {}); !sync.ok()) {
    Fail("Synchronize: " + devlet::Message(sync.status()));
  } else {
    Ok("Synchronize (no pods yet)");
  }
  int ordinal = 0;
  for (PodRun& run : runs) CreateContainers(flags, **session, run, ordinal++);

  Step("runtime: stop and remove the pods");
  for (PodRun& run : runs) RemovePod(**session, run);

  Step("kubelet: NodeUnprepareResources");
  for (PodRun& run : runs) {
    dra::NodeUnprepareResourcesRequest unprepare;
    for (const kube::ResourceClaim& claim : run.claims) {
      dra::Claim* c = unprepare.add_claims();
      c->set_namespace_(claim.metadata.namespace_);
      c->set_name(claim.metadata.name);
      c->set_uid(claim.metadata.uid);
    }
    dra::NodeUnprepareResourcesResponse unprepared;
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + timeout);
    grpc::Status status = dra_stub->NodeUnprepareResources(&context, unprepare, &unprepared);
    if (!status.ok()) {
      Fail("NodeUnprepareResources: " + status.error_message());
      continue;
    }
    for (const auto& [uid, result] : unprepared.claims()) {
      if (result.error().empty()) Ok("claim " + uid + " unprepared");
      else Fail("claim " + uid + ": " + result.error());
    }
  }
  std::vector<std::string> left = CdiFiles(flags.cdi_root);  // only what devlet-node wrote
  report["cdiSpecsAfterUnprepare"] = left;
  if (left.empty()) Ok("every CDI spec of the claims was removed");
  else Fail("CDI specs left behind: " + ordered_json(left).dump());
  (*session)->connection().Close();

  ordered_json pods = ordered_json::object();
  for (PodRun& run : runs) {
    pods[run.pod.metadata.namespace_ + "/" + run.pod.metadata.name] = run.report;
  }
  report["pods"] = pods;
  report["failures"] = failures;
  if (!flags.report.empty()) std::ofstream(flags.report) << report.dump(2) << "\n";
  return failures == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"devlet-node-demo: the kubelet and the container runtime around devlet-node"};
  app.require_subcommand(1);
  Flags flags;
  CLI::App* bind = app.add_subcommand("bind", "reserve allocated claims for a pod (scheduler)");
  bind->add_option("--manifests", flags.manifests, "manifest directory")->required();
  bind->add_option("--allocated", flags.allocated, "devlet-alloc output")->required();
  bind->add_option("--pod", flags.pod, "NAMESPACE/NAME of the pod")->required();
  CLI::App* run = app.add_subcommand("run", "play the kubelet and the runtime for one pod");
  run->add_option("--manifests", flags.manifests, "manifest directory")->required();
  run->add_option("--pod", flags.pods, "NAMESPACE/NAME of a pod (repeatable)")->required();
  run->add_option("--registrar-dir", flags.registrar_dir, "kubelet plugin registry")->required();
  run->add_option("--driver", flags.driver, "DRA driver name");
  run->add_option("--nri-socket", flags.nri_socket, "NRI socket to listen on")->required();
  run->add_option("--cdi-root", flags.cdi_root, "CDI spec directory")->required();
  run->add_option("--report", flags.report, "write a JSON report here");
  run->add_option("--timeout-seconds", flags.timeout_seconds, "per-step timeout");
  CLI::App* slices = app.add_subcommand("slices", "print the node's published ResourceSlices");
  slices->add_option("--manifests", flags.manifests, "manifest directory")->required();
  slices->add_option("--driver", flags.driver, "DRA driver name");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  if (*bind) return Bind(flags);
  if (*slices) return Slices(flags);
  return Run(flags);
}
