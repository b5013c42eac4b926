// dra_kubelet_prepare_benchmark: NodePrepareResources latency through the real DRA socket, with
// the stores devlet-node uses in standalone mode: claims from a kube::ManifestStore directory,
// the simulated device backend, CDI specs through cdi/ and the state/ checkpoint. The checkpoint
// and claims live under $TMPDIR (put it on the file system the checkpoint lives on in production:
// fsync costs differ by orders of magnitude between tmpfs, ext4 and network disks); the CDI specs
// on a tmpfs like /var/run/cdi (see CdiDir).
//
//   BM_PrepareInFlight/inflight:N/journal:J   N kubelet calls in flight at once, one claim each
//                                             (N pods starting)
//   BM_PrepareOneRequest/claims:N/journal:J   one call carrying N claims (one pod with N claims)
//   BM_PrepareBusyNode/inflight:N/resident:R  InFlight with R other claims prepared throughout
//                                             (a node whose pods already run)
// journal:1 is devlet-node's checkpoint (state/ with its journal: one fdatasync'd in-place record
// per change); journal:0 rewrites checkpoint.json on every change (temp, fsync, rename, dir fsync),
// the store as it was before the journal.
//
// Counters: p50_ms / p99_ms are per-call latencies as the kubelet sees them (InFlight: one claim
// per call, so per claim); ms_per_claim is the
// batch's wall time divided by N; the *_ms_per_claim counters split the preparer's time by store
// (claim fetch, checkpoint reads, checkpoint writes, CDI writes, backend), measured by wrappers;
// ckpt_writes_per_claim counts durable checkpoint writes (group commit shares them);
// cpu_ms_per_claim is the CPU time of the whole process (user + system, every thread: the
// kubelet-side clients and gRPC too) during the timed calls, per claim: what the calls cost a
// busy node, less sensitive than latencies to what else runs.
// Every iteration unprepares its claims afterwards (not timed), so each prepare is a first one.
//
//   build-dra/dra-kubelet/dra_kubelet_prepare_benchmark --benchmark_min_time=1x
#include <benchmark/benchmark.h>
#include <grpcpp/grpcpp.h>
#include <stdlib.h>
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "devlet/common/log.h"
#include "devlet/dra_kubelet/devlet_adapters.h"
#include "devlet/dra_kubelet/plugin.h"
#include "devlet/dra_kubelet/preparer.h"
#include "devlet/dra_kubelet/testing/local.h"
#include "devlet/kube/client.h"
#include "dra/v1/api.grpc.pb.h"
#include "test_util.h"

namespace devlet::dra_kubelet {
namespace {

using ::devlet::dra_kubelet::testing::SimulatedBackend;
namespace drav1 = ::k8s::io::kubelet::pkg::apis::dra::v1;

constexpr char kDriver[] = "gpu.devlet.test";
constexpr char kPool[] = "node-1";
constexpr int kMaxClaims = 100;

using Clock = std::chrono::steady_clock;

double Millis(Clock::duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

// CpuMillis is the CPU time of the whole process so far (every thread: the kubelet-side
// clients, gRPC and the plugin), user + system.
double CpuMillis() {
  struct rusage usage{};
  ::getrusage(RUSAGE_SELF, &usage);
  const auto ms = [](const timeval& t) {
    return static_cast<double>(t.tv_sec) * 1e3 + static_cast<double>(t.tv_usec) / 1e3;
  };
  return ms(usage.ru_utime) + ms(usage.ru_stime);
}

// Accumulated time per store operation, in nanoseconds.
struct Timings {
  std::atomic<std::int64_t> fetch{0};
  std::atomic<std::int64_t> checkpoint_read{0};
  std::atomic<std::int64_t> checkpoint_write{0};
  std::atomic<std::int64_t> cdi{0};
  std::atomic<std::int64_t> backend{0};
  std::atomic<std::int64_t> commits{0};  // checkpoint writes that stored records

  void Reset() {
    for (auto* t : {&fetch, &checkpoint_read, &checkpoint_write, &cdi, &backend, &commits}) {
      t->store(0);
    }
  }
};

class Timer {
 public:
  explicit Timer(std::atomic<std::int64_t>& total) : total_(total), start_(Clock::now()) {}
  ~Timer() {
    total_ += std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - start_).count();
  }

 private:
  std::atomic<std::int64_t>& total_;
  Clock::time_point start_;
};

// StoreClaimSource reads claims from a kube::ObjectStore, as devlet-node does.
class StoreClaimSource final : public ClaimSource {
 public:
  StoreClaimSource(kube::ObjectStore& store, Timings& timings) : store_(store), t_(timings) {}
  absl::StatusOr<ResourceClaim> GetClaim(const std::string& namespace_name,
                                         const std::string& name, const std::string&) override {
    Timer timer(t_.fetch);
    absl::StatusOr<kube::ResourceClaim> claim =
        kube::GetAs<kube::ResourceClaim>(store_, namespace_name, name);
    if (!claim.ok()) return claim.status();
    return ResourceClaimFromKube(*claim);
  }

