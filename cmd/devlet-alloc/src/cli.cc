#include "devlet/alloc_cli/cli.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <iostream>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/time/time.h"
#include "devlet/alloc_cli/cluster.h"
#include "devlet/allocator/features.h"
#include "devlet/allocator/scenario.h"
#include "devlet/common/flags.h"
#include "devlet/common/status.h"
#include "devlet/kube/codec.h"
#include "devlet/kube/rest_client.h"

namespace devlet::alloc_cli {

using allocator::AllocateOptions;
using allocator::AllocateOutcome;
using allocator::Explanation;
using allocator::NodeOutcome;
using allocator::Scenario;

// ---- devlet-alloc ------------------------------------------------------------------------

namespace {

// ReadLimited reads `in` up to `limit` bytes and stops there: more input is refused without
// being read (1 GB on stdin used to be read whole, 987 MB of RSS, before the decoder's limit
// refused it).
absl::StatusOr<std::string> ReadLimited(std::istream& in, const std::string& name, size_t limit) {
  std::string out;
  char buf[1 << 16];
  while (in) {
    in.read(buf, sizeof buf);
    const size_t got = static_cast<size_t>(in.gcount());
    if (got > limit - out.size()) {
      return InvalidArgument(name + ": input is more than the limit of " + std::to_string(limit) +
                             " bytes (" + std::to_string(limit >> 20) + " MiB)");
    }
    out.append(buf, got);
  }
  if (in.bad()) return Internal(name + ": read error");
  return out;
}

absl::StatusOr<std::string> ReadInput(const std::string& path, size_t limit) {
  if (path == "-") return ReadLimited(std::cin, "stdin", limit);
  std::error_code ec;
  if (std::filesystem::is_regular_file(path, ec)) {
    const auto size = std::filesystem::file_size(path, ec);
    if (!ec && size > limit) {
      return InvalidArgument(path + ": input is more than the limit of " + std::to_string(limit) +
                             " bytes (" + std::to_string(limit >> 20) + " MiB)");
    }
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound(path + ": cannot open file");
  return ReadLimited(in, path, limit);
}

std::string Pad(std::string s, size_t width) {
  if (s.size() < width) s.append(width - s.size(), ' ');
  return s;
}

void PrintExplanation(const NodeOutcome& out, std::ostream& err) {
  const Explanation& e = out.explanation;
  err << "node " << out.node << ": " << e.pools.size() << " pool(s), " << e.steps
      << " search step(s)\n";
  for (const auto& p : e.pools) {
    err << "  pool " << p.id << ": " << p.status << ", " << p.devices << " device(s)\n";
  }
  std::vector<std::string> order;  // requests in the order the search reached them
  for (const auto& c : e.candidates) {
    if (std::find(order.begin(), order.end(), c.request) == order.end()) order.push_back(c.request);
  }
  for (const std::string& request : order) {
    err << "  request " << request << ":\n";
    for (const auto& c : e.candidates) {
      if (c.request == request) err << "    " << c.device << ": " << c.verdict << "\n";
    }
  }
}

// ReadClusterWithin reads the what-if's objects from the cluster (ReadCluster) within `timeout`
// (zero: no bound). The REST client retries and waits per request, and a blocked connect or TLS
// handshake cannot be cancelled from outside: the read runs on a thread of its own, and on
// DeadlineExceeded it may still be running (the caller ends the process).
absl::StatusOr<std::vector<kube::Object>> ReadClusterWithin(const ClusterRequest& request,
                                                            std::vector<kube::Object> from_files,
                                                            absl::Duration timeout,
                                                            std::vector<std::string>* notes) {
  absl::StatusOr<kube::RestConfig> config = LoadClusterConfig(request);
  if (!config.ok()) return config.status();
  ClusterRequest with_namespace = request;
  if (with_namespace.namespace_name.empty()) with_namespace.namespace_name = config->namespace_name;
  if (timeout > absl::ZeroDuration()) {
    const auto bound = std::chrono::duration_cast<std::chrono::milliseconds>(
        absl::ToChronoNanoseconds(timeout));
    config->request_timeout = std::min(config->request_timeout, bound);
    config->connect_timeout = std::min(config->connect_timeout, bound);
  }
  const std::string where = "reading the cluster at " + config->server;
  using Result = absl::StatusOr<std::pair<std::vector<kube::Object>, std::vector<std::string>>>;
  auto task = std::make_shared<std::packaged_task<Result()>>(
      [what_if = std::move(with_namespace), config = *config,
       from_files = std::move(from_files)]() mutable -> Result {
        DEVLET_ASSIGN_OR_RETURN(std::unique_ptr<kube::ApiServerStore> store,
                                kube::ApiServerStore::Create(config));
        std::vector<std::string> said;
        DEVLET_ASSIGN_OR_RETURN(std::vector<kube::Object> objects,
                                ReadCluster(*store, what_if, std::move(from_files), &said));
        return std::make_pair(std::move(objects), std::move(said));
      });
  std::future<Result> result = task->get_future();
  std::thread([task] { (*task)(); }).detach();
  if (timeout > absl::ZeroDuration() &&
      result.wait_for(absl::ToChronoNanoseconds(timeout)) != std::future_status::ready) {
    return DeadlineExceeded("timed out after " + absl::FormatDuration(timeout) + " " + where +
                            " (--timeout)");
  }
  Result got = result.get();
  if (!got.ok()) return WithContext(got.status(), where);
  if (notes != nullptr) *notes = std::move(got->second);
  return std::move(got->first);
}

// The help text of devlet-alloc (kubectl devlet when `name` says so).
std::string Description(const std::string& name) {
  return name +
         ": allocate DRA ResourceClaims on a node, as the Kubernetes scheduler would.\n"
         "Input: DeviceClass, ResourceSlice, ResourceClaim, Node, DeviceTaintRule, Pod (YAML or\n"
         "JSON), at most 64 MiB per file. Claims with status.allocation are already allocated;\n"
         "the others are one pod's claims. A Pod's extended resources served by a DeviceClass\n"
         "become one more claim. Nothing to allocate: an empty List.\n"
         "A live cluster (--kubeconfig, --context, --in-cluster, --claim or --pod; always as\n"
         "kubectl devlet): DeviceClasses, ResourceSlices, DeviceTaintRules, Nodes and the\n"
         "allocated ResourceClaims come from the kube-apiserver (read only), replaced by file\n"
         "objects of the same name; the claims to place are --claim, --pod's claims and the\n"
         "files' claims without status.allocation. --timeout also bounds reading the cluster.\n"
         "Exit: 0 allocated, 1 cannot be allocated on that node (also: the search ran out of\n"
         "--timeout), 2 error (also: the cluster cannot be read).";
}

// Flags is devlet-alloc's command line.
struct Flags {
  std::vector<std::string> files;
  std::string node_name, gates, timeout_text = "10s";
  bool all_nodes = false, explain = false;
  ClusterRequest cluster;
};

void AddFlags(CLI::App& app, Flags& f) {
  app.add_option("-f,--filename", f.files, "Input file (repeatable; - for stdin)");
  app.add_option("--node", f.node_name, "Node to allocate on");
  app.add_option("--feature-gates", f.gates, "Feature gates, e.g. DRAConsumableCapacity=false");
  app.add_flag("--all-nodes", f.all_nodes, "Try every node; print which fit and why others do not");
  app.add_flag("--explain", f.explain, "Explain, on stderr, what the search considered");
  app.add_option("--timeout", f.timeout_text,
                 "Bound on the search per node, as the scheduler's filterTimeout, and on reading "
                 "the cluster (Go duration: 10s, 500ms, 1m; 0 for none)")
      ->capture_default_str();
  app.add_option("--kubeconfig", f.cluster.kubeconfig,
                 "Read the cluster of this kubeconfig (without it: $KUBECONFIG, in-cluster, "
                 "~/.kube/config)");
  app.add_option("--context", f.cluster.context, "Kubeconfig context (default: current-context)");
  app.add_flag("--in-cluster", f.cluster.in_cluster,
               "Read the cluster through the pod's service account");
  app.add_option("-n,--namespace", f.cluster.namespace_name,
                 "Namespace of --claim, --pod and of file objects that name none (default: the "
                 "kubeconfig context's, else default)");
  app.add_option("--claim", f.cluster.claims,
                 "ResourceClaim in the cluster to place (repeatable: one pod's claims)");
  app.add_option("--pod", f.cluster.pod,
                 "Pod in the cluster whose claims (and extended resources) to place");
}

// ReadFiles decodes the -f files, in order.
absl::StatusOr<std::vector<kube::Object>> ReadFiles(const std::vector<std::string>& files) {
  std::vector<kube::Object> objects;
  for (const std::string& file : files) {
    kube::DecodeOptions decode_options;
    DEVLET_ASSIGN_OR_RETURN(std::string text, ReadInput(file, decode_options.max_bytes));
    decode_options.source = file == "-" ? "stdin" : file;
    DEVLET_ASSIGN_OR_RETURN(std::vector<kube::Object> decoded, kube::Decode(text, decode_options));
    for (auto& o : decoded)
      objects.push_back(std::move(o));
  }
  return objects;
}

bool TimedOut(const NodeOutcome& out) {
  return out.outcome.kind == AllocateOutcome::Kind::kError &&
         out.outcome.status.code() == absl::StatusCode::kDeadlineExceeded;
}

// Run is one invocation with its checked flags: the steps after parsing the command line.
struct Run {
  std::string name;  // for messages: devlet-alloc or kubectl devlet
  Flags flags;
  bool from_cluster = false;
  absl::Duration timeout;

  int Fail(const std::string& message) const {
    std::cerr << name << ": " << message << "\n";
    return 2;
  }

  // Each node's search gets its own budget, as each of the scheduler's Filter calls does.
  AllocateOptions OptionsForNode() const {
    AllocateOptions options;
    if (timeout > absl::ZeroDuration()) {
      options.timeout = std::chrono::milliseconds(
          std::max<int64_t>(1, absl::ToInt64Milliseconds(timeout)));
      options.deadline = std::chrono::steady_clock::now() + absl::ToChronoNanoseconds(timeout);
    }
    return options;
  }

  // The cluster's objects with the files' in place of theirs; a failure ends the process.
  std::vector<kube::Object> ReadClusterOrExit(std::vector<kube::Object> from_files) const {
    std::vector<std::string> notes;
    auto read = ReadClusterWithin(flags.cluster, std::move(from_files), timeout, &notes);
    if (!read.ok()) {
      std::cerr << name << ": " << Message(read.status()) << "\n";
      std::cerr.flush();
      std::cout.flush();
      // The reader may still be blocked in the client (DeadlineExceeded: it cannot be cancelled);
      // end the process without running destructors under it.
      std::_Exit(2);
    }
    for (const std::string& note : notes) std::cerr << name << ": note: " << note << "\n";
    return std::move(*read);
  }

  int OnNode(Scenario& scenario) const {
    NodeOutcome out = scenario.AllocateOn(flags.node_name, OptionsForNode());
    if (TimedOut(out)) {
      // Exit 1, "not on this node (within the budget)", not 2: the input is fine and a larger
      // --timeout may answer. (The scheduler's Filter returns the timeout as an Error so that
      // the pod retries with backoff rather than wait for a cluster event.)
      std::cerr << name << ": " << Message(out.outcome.status) << "\n";
      return 1;
    }
    if (flags.explain)
      PrintExplanation(out, std::cerr);
    switch (out.outcome.kind) {
      case AllocateOutcome::Kind::kAllocated: {
        std::vector<kube::Object> list(out.claims.begin(), out.claims.end());
        std::cout << kube::EncodeJsonList(list, {.indent = 2}) << "\n";
        return 0;
      }
      case AllocateOutcome::Kind::kUnschedulable:
        std::cerr << name << ": node " << flags.node_name << ": " << out.Summary() << "\n";
        return 1;
      case AllocateOutcome::Kind::kError:
        break;
    }
    return Fail(Message(out.outcome.status));
  }

  int OnAllNodes(Scenario& scenario) const {
    std::vector<std::string> nodes = scenario.CandidateNodes();
    if (nodes.empty())
      return Fail("--all-nodes: no Node objects and no slice names a node");
    std::vector<NodeOutcome> outcomes;
    size_t width = 4;
    for (const std::string& n : nodes) {
      outcomes.push_back(scenario.AllocateOn(n, OptionsForNode()));
      width = std::max(width, n.size());
      if (outcomes.back().outcome.kind == AllocateOutcome::Kind::kError &&
          !TimedOut(outcomes.back())) {
        return Fail(Message(outcomes.back().outcome.status));  // the pod fails everywhere
      }
    }
    bool any = false;
    std::cout << Pad("NODE", width) << "  FITS  DETAILS\n";
    for (const NodeOutcome& out : outcomes) {
      bool fits = out.outcome.kind == AllocateOutcome::Kind::kAllocated;
      any = any || fits;
      std::string details;
      if (fits) {
        for (const auto& r : out.outcome.results) {
          for (const auto& d : r.devices.results) {
            if (!details.empty())
              details += ", ";
            details += d.request + "=" + d.driver + "/" + d.pool + "/" + d.device;
          }
        }
      } else {
        details = out.Summary();
      }
      std::cout << Pad(out.node, width) << "  " << (fits ? "yes " : "no  ") << "  " << details
                << "\n";
      if (flags.explain)
        PrintExplanation(out, std::cerr);
    }
    return any ? 0 : 1;
  }
};

}  // namespace

int RunDevletAlloc(int argc, char** argv) {
  // Installed as kubectl-devlet, kubectl runs it for `kubectl devlet ...`: then it reads the
  // cluster by default, as every kubectl command does.
  const std::string base = std::filesystem::path(argc > 0 ? argv[0] : "").filename().string();
  const bool as_kubectl = base == "kubectl-devlet";
  Run run;
  run.name = as_kubectl ? "kubectl devlet" : "devlet-alloc";
  CLI::App app{Description(run.name), run.name};
  Flags& f = run.flags;
  AddFlags(app, f);
  try {
    flags::Parse(app, argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return 2;
  }
  run.from_cluster = as_kubectl || !f.cluster.kubeconfig.empty() || !f.cluster.context.empty() ||
                     f.cluster.in_cluster || !f.cluster.claims.empty() || !f.cluster.pod.empty();
  if (!run.from_cluster && f.files.empty()) {
    return run.Fail(
        "give -f FILE, or read a live cluster (--kubeconfig, --context, --in-cluster, "
        "--claim or --pod)");
  }
  if (f.all_nodes == !f.node_name.empty()) {
    return run.Fail("give exactly one of --node NAME and --all-nodes");
  }
  auto features = allocator::ParseFeatureGates(f.gates);
  if (!features.ok())
    return run.Fail(Message(features.status()));
  if (!absl::ParseDuration(f.timeout_text, &run.timeout) || run.timeout < absl::ZeroDuration()) {
    return run.Fail("--timeout: invalid duration \"" + f.timeout_text + "\" (e.g. 10s, 500ms, 0)");
  }
  absl::StatusOr<std::vector<kube::Object>> objects = ReadFiles(f.files);
  if (!objects.ok())
    return run.Fail(Message(objects.status()));
  if (run.from_cluster)
    *objects = run.ReadClusterOrExit(std::move(*objects));
  auto scenario = Scenario::FromObjects(std::move(*objects), *features);
  if (!scenario.ok())
    return run.Fail(Message(scenario.status()));
  if (scenario->pending().empty() && !scenario->pod()) {
    if (run.from_cluster) {
      return run.Fail(
          "nothing to place: name a claim (--claim) or a pod (--pod), or give them with -f");
    }
    // Nothing to allocate (upstream: nothing to do): the empty List of allocated claims.
    std::cout << kube::EncodeJsonList({}, {.indent = 2}) << "\n";
    return 0;
  }
  return f.all_nodes ? run.OnAllNodes(*scenario) : run.OnNode(*scenario);
}

}  // namespace devlet::alloc_cli
