// The extender verbs: filter, prioritize, bind.
#include "devlet/extender/extender.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <set>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "devlet/allocator/extended_resources.h"
#include "devlet/common/status.h"
#include "nlohmann/json.hpp"

namespace devlet::extender {
namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

// Field finds a Go-named field; Go's decoder matches names case-insensitively.
const json* Field(const json& object, std::string_view name) {
  if (!object.is_object()) return nullptr;
  auto it = object.find(std::string(name));
  if (it != object.end()) return &*it;
  for (auto i = object.begin(); i != object.end(); ++i) {
    const std::string& key = i.key();
    if (key.size() == name.size() &&
        std::equal(key.begin(), key.end(), name.begin(), [](char a, char b) {
          return std::tolower(static_cast<unsigned char>(a)) ==
                 std::tolower(static_cast<unsigned char>(b));
        })) {
      return &*i;
    }
  }
  return nullptr;
}

// kMaxBodyDepth bounds the nesting of request bodies. nlohmann's parser is iterative, but dumping
// a value (the pod, for the kube decoder) recurses once per level: a body of a few MiB of '['
// would overflow the server thread's stack. Real ExtenderArgs nest about 15 deep.
constexpr int kMaxBodyDepth = 100;

// NestedTooDeep scans the body's brackets outside strings.
bool NestedTooDeep(std::string_view body) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < body.size(); ++i) {
    const char c = body[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxBodyDepth) return true;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return false;
}

absl::StatusOr<json> ParseBody(std::string_view body) {
  if (NestedTooDeep(body)) {
    return InvalidArgument("request body is nested deeper than " + std::to_string(kMaxBodyDepth) +
                           " levels");
  }
  json parsed = json::parse(body.begin(), body.end(), nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded()) return InvalidArgument("request body is not valid JSON");
  if (!parsed.is_object()) return InvalidArgument("request body is not a JSON object");
  return parsed;
}

template <typename T>
absl::StatusOr<T> DecodeTyped(json value, std::string_view api_version, std::string_view kind,
                              std::string_view what) {
  if (!value.is_object()) return InvalidArgument(std::string(what) + ": not a JSON object");
  // The scheduler's objects come from informers: TypeMeta is usually empty.
  if (!value.contains("apiVersion")) value["apiVersion"] = api_version;
  if (!value.contains("kind")) value["kind"] = kind;
  auto decoded = kube::DecodeOne<T>(value.dump(), {.source = std::string(what)});
  if (!decoded.ok()) return WithContext(decoded.status(), what);
  return decoded;
}

std::string Key(std::string_view ns, std::string_view name) {
  return std::string(ns) + "/" + std::string(name);
}

// Request is a parsed ExtenderArgs.
struct Request {
  kube::Pod pod;
  bool node_names = false;                  // NodeNames given (nodeCacheCapable)
  std::vector<std::string> names;           // candidate node names, in order
  std::map<std::string, json> node_json;    // name -> Node JSON (Nodes form)
  std::map<std::string, kube::Node> nodes;  // name -> decoded Node (Nodes form)
};

// ImpliedNode makes a Node (name + hostname label) for a node that ResourceSlices name by
// spec.nodeName but that has no Node object (standalone --manifests use). Lock held.
std::optional<kube::Node> ImpliedNode(const ClusterState& state, const std::string& name) {
  if (state.slices_on_node_locked(name).empty()) return std::nullopt;
  kube::Node node;
  node.metadata.name = name;
  node.metadata.labels["kubernetes.io/hostname"] = name;
  return node;
}

// AddImpliedNodes fills request.nodes for candidates known only from ResourceSlices (lock held).
void AddImpliedNodes(const ClusterState& state, Request& request) {
  for (const auto& name : request.names) {
    if (request.nodes.count(name) != 0 || state.nodes_locked().count(name) != 0) continue;
    if (auto node = ImpliedNode(state, name)) request.nodes[name] = std::move(*node);
  }
}

absl::StatusOr<Request> ParseArgs(std::string_view body) {
  DEVLET_ASSIGN_OR_RETURN(json args, ParseBody(body));
  Request request;
  const json* pod = Field(args, "Pod");
  if (pod == nullptr || pod->is_null()) return InvalidArgument("ExtenderArgs: Pod is missing");
  DEVLET_ASSIGN_OR_RETURN(request.pod,
                          DecodeTyped<kube::Pod>(*pod, "v1", "Pod", "ExtenderArgs.Pod"));
  const json* names = Field(args, "NodeNames");
  const json* nodes = Field(args, "Nodes");
  if (names != nullptr && !names->is_null()) {
    if (!names->is_array()) return InvalidArgument("ExtenderArgs.NodeNames: not an array");
    request.node_names = true;
    for (const json& name : *names) {
      if (!name.is_string()) return InvalidArgument("ExtenderArgs.NodeNames: not a string");
      request.names.push_back(name.get<std::string>());
    }
  } else if (nodes != nullptr && !nodes->is_null()) {
    const json* items = Field(*nodes, "items");
    if (items == nullptr || !items->is_array()) {
      return InvalidArgument("ExtenderArgs.Nodes.items: not an array");
    }
    for (size_t i = 0; i < items->size(); ++i) {
      DEVLET_ASSIGN_OR_RETURN(
          kube::Node node,
          DecodeTyped<kube::Node>((*items)[i], "v1", "Node",
                                  "ExtenderArgs.Nodes.items[" + std::to_string(i) + "]"));
      std::string name = node.metadata.name;
      request.names.push_back(name);
      request.node_json[name] = (*items)[i];
      request.nodes[name] = std::move(node);
    }
  } else {
    return InvalidArgument("ExtenderArgs: neither NodeNames nor Nodes is set");
  }
  return request;
}

// PodClaims are a pod's claims as the scheduler resolves them.
struct PodClaims {
  std::vector<kube::ResourceClaim> allocated;  // already allocated (node restriction applies)
  std::vector<kube::ResourceClaim> pending;    // to allocate
  std::optional<size_t> synthesized;           // index in `pending` of the extended-resource claim
  std::set<std::string> extended_resources;    // the resources the synthesized claim covers
  // Which container's resource each request of the synthesized claim serves.
  std::vector<kube::ContainerExtendedResourceRequest> extended_mappings;
  std::string unresolvable;                    // non-empty: cannot schedule until this changes
};