 private:
  kube::ObjectStore& store_;
  Timings& t_;
};

class TimedCheckpoint final : public ClaimRecordStore {
 public:
  TimedCheckpoint(ClaimRecordStore& inner, Timings& timings) : inner_(inner), t_(timings) {}
  absl::StatusOr<std::optional<ClaimRecord>> Get(const std::string& uid) override {
    Timer timer(t_.checkpoint_read);
    return inner_.Get(uid);
  }
  absl::Status Put(const ClaimRecord& record) override {
    Timer timer(t_.checkpoint_write);
    return inner_.Put(record);
  }
  absl::Status Delete(const std::string& uid) override { return inner_.Delete(uid); }
  absl::StatusOr<std::vector<ClaimRecord>> List() override {
    Timer timer(t_.checkpoint_read);
    return inner_.List();
  }
  absl::Status Commit(const std::vector<ClaimRecord>& puts,
                      const std::vector<std::string>& deletes) override {
    if (puts.empty()) return inner_.Commit(puts, deletes);  // unprepare: not measured
    Timer timer(t_.checkpoint_write);
    ++t_.commits;
    return inner_.Commit(puts, deletes);
  }
  absl::Status CommitDeferred(const std::vector<ClaimRecord>& puts,
                              const std::vector<std::string>& deletes) override {
    Timer timer(t_.checkpoint_write);
    ++t_.commits;
    return inner_.CommitDeferred(puts, deletes);
  }

 private:
  ClaimRecordStore& inner_;
  Timings& t_;
};

class TimedCdi final : public CdiWriter {
 public:
  TimedCdi(CdiWriter& inner, Timings& timings) : inner_(inner), t_(timings) {}
  absl::Status WriteSpec(const std::string& name, const CdiSpec& spec) override {
    Timer timer(t_.cdi);
    return inner_.WriteSpec(name, spec);
  }
  absl::Status RemoveSpec(const std::string& name) override { return inner_.RemoveSpec(name); }
  bool SpecExists(const std::string& name) override { return inner_.SpecExists(name); }

 private:
  CdiWriter& inner_;
  Timings& t_;
};

class TimedBackend final : public DeviceBackend {
 public:
  TimedBackend(DeviceBackend& inner, Timings& timings) : inner_(inner), t_(timings) {}
  absl::StatusOr<PreparedDevice> Prepare(const DevicePrepareRequest& request) override {
    Timer timer(t_.backend);
    return inner_.Prepare(request);
  }
  absl::Status Unprepare(const DeviceUnprepareRequest& request) override {
    return inner_.Unprepare(request);
  }

  bool PreparedStateSurvivesReboot() const override {
    return inner_.PreparedStateSurvivesReboot();
  }