// Resolve needs the state's shared (or exclusive) lock held. `node`: see the synthesized claim.
absl::StatusOr<PodClaims> Resolve(const ClusterState& state, const kube::Pod& pod,
                                  const kube::Node* node = nullptr) {
  PodClaims out;
  const std::string pod_key = Key(pod.metadata.namespace_, pod.metadata.name);
  for (const kube::PodResourceClaim& entry : pod.spec.resource_claims) {
    std::optional<std::string> claim_name = entry.resource_claim_name;
    if (!claim_name) {
      if (!entry.resource_claim_template_name) {
        return InvalidArgument("Pod \"" + pod_key + "\": spec.resourceClaims[" + entry.name +
                               "] names neither a claim nor a template");
      }
      bool found = false;
      for (const auto& status : pod.status.resource_claim_statuses) {
        if (status.name != entry.name) continue;
        found = true;
        claim_name = status.resource_claim_name;
      }
      if (!found) {
        out.unresolvable = "waiting for resource claim creation: pod \"" + pod_key +
                           "\" claim \"" + entry.name + "\" from template \"" +
                           *entry.resource_claim_template_name + "\"";
        return out;
      }
      if (!claim_name) continue;  // the template generated no claim: not needed
    }
    const kube::ResourceClaim* claim =
        state.FindClaimLocked(pod.metadata.namespace_, *claim_name);
    if (claim == nullptr) {
      out.unresolvable = "resourceclaim \"" + pod.metadata.namespace_ + "/" + *claim_name +
                         "\" not found (pod \"" + pod_key + "\")";
      return out;
    }
    if (claim->metadata.deletion_timestamp) {
      out.unresolvable = "resourceclaim \"" + *claim_name + "\" is being deleted";
      return out;
    }
    if (claim->status.allocation) {
      out.allocated.push_back(*claim);
    } else {
      out.pending.push_back(*claim);
    }
  }
  // Extended resources backed by DeviceClasses (DRAExtendedResource): one synthesized claim.
  if (pod.status.extended_resource_claim_status) {
    const std::string& name = pod.status.extended_resource_claim_status->resource_claim_name;
    if (const kube::ResourceClaim* claim = state.FindClaimLocked(pod.metadata.namespace_, name)) {
      (claim->status.allocation ? out.allocated : out.pending).push_back(*claim);
    }
    return out;
  }
  // The claim is the one the scheduler would synthesize (allocator/extended_resources.h): per
  // node, resources a node serves through a device plugin (status.allocatable) stay out of it,
  // which `node` decides when given; without it, no node serves any (see ClaimsForNode).
  DEVLET_ASSIGN_OR_RETURN(
      std::optional<allocator::ExtendedResourceClaim> special,
      allocator::SynthesizeExtendedResourceClaim(
          state.features(), pod, state.extended_resource_classes_locked(), node));
  if (special) {
    for (const auto& mapping : special->mappings) {
      out.extended_resources.insert(mapping.resource_name);
    }
    out.synthesized = out.pending.size();
    out.extended_mappings = std::move(special->mappings);
    // Owned by the pod, as the scheduler's own: the garbage collector deletes it with the pod.
    if (!pod.metadata.uid.empty()) {
      kube::OwnerReference owner;
      owner.api_version = "v1";
      owner.kind = "Pod";
      owner.name = pod.metadata.name;
      owner.uid = pod.metadata.uid;
      owner.controller = true;
      owner.block_owner_deletion = true;
      special->claim.metadata.owner_references.push_back(std::move(owner));
    }
    out.pending.push_back(std::move(special->claim));
  }
  return out;
}

// NodeFitsAllocated checks the node restriction of already allocated claims.
std::string AllocatedMismatch(const PodClaims& claims, const kube::Node& node) {
  for (const auto& claim : claims.allocated) {
    const auto& selector = claim.status.allocation->node_selector;
    if (selector && !kube::MatchesNode(*selector, node)) {
      return "resourceclaim \"" + claim.metadata.name +
             "\" is allocated to devices not available on node \"" + node.metadata.name + "\"";
    }
  }
  return "";
}

std::vector<const kube::ResourceClaim*> Pointers(const std::vector<kube::ResourceClaim>& claims) {
  std::vector<const kube::ResourceClaim*> out;
  for (const auto& c : claims) out.push_back(&c);
  return out;
}

// NodeClaims are the claims to allocate on one node when they differ from the pod's.
struct NodeClaims {
  std::vector<const kube::ResourceClaim*> list;
  std::optional<kube::ResourceClaim> special;
};

// DevicePluginServes reports whether `node` serves one of the synthesized claim's extended
// resources through a device plugin (status.allocatable): then the claim differs there. Lock held.
bool DevicePluginServes(const ClusterState& state, const Request& request,
                        const PodClaims& claims, const kube::Node& node) {
  if (!claims.synthesized) return false;
  std::set<std::string> from_request;
  const std::set<std::string>* served = nullptr;
  if (request.nodes.count(node.metadata.name) != 0) {
    from_request = allocator::NodeAllocatableResources(node);
    served = &from_request;
  } else {
    served = state.node_allocatable_locked(node.metadata.name);
  }
  if (served == nullptr) return false;
  for (const std::string& resource : claims.extended_resources) {
    if (served->count(resource) != 0) return true;
  }
  return false;
}

// ClaimsForNode returns the claims to allocate on `node`: `pending` (Pointers(claims.pending)),
// unless DevicePluginServes; then the claim is synthesized for that node into `local`. Lock held.
absl::StatusOr<const std::vector<const kube::ResourceClaim*>*> ClaimsForNode(
    const ClusterState& state, const Request& request, const PodClaims& claims,
    const std::vector<const kube::ResourceClaim*>& pending, const kube::Node& node,
    NodeClaims& local) {
  if (!DevicePluginServes(state, request, claims, node)) return &pending;
  DEVLET_ASSIGN_OR_RETURN(std::optional<allocator::ExtendedResourceClaim> special,
                          allocator::SynthesizeExtendedResourceClaim(
                              state.features(), request.pod,
                              state.extended_resource_classes_locked(), &node));
  for (size_t i = 0; i < pending.size(); ++i) {
    if (i != *claims.synthesized) local.list.push_back(pending[i]);
  }
  if (special) {
    local.special = std::move(special->claim);
    local.list.push_back(&*local.special);
  }
  return &local.list;
}

// WorkerPool is a process-wide set of helper threads for ParallelFor. Starting threads per request
// cost more than the work on small clusters (thread creation, fresh stacks and malloc arenas
// faulted in on every request).
class WorkerPool {
 public:
  static WorkerPool& Get() {
    static WorkerPool* pool = new WorkerPool(std::max(1u, std::thread::hardware_concurrency()));
    return *pool;
  }
  size_t size() const { return threads_.size(); }
  void Submit(std::function<void()> task) {
    {
      std::lock_guard lock(mu_);
      tasks_.push_back(std::move(task));
    }
    cv_.notify_one();
  }

 private:
  explicit WorkerPool(unsigned n) {
    for (unsigned i = 0; i < n; ++i) {
      threads_.emplace_back([this] {
        for (;;) {
          std::function<void()> task;
          {
            std::unique_lock lock(mu_);
            cv_.wait(lock, [this] { return !tasks_.empty(); });
            task = std::move(tasks_.front());
            tasks_.pop_front();
          }
          task();
        }
      });
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> tasks_;
  std::vector<std::thread> threads_;  // never joined: the pool lives as long as the process
};

// Below this many items ParallelFor runs on the calling thread alone.
constexpr size_t kMinParallel = 16;

// ParallelFor runs fn(i) for i in [0, n) on the calling thread plus up to `threads`-1 pool
// helpers. The caller works too, so a busy pool only slows a request down, never blocks it.

template <typename Fn>
void ParallelFor(size_t n, int threads, Fn fn) {
  size_t workers = threads > 0 ? static_cast<size_t>(threads) : WorkerPool::Get().size();
  workers = std::min(workers, n);
  // A few allocations (the nodes that changed since the last pod) take less time than waking a
  // helper, which then competes with this thread for a core.
  if (n < kMinParallel) workers = 1;
  if (workers <= 1) {
    for (size_t i = 0; i < n; ++i) fn(i);
    return;
  }
  // Helpers may start after the caller has finished everything: they then find no index left
  // and touch only the shared job, never `fn`.
  struct Job {
    std::atomic<size_t> next{0};
    std::atomic<size_t> done{0};
    size_t n = 0;
    std::function<void(size_t)> fn;
    std::mutex mu;
    std::condition_variable cv;
  };
  auto job = std::make_shared<Job>();
  job->n = n;
  job->fn = [&fn](size_t i) { fn(i); };
  auto run = [](Job& j) {
    for (size_t i = j.next++; i < j.n; i = j.next++) {
      j.fn(i);
      if (++j.done == j.n) {
        std::lock_guard lock(j.mu);
        j.cv.notify_all();
      }
    }
  };
  for (size_t w = 1; w < workers; ++w) WorkerPool::Get().Submit([job, run] { run(*job); });
  run(*job);
  std::unique_lock lock(job->mu);
  job->cv.wait(lock, [&] { return job->done.load() == n; });
}

// AppendJsonString appends `text` as a JSON string. Node names need no escaping (DNS subdomains):
// they are copied as they are; anything else goes through the JSON library.
void AppendJsonString(std::string& out, const std::string& text) {
  const bool plain = std::all_of(text.begin(), text.end(), [](char c) {
    return c >= 0x20 && c < 0x7f && c != '"' && c != '\\';
  });
  if (!plain) {
    out += json(text).dump();
    return;
  }
  out += '"';
  out += text;
  out += '"';
}

json FilterReply(const Request& request, const std::vector<std::string>& passed,
                 const std::map<std::string, std::string>& failed,
                 const std::map<std::string, std::string>& unresolvable, const std::string& error) {
  json reply = {{"Nodes", nullptr},
                {"NodeNames", nullptr},
                {"FailedNodes", json::object()},
                {"FailedAndUnresolvableNodes", json::object()},
                {"Error", error}};
  if (request.node_names) {
    reply["NodeNames"] = passed;
  } else {
    json items = json::array();
    for (const auto& name : passed) items.push_back(request.node_json.at(name));
    reply["Nodes"] = {{"metadata", json::object()}, {"items", items}};
  }
  for (const auto& [k, v] : failed) reply["FailedNodes"][k] = v;
  for (const auto& [k, v] : unresolvable) reply["FailedAndUnresolvableNodes"][k] = v;
  return reply;
}

// FilterReplyText is FilterReply's text; the NodeNames form (every request of a
// nodeCacheCapable extender) is written directly: a JSON value per node name cost more than
// answering for the node from kept outcomes.
std::string FilterReplyText(const Request& request, const std::vector<std::string>& passed,
                            const std::map<std::string, std::string>& failed,
                            const std::map<std::string, std::string>& unresolvable) {
  if (!request.node_names) return FilterReply(request, passed, failed, unresolvable, "").dump();
  std::string out;
  out.reserve(passed.size() * 16 + failed.size() * 64 + 128);
  auto map = [&out](const std::map<std::string, std::string>& m) {
    out += '{';
    bool first = true;
    for (const auto& [k, v] : m) {
      if (!first) out += ',';
      first = false;
      AppendJsonString(out, k);
      out += ':';
      AppendJsonString(out, v);
    }
    out += '}';
  };
  out += "{\"Error\":\"\",\"FailedAndUnresolvableNodes\":";
  map(unresolvable);
  out += ",\"FailedNodes\":";
  map(failed);
  out += ",\"NodeNames\":[";
  for (size_t i = 0; i < passed.size(); ++i) {
    if (i > 0) out += ',';
    AppendJsonString(out, passed[i]);
  }
  out += "],\"Nodes\":null}";
  return out;
}

std::string ErrorFilterReply(const std::string& error) {
  return json({{"Nodes", nullptr},
               {"NodeNames", nullptr},
               {"FailedNodes", json::object()},
               {"FailedAndUnresolvableNodes", json::object()},
               {"Error", error}})
      .dump();
}

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

std::string AttrText(const kube::DeviceAttribute& a) {
  if (a.int_value) return std::to_string(*a.int_value);
  if (a.string_value) return *a.string_value;
  return "";
}

// Budget applies the per-request timeout (DRASchedulerFilterTimeout, upstream's filterTimeout)
// to an allocation's options: every verb's search stops at `start + timeout` when the gate is on.
void Budget(const ClusterState& state, const Options& options, Clock::time_point start,
            allocator::AllocateOptions& allocate_options) {
  if (!state.features().scheduler_filter_timeout || options.filter_timeout.count() <= 0) return;
  allocate_options.deadline = start + options.filter_timeout;
  allocate_options.timeout = options.filter_timeout;
}

const allocator::AllocatedState& EmptyState() {
  static const allocator::AllocatedState* empty = new allocator::AllocatedState();
  return *empty;
}

// ---- Per-node results, reused while the node's state is unchanged ----------------------------
//
// The scheduler asks about every node for every pod, and most nodes do not change between two
// pods: one bind changes one node. Pods of one workload ask for the same claims. So an outcome is
// kept per (claims' specs, allocated state, node) with the node's ClusterState::NodeVersion, and
// reused while the version is unchanged: filter, and prioritize after it, then allocate only on
// nodes whose devices, pools, allocations or Node object changed (or that were never asked
// about for this shape). The specs decide the outcome (claim names only appear in errors, which
// are not kept), so two pods of one Deployment share entries. Bind never uses them: it allocates
// afresh under the exclusive lock.

// CachedNode is what one node's allocation came to.
struct CachedNode {
  ClusterState::NodeVersion version;
  bool fits = false;
  std::string reason;  // why not, for FailedNodes
  std::shared_ptr<const std::vector<kube::AllocationResult>> results;  // when it fits
  std::optional<int64_t> score;  // prioritize's, once computed (current state only)
  // The node's devices and those in use (AllocateOptions::count_node_devices), for the score.
  int devices = 0;
  int in_use = 0;
};

// ShapeCache holds the nodes' outcomes for one shape. A request looks all its nodes up under one
// lock, allocates on the others in parallel, and stores their outcomes under one lock.
struct ShapeCache {
  std::mutex mu;
  std::unordered_map<std::string, CachedNode> nodes;
};

// Candidate is one node of a request, as looked up before allocating.
struct Candidate {
  const kube::Node* node = nullptr;
  ClusterState::NodeVersion version;
  bool reusable = false;  // the outcome may be kept (and was looked up)
};

// LookupCandidates finds every candidate's Node and version (one hash lookup each, sequentially:
// cheaper than handing them to threads). Nodes from the request (the Nodes form) or implied by
// slices are never reused: versions track the state's Node objects only. Lock held.
std::vector<Candidate> LookupCandidates(const ClusterState& state, const Request& request,
                                        const PodClaims& claims, bool reuse) {
  std::vector<Candidate> out(request.names.size());
  for (size_t i = 0; i < out.size(); ++i) {
    const std::string& name = request.names[i];
    if (auto it = request.nodes.find(name); it != request.nodes.end()) {
      out[i].node = &it->second;
      continue;
    }
    ClusterState::NodeEntry entry = state.node_entry_locked(name);
    out[i].node = entry.node;
    out[i].version = entry.version;
    out[i].reusable = reuse && entry.node != nullptr &&
                      !DevicePluginServes(state, request, claims, *entry.node);
  }
  return out;
}

// ShapeKey identifies a shape: the state allocated against ('E': empty, score mode's filter;
// 'C': current) and the claims' specs in order.
std::string ShapeKey(const std::vector<const kube::ResourceClaim*>& claims, char state) {
  std::string key(1, state);
  for (const kube::ResourceClaim* claim : claims) {
    kube::ResourceClaim spec_only;
    spec_only.spec = claim->spec;
    key += kube::EncodeJson(spec_only);
    key.push_back('\0');
  }
  return key;
}

}  // namespace

// Cache maps shapes to their per-node outcomes. Bounded: past kMaxShapes it starts over (each
// shape holds one entry per node asked about).
struct Extender::Cache {
  static constexpr size_t kMaxShapes = 32;
  std::mutex mu;
  std::unordered_map<std::string, std::shared_ptr<ShapeCache>> shapes;