 private:
  DeviceBackend& inner_;
  Timings& t_;
};

std::string ClaimName(int i) { return "claim-" + std::to_string(i); }
std::string ClaimUid(int i) { return "7f3c1a52-0000-4000-8000-" + std::to_string(100000000000 + i); }

std::string ClaimJson(int i) {
  const std::string gpu = "gpu-" + std::to_string(i);
  return R"({"apiVersion":"resource.k8s.io/v1","kind":"ResourceClaim","metadata":{"name":")" +
         ClaimName(i) + R"(","namespace":"default","uid":")" + ClaimUid(i) +
         R"("},"spec":{"devices":{"requests":[{"name":"gpu","exactly":{"deviceClassName":"gpu"}}]}},)"
         R"("status":{"allocation":{"devices":{"results":[{"request":"gpu","driver":")" +
         kDriver + R"(","pool":")" + kPool + R"(","device":")" + gpu +
         R"("}]},"nodeSelector":{"nodeSelectorTerms":[{"matchFields":[{"key":"metadata.name",)"
         R"("operator":"In","values":["node-1"]}]}]}},"reservedFor":[{"resource":"pods",)"
         R"("name":"pod-)" + std::to_string(i) + R"(","uid":"pod-uid-)" + std::to_string(i) +
         R"("}]}})";
}