  std::shared_ptr<ShapeCache> Get(const std::string& key) {
    std::lock_guard lock(mu);
    auto it = shapes.find(key);
    if (it != shapes.end()) return it->second;
    if (shapes.size() >= kMaxShapes) shapes.clear();
    auto shape = std::make_shared<ShapeCache>();
    shapes.emplace(key, shape);
    return shape;
  }
};

Extender::Extender(ClusterState& state, ClusterWriter& writer, Options options)
    : state_(state), writer_(writer), options_(options), cache_(std::make_unique<Cache>()) {}

Extender::~Extender() = default;

std::string Extender::Filter(std::string_view body) {
  ++counters_.filter_requests;
  const auto start = Clock::now();
  absl::StatusOr<Request> request = ParseArgs(body);
  if (!request.ok()) {
    ++counters_.bad_requests;
    return ErrorFilterReply(Message(request.status()));
  }
  if (options_.mode == Mode::kAllocate) {  // only allocate mode binds, from this copy
    std::lock_guard lock(pods_mu_);
    if (pods_seen_.size() > 10000) pods_seen_.clear();
    pods_seen_[Key(request->pod.metadata.namespace_, request->pod.metadata.name)] = request->pod;
  }
  std::shared_lock lock(state_.mutex());
  AddImpliedNodes(state_, *request);
  absl::StatusOr<PodClaims> claims = Resolve(state_, request->pod);
  if (!claims.ok()) return ErrorFilterReply(Message(claims.status()));
  std::map<std::string, std::string> failed;
  std::map<std::string, std::string> unresolvable;
  if (!claims->unresolvable.empty()) {
    for (const auto& name : request->names) unresolvable[name] = claims->unresolvable;
    return FilterReplyText(*request, {}, {}, unresolvable);
  }
  const size_t n = request->names.size();
  std::vector<std::string> verdict(n);  // empty: passes
  // Not vector<bool>: its elements share words, and the workers write them concurrently.
  std::vector<char> unknown(n, 0);
  std::vector<absl::Status> errors(n);
  const auto pending = Pointers(claims->pending);
  const bool score = options_.mode == Mode::kScore;
  const allocator::AllocatedState& allocated = score ? EmptyState() : state_.allocated_locked();
  const allocator::Snapshot& snapshot = state_.snapshot_locked();
  allocator::AllocateOptions allocate_options;
  Budget(state_, options_, start, allocate_options);
  // Score mode's filter (against the empty state) needs only the verdict; allocate mode's kept
  // outcome also serves prioritize, which scores the chosen devices and the node's use.
  allocate_options.verdict_only = score;
  allocate_options.count_node_devices = !score;
  allocate_options.devices_only = true;  // kept to score, never written (bind allocates afresh)
  std::shared_ptr<ShapeCache> shape;
  if (options_.reuse_results && !pending.empty()) {
    shape = cache_->Get(ShapeKey(pending, score ? 'E' : 'C'));
  }
  const std::vector<Candidate> candidates =
      LookupCandidates(state_, *request, *claims, shape != nullptr);
  std::vector<size_t> todo;  // nodes to allocate on
  {
    std::unique_lock<std::mutex> shape_lock;
    if (shape) shape_lock = std::unique_lock(shape->mu);
    for (size_t i = 0; i < n; ++i) {
      const Candidate& c = candidates[i];
      if (c.node == nullptr) {
        unknown[i] = 1;
        verdict[i] = "node \"" + request->names[i] + "\" is not known to devlet-extender";
        continue;
      }
      if (!claims->allocated.empty()) {
        verdict[i] = AllocatedMismatch(*claims, *c.node);
        if (!verdict[i].empty()) continue;
      }
      if (c.reusable) {
        auto it = shape->nodes.find(request->names[i]);
        if (it != shape->nodes.end() && it->second.version == c.version) {
          if (!it->second.fits) verdict[i] = it->second.reason;
          continue;
        }
      }
      todo.push_back(i);
    }
  }
  std::vector<std::optional<CachedNode>> fresh(todo.size());
  ParallelFor(todo.size(), options_.parallelism, [&](size_t k) {
    const size_t i = todo[k];
    const Candidate& c = candidates[i];
    NodeClaims local;
    auto for_node = ClaimsForNode(state_, *request, *claims, pending, *c.node, local);
    if (!for_node.ok()) {
      errors[i] = for_node.status();
      return;
    }
    if ((*for_node)->empty()) return;
    allocator::AllocateOutcome out =
        allocator::Allocate(snapshot, *c.node, **for_node, allocated, allocate_options);
    switch (out.kind) {
      case allocator::AllocateOutcome::Kind::kAllocated:
        break;
      case allocator::AllocateOutcome::Kind::kUnschedulable:
        verdict[i] = out.reason.empty() ? "cannot allocate all claims" : out.reason;
        break;
      case allocator::AllocateOutcome::Kind::kError:
        // Timeouts too are an Error for the pod, as upstream's Filter returns them ("timeouts
        // are potentially transient": the pod retries with backoff instead of waiting in the
        // unschedulable queue for an event). Score mode: not provable, let the plugin decide.
        if (!score) errors[i] = out.status;
        return;  // errors (timeouts too) are not kept
    }
    if (c.reusable) {
      CachedNode& entry = fresh[k].emplace();
      entry.version = c.version;
      entry.fits = verdict[i].empty();
      entry.reason = verdict[i];
      entry.devices = out.node_devices;
      entry.in_use = out.node_devices_in_use;
      if (entry.fits && !score) {
        entry.results =
            std::make_shared<const std::vector<kube::AllocationResult>>(std::move(out.results));
      }
    }
  });
  if (shape) {
    std::lock_guard shape_lock(shape->mu);
    for (size_t k = 0; k < todo.size(); ++k) {
      if (fresh[k]) shape->nodes.insert_or_assign(request->names[todo[k]], std::move(*fresh[k]));
    }
  }
  counters_.filter_micros_total +=
      std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - start).count();
  for (size_t i = 0; i < n; ++i) {
    if (!errors[i].ok()) return ErrorFilterReply(Message(errors[i]));
  }
  std::vector<std::string> passed;
  for (size_t i = 0; i < n; ++i) {
    if (verdict[i].empty()) {
      passed.push_back(request->names[i]);
    } else if (unknown[i]) {
      unresolvable[request->names[i]] = verdict[i];
    } else {
      failed[request->names[i]] = verdict[i];
    }
  }
  return FilterReplyText(*request, passed, failed, unresolvable);
}

std::string Extender::Prioritize(std::string_view body) {
  ++counters_.prioritize_requests;
  const auto start = Clock::now();
  absl::StatusOr<Request> request = ParseArgs(body);
  if (!request.ok()) {
    ++counters_.bad_requests;
    // Go's extender client reads a HostPriorityList; an error body is a non-200 (see server).
    return "";
  }
  std::shared_lock lock(state_.mutex());
  AddImpliedNodes(state_, *request);
  absl::StatusOr<PodClaims> claims = Resolve(state_, request->pod);
  const size_t n = request->names.size();
  std::vector<int64_t> scores(n, 0);
  if (claims.ok() && claims->unresolvable.empty()) {
    const auto pending = Pointers(claims->pending);
    const allocator::Snapshot& snapshot = state_.snapshot_locked();
    std::shared_ptr<ShapeCache> shape;
    if (options_.reuse_results && !pending.empty()) shape = cache_->Get(ShapeKey(pending, 'C'));
    auto score_of = [&](const CachedNode& entry) -> int64_t {
      const std::vector<kube::AllocationResult>& results = *entry.results;
      // Locality: distinct NUMA nodes (or PCIe roots) among the chosen devices.
      std::set<std::string> numa;
      std::set<std::string> pcie;
      int chosen = 0;
      for (const auto& result : results) {
        for (const auto& r : result.devices.results) {
          ++chosen;
          const kube::Device* d = state_.FindDeviceLocked(r.driver, r.pool, r.device);
          if (d == nullptr) continue;
          for (const auto& [attr, value] : d->attributes) {
            if (EndsWith(attr, "numaNode") || EndsWith(attr, "numa")) numa.insert(AttrText(value));
            if (EndsWith(attr, "pcieRoot")) pcie.insert(AttrText(value));
          }
        }
      }
      double locality = 10.0;
      if (chosen > 1) {
        size_t distinct = static_cast<size_t>(chosen);
        if (!numa.empty()) distinct = std::min(distinct, numa.size());
        if (!pcie.empty()) distinct = std::min(distinct, pcie.size());
        if (numa.empty() && pcie.empty()) distinct = 1;  // no topology known: neutral
        locality = 10.0 / static_cast<double>(distinct);
      }
      // Packing: share of the node's devices in use once these are placed (devices the node
      // can use, counted by the allocator on its view of the node).
      const int total = entry.devices;
      const int used = entry.in_use;
      double packing = 5.0;
      if (total > 0) {
        const double fill = std::min(1.0, static_cast<double>(used + chosen) / total);
        packing = options_.policy == Policy::kBinPack ? 10.0 * fill : 10.0 * (1.0 - fill);
      }
      return std::clamp<int64_t>(std::llround((locality + packing) / 2.0), 0, 10);
    };
    const std::vector<Candidate> candidates =
        LookupCandidates(state_, *request, *claims, shape != nullptr);
    // Nodes to allocate on (no kept outcome) or to score (kept outcome without a score).
    std::vector<size_t> todo;
    std::vector<CachedNode> entries;  // per todo item: the kept outcome, if any
    {
      std::unique_lock<std::mutex> shape_lock;
      if (shape) shape_lock = std::unique_lock(shape->mu);
      for (size_t i = 0; i < n; ++i) {
        const Candidate& c = candidates[i];
        if (c.node == nullptr) continue;
        if (c.reusable) {
          auto it = shape->nodes.find(request->names[i]);
          if (it != shape->nodes.end() && it->second.version == c.version) {
            if (it->second.score) {
              scores[i] = *it->second.score;
              continue;
            }
            if (!it->second.fits) continue;  // 0
            todo.push_back(i);
            entries.push_back(it->second);
            continue;
          }
        }
        todo.push_back(i);
        entries.emplace_back();
      }
    }
    std::vector<char> store(todo.size(), 0);
    ParallelFor(todo.size(), options_.parallelism, [&](size_t k) {
      const size_t i = todo[k];
      const Candidate& c = candidates[i];
      CachedNode& entry = entries[k];
      if (!entry.results) {
        NodeClaims local;
        auto for_node = ClaimsForNode(state_, *request, *claims, pending, *c.node, local);
        if (!for_node.ok()) return;
        if ((*for_node)->empty()) {
          scores[i] = 5;  // nothing to place: neutral
          return;
        }
        allocator::AllocateOptions allocate_options{.count_node_devices = true,
                                                    .devices_only = true};
        Budget(state_, options_, start, allocate_options);
        allocator::AllocateOutcome out = allocator::Allocate(
            snapshot, *c.node, **for_node, state_.allocated_locked(), allocate_options);
        if (out.kind == allocator::AllocateOutcome::Kind::kError) return;  // timeouts too: 0
        entry.version = c.version;
        entry.devices = out.node_devices;
        entry.in_use = out.node_devices_in_use;
        entry.fits = out.kind == allocator::AllocateOutcome::Kind::kAllocated;
        if (entry.fits) {
          entry.results =
              std::make_shared<const std::vector<kube::AllocationResult>>(std::move(out.results));
        } else {
          entry.reason = out.reason.empty() ? "cannot allocate all claims" : out.reason;
        }
      }
      scores[i] = entry.fits ? score_of(entry) : 0;
      entry.score = scores[i];
      store[k] = c.reusable;
    });
    if (shape) {
      std::lock_guard shape_lock(shape->mu);
      for (size_t k = 0; k < todo.size(); ++k) {
        if (store[k]) shape->nodes.insert_or_assign(request->names[todo[k]], std::move(entries[k]));
      }
    }
  }
  // Written directly: a json value per host (an object, two keys, two values) cost more than
  // scoring a node on large clusters.
  std::string out = "[";
  out.reserve(n * 40 + 2);
  for (size_t i = 0; i < n; ++i) {
    if (i > 0) out += ',';
    out += "{\"Host\":";
    AppendJsonString(out, request->names[i]);
    out += ",\"Score\":";
    out += std::to_string(scores[i]);
    out += '}';
  }
  out += ']';
  counters_.prioritize_micros_total +=
      std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - start).count();
  return out;
}