// CdiDir is where the transient CDI specs go: a tmpfs, as /var/run/cdi is on a node
// ($DEVLET_BENCH_CDI_ROOT, else a new directory under /dev/shm, else under $TMPDIR). The specs
// are not synced, but their create/rename/unlink still wait for the file system's journal when
// other processes sync the same disk, which a node does not do to its CDI specs.
class CdiDir {
 public:
  CdiDir() {
    std::string base;
    if (const char* env = std::getenv("DEVLET_BENCH_CDI_ROOT"); env != nullptr && *env != '\0') {
      base = env;
    } else if (std::filesystem::is_directory("/dev/shm")) {
      base = "/dev/shm";
    } else {
      base = std::filesystem::temp_directory_path().string();
    }
    std::string pattern = base + "/dra-bench-cdi-XXXXXX";
    if (::mkdtemp(pattern.data()) == nullptr) {
      std::fprintf(stderr, "benchmark setup failed: mkdtemp %s\n", pattern.c_str());
      std::abort();
    }
    path_ = pattern;
  }
  ~CdiDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  CdiDir(const CdiDir&) = delete;
  CdiDir& operator=(const CdiDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Env is one plugin with its stores and a connected kubelet-side channel.
class Env {
 public:
  // journal: the state/ checkpoint with its journal (devlet-node's default); false: every change
  // rewrites checkpoint.json (the store before the journal). resident: claims prepared at the
  // start and kept (a node whose pods already run): claims [kMaxClaims, kMaxClaims + resident).
  explicit Env(bool journal, int resident = 0)
      : backend_(kPool, SimulatedBackend::Gpus(kMaxClaims + resident)) {
    const std::string manifests = dir_.path() + "/manifests";
    std::filesystem::create_directories(manifests);
    for (int i = 0; i < kMaxClaims + resident; ++i) {
      testing::WriteFile(manifests + "/" + ClaimName(i) + ".json", ClaimJson(i));
    }
    // The manifest store decodes files younger than a second on every read; on a node claims
    // exist well before the kubelet asks for them.
    std::this_thread::sleep_for(std::chrono::milliseconds(1100));
    store_ = Must(kube::ManifestStore::Open({.dir = manifests}));
    claims_ = std::make_unique<StoreClaimSource>(*store_, timings_);
    cdi_ = std::make_unique<CdiSpecWriter>(cdi_dir_.path());
    const std::string data = dir_.path() + "/plugins/" + kDriver;
    state::StoreOptions store_options{.dir = data};
    if (!journal) store_options.journal_bytes = 0;
    checkpoint_ = Must(StateClaimRecordStore::Open(store_options, kDriver, cdi_dir_.path()));
    timed_checkpoint_ = std::make_unique<TimedCheckpoint>(*checkpoint_, timings_);
    timed_cdi_ = std::make_unique<TimedCdi>(*cdi_, timings_);
    timed_backend_ = std::make_unique<TimedBackend>(backend_, timings_);
    PreparerOptions preparer_options;
    preparer_options.driver_name = kDriver;
    preparer_options.node_name = kPool;
    preparer_options.plugin_data_dir = data;
    preparer_ = std::make_unique<ClaimPreparer>(preparer_options, *claims_, *timed_backend_,
                                                *timed_cdi_, *timed_checkpoint_);
    PluginOptions options;
    options.driver_name = kDriver;
    options.registrar_dir = dir_.path() + "/registry";
    options.plugin_data_dir = data;
    plugin_ = Must(KubeletPlugin::Start(options, *preparer_, &backend_));
    channel_ = grpc::CreateChannel("unix:" + plugin_->DraSocketPath(),
                                   grpc::InsecureChannelCredentials());
    stub_ = drav1::DRAPlugin::NewStub(channel_);
    if (resident > 0) Prepare(kMaxClaims, resident);
  }

  ~Env() { plugin_->Stop(); }

  // Prepare sends one NodePrepareResources for claims [first, first + count) and returns its
  // latency; aborts the benchmark on any error (a number for a failing prepare means nothing).
  Clock::duration Prepare(int first, int count) {
    drav1::NodePrepareResourcesRequest request;
    for (int i = first; i < first + count; ++i) {
      auto* claim = request.add_claims();
      claim->set_namespace_("default");
      claim->set_name(ClaimName(i));
      claim->set_uid(ClaimUid(i));
    }
    drav1::NodePrepareResourcesResponse response;
    grpc::ClientContext context;
    context.set_wait_for_ready(true);
    auto start = Clock::now();
    grpc::Status status = stub_->NodePrepareResources(&context, request, &response);
    auto took = Clock::now() - start;
    if (!status.ok()) Fail("NodePrepareResources: " + status.error_message());
    for (int i = first; i < first + count; ++i) {
      auto it = response.claims().find(ClaimUid(i));
      if (it == response.claims().end() || !it->second.error().empty() ||
          it->second.devices_size() != 1) {
        Fail("claim " + ClaimName(i) + " not prepared: " +
             (it == response.claims().end() ? "missing" : it->second.error()));
      }
    }
    return took;
  }

  // UnprepareAll releases claims [0, count) in one call.
  void UnprepareAll(int count) {
    drav1::NodeUnprepareResourcesRequest request;
    for (int i = 0; i < count; ++i) {
      auto* claim = request.add_claims();
      claim->set_namespace_("default");
      claim->set_name(ClaimName(i));
      claim->set_uid(ClaimUid(i));
    }
    drav1::NodeUnprepareResourcesResponse response;
    grpc::ClientContext context;
    grpc::Status status = stub_->NodeUnprepareResources(&context, request, &response);
    if (!status.ok()) Fail("NodeUnprepareResources: " + status.error_message());
    for (const auto& [uid, entry] : response.claims()) {
      if (!entry.error().empty()) Fail("unprepare " + uid + ": " + entry.error());
    }
  }

  Timings& timings() { return timings_; }

 private:
  template <typename T>
  static T Must(absl::StatusOr<T> value) {
    if (!value.ok()) Fail(std::string(value.status().message()));
    return *std::move(value);
  }
  [[noreturn]] static void Fail(const std::string& why) {
    std::fprintf(stderr, "benchmark setup failed: %s\n", why.c_str());
    std::abort();
  }

  testing::TempDir dir_;
  CdiDir cdi_dir_;
  Timings timings_;
  SimulatedBackend backend_;
  std::unique_ptr<kube::ManifestStore> store_;
  std::unique_ptr<StoreClaimSource> claims_;
  std::unique_ptr<CdiSpecWriter> cdi_;
  std::unique_ptr<StateClaimRecordStore> checkpoint_;
  std::unique_ptr<TimedCheckpoint> timed_checkpoint_;
  std::unique_ptr<TimedCdi> timed_cdi_;
  std::unique_ptr<TimedBackend> timed_backend_;
  std::unique_ptr<ClaimPreparer> preparer_;
  std::unique_ptr<KubeletPlugin> plugin_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<drav1::DRAPlugin::Stub> stub_;
};

double Percentile(std::vector<double> values, double p) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  std::size_t index = static_cast<std::size_t>(p * static_cast<double>(values.size() - 1) + 0.5);
  return values[std::min(index, values.size() - 1)];
}

void Report(benchmark::State& state, Env& env, const std::vector<double>& latencies,
            double total_batch_ms, double cpu_ms, std::int64_t claims) {
  state.counters["p50_ms"] = Percentile(latencies, 0.50);
  state.counters["p99_ms"] = Percentile(latencies, 0.99);
  const double n = static_cast<double>(std::max<std::int64_t>(claims, 1));
  state.counters["ms_per_claim"] = total_batch_ms / n;
  state.counters["cpu_ms_per_claim"] = cpu_ms / n;
  Timings& t = env.timings();
  auto per_claim = [&](std::atomic<std::int64_t>& total) {
    return static_cast<double>(total.load()) / 1e6 / n;
  };
  state.counters["fetch_ms_per_claim"] = per_claim(t.fetch);
  state.counters["ckpt_read_ms_per_claim"] = per_claim(t.checkpoint_read);
  state.counters["ckpt_write_ms_per_claim"] = per_claim(t.checkpoint_write);
  state.counters["cdi_ms_per_claim"] = per_claim(t.cdi);
  state.counters["backend_ms_per_claim"] = per_claim(t.backend);
  state.counters["ckpt_writes_per_claim"] = static_cast<double>(t.commits.load()) / n;
}

void RunInFlight(benchmark::State& state, int n, bool journal, int resident) {
  Env env(journal, resident);
  env.Prepare(0, 1);  // Connect and warm up.
  env.UnprepareAll(1);
  env.timings().Reset();
  std::vector<double> latencies;
  double total_ms = 0;
  double cpu_ms = 0;
  std::int64_t claims = 0;
  for (auto _ : state) {
    std::mutex mutex;
    std::condition_variable cv;
    bool go = false;
    std::vector<double> batch(static_cast<std::size_t>(n));
    std::vector<std::thread> threads;
    for (int i = 0; i < n; ++i) {
      threads.emplace_back([&, i] {
        {
          std::unique_lock lock(mutex);
          cv.wait(lock, [&] { return go; });
        }
        batch[static_cast<std::size_t>(i)] = Millis(env.Prepare(i, 1));
      });
    }
    auto start = Clock::now();
    const double cpu_start = CpuMillis();
    {
      std::lock_guard lock(mutex);
      go = true;
    }
    cv.notify_all();
    for (std::thread& thread : threads) thread.join();
    const double wall = Millis(Clock::now() - start);
    cpu_ms += CpuMillis() - cpu_start;
    state.SetIterationTime(wall / 1000.0);
    total_ms += wall;
    claims += n;
    latencies.insert(latencies.end(), batch.begin(), batch.end());
    env.UnprepareAll(n);
  }
  Report(state, env, latencies, total_ms, cpu_ms, claims);
}

void BM_PrepareInFlight(benchmark::State& state) {
  RunInFlight(state, static_cast<int>(state.range(0)), state.range(1) != 0, 0);
}
BENCHMARK(BM_PrepareInFlight)
    ->ArgNames({"inflight", "journal"})
    ->ArgsProduct({{1, 10, 100}, {1, 0}})
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

// A busy node: `resident` claims stay prepared while the timed calls run (costs that grow with
// the checkpoint show here), devlet-node's checkpoint.
void BM_PrepareBusyNode(benchmark::State& state) {
  RunInFlight(state, static_cast<int>(state.range(0)), true, static_cast<int>(state.range(1)));
}
BENCHMARK(BM_PrepareBusyNode)
    ->ArgNames({"inflight", "resident"})
    ->ArgsProduct({{1, 10}, {200}})
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);


void BM_PrepareOneRequest(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  Env env(state.range(1) != 0);
  env.Prepare(0, 1);
  env.UnprepareAll(1);
  env.timings().Reset();
  std::vector<double> latencies;
  double total_ms = 0;
  double cpu_ms = 0;
  std::int64_t claims = 0;
  for (auto _ : state) {
    const double cpu_start = CpuMillis();
    const double took = Millis(env.Prepare(0, n));
    cpu_ms += CpuMillis() - cpu_start;
    state.SetIterationTime(took / 1000.0);
    latencies.push_back(took);
    total_ms += took;
    claims += n;
    env.UnprepareAll(n);
  }
  Report(state, env, latencies, total_ms, cpu_ms, claims);
}
BENCHMARK(BM_PrepareOneRequest)
    ->ArgNames({"claims", "journal"})
    ->ArgsProduct({{1, 10, 100}, {1, 0}})
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace devlet::dra_kubelet

BENCHMARK_MAIN();