// ---- bind, step by step -------------------------------------------------------------------------

namespace {

// BindArgs is the scheduler's ExtenderBindingArgs.
struct BindArgs {
  std::string ns;
  std::string name;
  std::string uid;
  std::string node;
};

// ParseBindArgs decodes ExtenderBindingArgs; every error is the request's fault.
absl::StatusOr<BindArgs> ParseBindArgs(std::string_view body) {
  absl::StatusOr<json> args = ParseBody(body);
  if (!args.ok()) return args.status();
  auto str = [&](std::string_view name) -> std::string {
    const json* v = Field(*args, name);
    return v != nullptr && v->is_string() ? v->get<std::string>() : "";
  };
  BindArgs out{str("PodNamespace"), str("PodName"), str("PodUID"), str("Node")};
  if (out.name.empty() || out.node.empty()) {
    return InvalidArgument("ExtenderBindingArgs: PodName and Node are required");
  }
  return out;
}

// Reservation is what Reserve holds for a pod on its node: the pod's claims and, for each of
// `claims.pending`, the allocation held in the state.
struct Reservation {
  PodClaims claims;
  std::vector<kube::AllocationResult> results;
  // ClusterState::allocation_sequence_locked() of the state the search saw: claims allocated
  // after it are what a peer check looks at.
  uint64_t allocation_sequence = 0;
};

// Reserve allocates the pod's pending claims on the chosen node, then holds the devices. The
// search runs on a snapshot of the state, under no lock: under the exclusive lock it blocked every
// other pod's filter and prioritize for as long as it took (issue 14 §0.4). The exclusive lock is
// taken only to commit, and only if nothing the allocation depends on changed meanwhile (the
// node's NodeVersion covers its Node, the pools it sees, their allocations and holds, classes and
// taint rules); otherwise the search runs again on the new state.
absl::StatusOr<Reservation> Reserve(ClusterState& state, const Options& options, Counters& counters,
                                    const kube::Pod& pod, const std::string& node_name) {
  const std::string pod_key = Key(pod.metadata.namespace_, pod.metadata.name);
  allocator::AllocateOptions allocate_options;
  Budget(state, options, Clock::now(), allocate_options);
  Reservation out;
  constexpr int kReserveAttempts = 5;
  for (int attempt = 1;; ++attempt) {
    std::optional<kube::Node> node;
    std::shared_ptr<const allocator::Snapshot> snapshot;
    allocator::AllocatedState allocated;
    ClusterState::NodeVersion version;
    {
      std::shared_lock lock(state.mutex());
      auto node_it = state.nodes_locked().find(node_name);
      if (node_it != state.nodes_locked().end()) {
        node = node_it->second;
      } else {
        node = ImpliedNode(state, node_name);
      }
      if (!node) return NotFound("node \"" + node_name + "\" is not known to devlet-extender");
      DEVLET_ASSIGN_OR_RETURN(out.claims, Resolve(state, pod, &*node));
      if (!out.claims.unresolvable.empty()) return FailedPrecondition(out.claims.unresolvable);
      std::string mismatch = AllocatedMismatch(out.claims, *node);
      if (!mismatch.empty()) return FailedPrecondition(mismatch);
      if (out.claims.pending.empty()) return out;
      snapshot = state.snapshot_shared_locked();
      allocated = state.allocated_locked();
      version = state.node_version_locked(node_name);
      out.allocation_sequence = state.allocation_sequence_locked();
    }
    allocator::AllocateOutcome found = allocator::Allocate(
        *snapshot, *node, Pointers(out.claims.pending), allocated, allocate_options);
    if (found.kind == allocator::AllocateOutcome::Kind::kError) return found.status;
    if (found.kind == allocator::AllocateOutcome::Kind::kUnschedulable) {
      return FailedPrecondition("node \"" + node_name +
                                "\": devices no longer available for pod \"" + pod_key +
                                "\": " + found.reason);
    }
    std::unique_lock lock(state.mutex());
    if (!(state.node_version_locked(node_name) == version)) {
      ++counters.bind_reserve_retries;
      if (attempt < kReserveAttempts) continue;
      return Aborted("node \"" + node_name + "\": its devices kept changing while binding pod \"" +
                     pod_key + "\" (" + std::to_string(kReserveAttempts) + " attempts)");
    }
    out.results = std::move(found.results);
    for (size_t i = 0; i < out.results.size(); ++i) {
      absl::Status held = state.HoldLocked(out.claims.pending[i].metadata.uid, out.results[i]);
      if (!held.ok()) {
        for (size_t k = 0; k < i; ++k) state.ReleaseLocked(out.claims.pending[k].metadata.uid);
        return held;
      }
    }
    return out;
  }
}

// Release drops the holds of a reservation (a no-op for claims whose written allocation replaced
// the hold).
void Release(ClusterState& state, const PodClaims& claims) {
  std::unique_lock lock(state.mutex());
  for (const auto& claim : claims.pending) state.ReleaseLocked(claim.metadata.uid);
}

// ClaimWrites writes one bind's claims, remembering which, so that a failure further on can take
// them back.
class ClaimWrites {
 public:
  ClaimWrites(ClusterState& state, ClusterWriter& writer, const Options& options,
              Counters& counters, kube::ResourceClaimConsumerReference consumer)
      : state_(state),
        writer_(writer),
        options_(options),
        counters_(counters),
        consumer_(std::move(consumer)) {}

  // Write sets the claim's status.allocation (when `allocation` is given) and adds the consumer to
  // its reservedFor, with the claim's resourceVersion as precondition; a conflict re-reads the
  // claim and tries again (Options::bind_retries times). Someone else's allocation is Aborted.
  absl::Status Write(kube::ResourceClaim claim,
                     const std::optional<kube::AllocationResult>& allocation) {
    const kube::ResourceClaim before = claim;
    for (int attempt = 0; attempt <= options_.bind_retries; ++attempt) {
      if (allocation) {
        if (claim.status.allocation && !(*claim.status.allocation == *allocation)) {
          return absl::AbortedError("ResourceClaim \"" +
                                    Key(claim.metadata.namespace_, claim.metadata.name) +
                                    "\" was allocated by someone else meanwhile");
        }
        claim.status.allocation = *allocation;
      }
      bool reserved = false;
      for (const auto& r : claim.status.reserved_for) reserved |= r.uid == consumer_.uid;
      if (!reserved) claim.status.reserved_for.push_back(consumer_);
      absl::StatusOr<kube::ResourceClaim> written = writer_.UpdateClaimStatus(claim);
      if (written.ok()) {
        absl::Status applied = state_.Apply(*written);
        if (applied.ok()) {
          written_.push_back({before, allocation.has_value(), !reserved});
          versions_.push_back(written->metadata.resource_version);
        }
        return applied;
      }
      if (written.status().code() != absl::StatusCode::kAborted) return written.status();
      ++counters_.conflicts;
      DEVLET_ASSIGN_OR_RETURN(claim,
                              writer_.GetClaim(claim.metadata.namespace_, claim.metadata.name));
    }
    return absl::AbortedError(
        "ResourceClaim \"" + Key(claim.metadata.namespace_, claim.metadata.name) +
        "\": gave up after " + std::to_string(options_.bind_retries) + " conflicting updates");
  }

  // Undo takes our allocation and reservation back out of every claim written so far (best
  // effort, re-reading on conflict).
  void Undo() {
    for (const auto& [done, allocated_by_us, reserved_by_us] : written_) {
      for (int attempt = 0; attempt <= options_.bind_retries; ++attempt) {
        absl::StatusOr<kube::ResourceClaim> current =
            writer_.GetClaim(done.metadata.namespace_, done.metadata.name);
        if (!current.ok()) break;
        if (allocated_by_us) current->status.allocation.reset();
        // A reservation that was there before us (a retried bind of the same pod) stays, unless
        // the allocation goes (the API server refuses a reservation without one): without it the
        // claim controller would deallocate a claim the bound pod uses.
        if (reserved_by_us || allocated_by_us) {
          std::erase_if(current->status.reserved_for,
                        [&](const auto& r) { return r.uid == consumer_.uid; });
        }
        absl::StatusOr<kube::ResourceClaim> reverted = writer_.UpdateClaimStatus(*current);
        if (reverted.ok()) {
          (void)state_.Apply(*reverted);
          break;
        }
        if (reverted.status().code() != absl::StatusCode::kAborted) break;
      }
    }
    written_.clear();
    versions_.clear();
  }

  // The resourceVersions our writes returned.
  const std::vector<std::string>& versions() const { return versions_; }

  // TakeBack makes Undo also clear the allocation of a claim we only reserved (see CheckPeers),
  // provided no consumer but ours had reserved it.
  void TakeBack(const std::string& uid) {
    for (auto& write : written_) {
      if (write.claim.metadata.uid != uid) continue;
      bool others = false;
      for (const auto& r : write.claim.status.reserved_for) others |= r.uid != consumer_.uid;
      if (!others) write.allocated_by_us = true;
    }
  }

 private:
  ClusterState& state_;
  ClusterWriter& writer_;
  const Options& options_;
  Counters& counters_;
  const kube::ResourceClaimConsumerReference consumer_;
  struct Written {
    kube::ResourceClaim claim;  // as it was before our write
    bool allocated_by_us = false;
    bool reserved_by_us = false;
  };
  std::vector<Written> written_;
  std::vector<std::string> versions_;
};

// CheckPeers is Options::check_peer_allocations: once the claim watch has delivered every claim
// change up to our writes, a claim that uses one of our devices and whose allocation the search
// did not see was written before ours (watch order is etcd order) by another replica: it keeps,
// we back off. Ours, written first, is what a later writer finds when it checks.
// A claim the pod found allocated may hold an allocation nobody checked (its writer died between
// writing and checking): if another claim uses one of its devices, the bind fails, and the
// allocation is taken back when only this pod had reserved the claim; the other claim's pod, if
// equally unchecked, does the same, so at worst both are allocated again, never both kept.
absl::Status CheckPeers(const ClusterState& state, ClusterWriter& writer, const Options& options,
                        Counters& counters, const kube::Pod& pod, const Reservation& reservation,
                        ClaimWrites& writes) {
  if (writes.versions().empty()) return absl::OkStatus();
  const auto start = Clock::now();
  ++counters.peer_checks;
  absl::Status status = absl::OkStatus();
  for (const std::string& version : writes.versions()) {
    if (!state.WaitClaimsObserved(version, start + options.peer_check_timeout)) {
      status = absl::UnavailableError(
          "the ResourceClaim watch did not deliver our allocation (resourceVersion " + version +
          ") within " + std::to_string(options.peer_check_timeout.count()) +
          " ms: cannot rule out another replica's allocation of the same devices");
      break;
    }
  }
  if (status.ok()) {
    std::shared_lock lock(state.mutex());
    for (size_t i = 0; i < reservation.results.size() && status.ok(); ++i) {
      const kube::ResourceClaim& claim = reservation.claims.pending[i];
      std::string conflict = state.PeerConflictLocked(claim.metadata.uid, reservation.results[i],
                                                      reservation.allocation_sequence);
      if (!conflict.empty()) {
        status = absl::AbortedError("ResourceClaim \"" +
                                    Key(claim.metadata.namespace_, claim.metadata.name) + "\": " +
                                    conflict + ", written before ours: backing off");
      }
    }
    for (size_t i = 0; i < reservation.claims.allocated.size() && status.ok(); ++i) {
      const kube::ResourceClaim& claim = reservation.claims.allocated[i];
      if (!claim.status.allocation) continue;
      std::string conflict =
          state.PeerConflictLocked(claim.metadata.uid, *claim.status.allocation, 0);
      if (!conflict.empty()) {
        // Unless an earlier bind of this pod (its reply lost, the call retried) completed: the
        // claim is in use then, and that bind's own check let it keep the device.
        absl::StatusOr<kube::Pod> current =
            writer.GetPod(pod.metadata.namespace_, pod.metadata.name);
        if (current.ok() && current->spec.node_name.empty()) writes.TakeBack(claim.metadata.uid);
        status = absl::AbortedError(
            "ResourceClaim \"" + Key(claim.metadata.namespace_, claim.metadata.name) +
            "\" was allocated already, but " + conflict + ": backing off");
      }
    }
  }
  if (!status.ok()) ++counters.peer_conflicts;
  counters.peer_check_micros_total +=
      std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - start).count();
  return status;
}

// WriteClaims writes the reservation into the cluster: the pending claims get their allocation
// (the synthesized extended-resource claim is created first, its hold moved to the created
// claim's uid), every claim gets the pod in reservedFor.
absl::Status WriteClaims(ClusterState& state, ClusterWriter& writer, const kube::Pod& pod,
                         Reservation& reservation, ClaimWrites& writes) {
  PodClaims& claims = reservation.claims;
  for (size_t i = 0; i < claims.pending.size(); ++i) {
    kube::ResourceClaim claim = claims.pending[i];
    if (claims.synthesized && *claims.synthesized == i) {
      absl::StatusOr<kube::ResourceClaim> created = writer.CreateClaim(claim);
      if (!created.ok()) {
        return WithContext(created.status(), "creating the extended-resource claim");
      }
      {
        std::unique_lock lock(state.mutex());
        state.ReleaseLocked(claim.metadata.uid);
        (void)state.HoldLocked(created->metadata.uid, reservation.results[i]);
      }
      claims.pending[i].metadata.uid = created->metadata.uid;
      claim = *created;
      // The kubelet finds the claim of a container's extended resources through the pod's
      // status: without it the container starts without the devices.
      kube::PodExtendedResourceClaimStatus pod_status;
      pod_status.resource_claim_name = created->metadata.name;
      pod_status.request_mappings = claims.extended_mappings;
      DEVLET_RETURN_IF_ERROR(
          WithContext(writer.SetPodExtendedResourceClaimStatus(
                          pod.metadata.namespace_, pod.metadata.name, pod.metadata.uid,
                          pod_status),
                      "writing the pod's extendedResourceClaimStatus"));
    }
    DEVLET_RETURN_IF_ERROR(writes.Write(std::move(claim), reservation.results[i]));
  }
  for (const auto& claim : claims.allocated) {
    DEVLET_RETURN_IF_ERROR(writes.Write(claim, std::nullopt));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<kube::Pod> Extender::PodToBind(const std::string& ns, const std::string& name,
                                              const std::string& uid) {
  const std::string pod_key = Key(ns, name);
  std::optional<kube::Pod> pod = state_.GetPod(ns, name);
  if (!pod) {
    std::lock_guard lock(pods_mu_);
    auto it = pods_seen_.find(pod_key);
    if (it != pods_seen_.end()) pod = it->second;
  }
  if (!pod) return NotFound("Pod \"" + pod_key + "\" is not known to devlet-extender");
  if (!uid.empty() && !pod->metadata.uid.empty() && pod->metadata.uid != uid) {
    return FailedPrecondition("Pod \"" + pod_key + "\": UID " + uid + " does not match " +
                              pod->metadata.uid);
  }
  return *std::move(pod);
}

// Bind in allocate mode: reserve devices on the node (held in the state), write the claims, bind
// the pod; a failure takes the claim writes back and drops the holds.
std::string Extender::Bind(std::string_view body) {
  ++counters_.bind_requests;
  auto fail = [this](const absl::Status& status) {
    ++counters_.bind_failures;
    return json({{"Error", Message(status)}}).dump();
  };
  absl::StatusOr<BindArgs> args = ParseBindArgs(body);
  if (!args.ok()) {
    ++counters_.bad_requests;
    return fail(args.status());
  }
  if (options_.mode != Mode::kAllocate) {
    absl::Status status = writer_.BindPod(args->ns, args->name, args->uid, args->node);
    return status.ok() ? json({{"Error", ""}}).dump() : fail(status);
  }
  absl::StatusOr<kube::Pod> pod = PodToBind(args->ns, args->name, args->uid);
  if (!pod.ok()) return fail(pod.status());
  absl::StatusOr<Reservation> reservation = Reserve(state_, options_, counters_, *pod, args->node);
  if (!reservation.ok()) return fail(reservation.status());

  kube::ResourceClaimConsumerReference consumer;
  consumer.resource = "pods";
  consumer.name = args->name;
  consumer.uid = pod->metadata.uid;
  ClaimWrites writes(state_, writer_, options_, counters_, std::move(consumer));
  absl::Status status = WriteClaims(state_, writer_, *pod, *reservation, writes);
  if (status.ok() && options_.check_peer_allocations) {
    status = CheckPeers(state_, writer_, options_, counters_, *pod, *reservation, writes);
  }
  if (status.ok()) {
    status = writer_.BindPod(args->ns, args->name, args->uid, args->node);
    if (!status.ok())
      status = WithContext(status, "binding pod \"" + Key(args->ns, args->name) + "\"");
  }
  if (!status.ok()) writes.Undo();
  Release(state_, reservation->claims);
  if (!status.ok()) return fail(status);
  // A bound pod is not bound again: its copy from Filter goes (a soak of 1,000 pods grew the
  // cache by 1.4 KiB each until its cap of 10,000).
  std::lock_guard lock(pods_mu_);
  pods_seen_.erase(Key(args->ns, args->name));
  return json({{"Error", ""}}).dump();
}

}  // namespace devlet::extender
