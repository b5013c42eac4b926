// dra_kubelet_test_server: devlet's kubelet plugin with the simulated backend and claims read from
// a directory of ResourceClaim JSON files. The kubelet-side Go harness (integration/kubelet) runs
// it; it is also handy to poke at with a real kubelet on a test machine.
//
//   dra_kubelet_test_server --driver-name gpu.devlet.test --claims-dir DIR --cdi-root DIR
//       --kubelet-registrar-directory-path DIR --kubelet-plugins-directory-path DIR
//
// --crash-at kills the process (SIGKILL) at a chosen step of prepare or unprepare.
// SIGTERM/SIGINT: stop (registration socket first). SIGUSR1: mark gpu-0 unhealthy. SIGUSR2: mark
// every device healthy again.
#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <cstdlib>
#include <iostream>
#include <optional>

#include "devlet/cdi/testing/forwarding_file_system.h"
#include "devlet/common/flags.h"
#include "devlet/common/log.h"
#include "devlet/common/status.h"
#include "devlet/dra_kubelet/devlet_adapters.h"
#include "devlet/dra_kubelet/plugin.h"
#include "devlet/dra_kubelet/preparer.h"
#include "devlet/dra_kubelet/testing/local.h"
#include "devlet/state/store.h"

namespace {

using namespace devlet::dra_kubelet;
using ::devlet::dra_kubelet::testing::SimulatedBackend;

// CrashPlan kills this process with SIGKILL (kill -9, no cleanup) at the n-th call of one
// operation, before it runs or, with ":after", right after: "--crash-at=checkpoint.put:2:after".
// For the journal's writes, ":torn" writes half of the data and then kills (what a power loss in
// the middle of the write leaves): "--crash-at=journal.write:2:torn".
class CrashPlan {
 public:
  explicit CrashPlan(const std::string& spec) {
    if (spec.empty()) return;
    auto first = spec.find(':');
    op_ = spec.substr(0, first);
    std::string rest = first == std::string::npos ? "1" : spec.substr(first + 1);
    auto second = rest.find(':');
    n_ = std::atoi(rest.substr(0, second).c_str());
    const std::string when = second == std::string::npos ? "" : rest.substr(second + 1);
    after_ = when == "after";
    torn_ = when == "torn";
  }
  // Before is called before `op` runs and returns the call's ordinal; After after it.
  int Before(const std::string& op) {
    if (op != op_) return 0;
    int call = ++count_;
    if (call == n_ && !after_ && !torn_) Crash(op, "before");
    return call;
  }
  void After(const std::string& op, int call) {
    if (op == op_ && call == n_ && after_) Crash(op, "after");
  }
  // Around runs `run`, one call of `op`, between Before and After and returns its result.
  template <typename Run>
  auto Around(const std::string& op, Run run) {
    const int call = Before(op);
    auto result = run();
    After(op, call);
    return result;
  }
  // Torn says whether call `call` of `op` is to be torn (then the caller writes part of it and
  // calls Crash).
  bool Torn(const std::string& op, int call) const { return torn_ && op == op_ && call == n_; }
  static void Crash(const std::string& op, const char* when) {
    devlet::log::Logger().Warning("Crash injection: SIGKILL", "op", op, "when", when);
    ::raise(SIGKILL);
  }

 private:
  std::string op_;
  int n_ = 0;
  bool after_ = false;
  bool torn_ = false;
  std::atomic<int> count_{0};
};

class CrashingStore final : public ClaimRecordStore {
 public:
  CrashingStore(ClaimRecordStore& inner, CrashPlan& plan) : inner_(inner), plan_(plan) {}
  absl::StatusOr<std::optional<ClaimRecord>> Get(const std::string& uid) override {
    return inner_.Get(uid);
  }
  absl::Status Put(const ClaimRecord& record) override {
    return plan_.Around("checkpoint.put", [&] { return inner_.Put(record); });
  }
  absl::Status Delete(const std::string& uid) override {
    return plan_.Around("checkpoint.delete", [&] { return inner_.Delete(uid); });
  }
  absl::StatusOr<std::vector<ClaimRecord>> List() override { return inner_.List(); }
  // A batch commit is one crash point: "checkpoint.put" when it stores records (PrepareStarted,
  // PrepareCompleted), "checkpoint.delete" when it only removes them (unprepare).
  absl::Status Commit(const std::vector<ClaimRecord>& puts,
                      const std::vector<std::string>& deletes) override {
    const std::string op = puts.empty() ? "checkpoint.delete" : "checkpoint.put";
    return plan_.Around(op, [&] { return inner_.Commit(puts, deletes); });
  }
  // The same crash point for the unsynced PrepareStarted of a volatile backend.
  absl::Status CommitDeferred(const std::vector<ClaimRecord>& puts,
                              const std::vector<std::string>& deletes) override {
    const std::string op = puts.empty() ? "checkpoint.delete" : "checkpoint.put";
    return plan_.Around(op, [&] { return inner_.CommitDeferred(puts, deletes); });
  }

 private:
  ClaimRecordStore& inner_;
  CrashPlan& plan_;
};

class CrashingCdi final : public CdiWriter {
 public:
  CrashingCdi(CdiWriter& inner, CrashPlan& plan) : inner_(inner), plan_(plan) {}
  absl::Status WriteSpec(const std::string& name, const CdiSpec& spec) override {
    return plan_.Around("cdi.write", [&] { return inner_.WriteSpec(name, spec); });
  }
  absl::Status RemoveSpec(const std::string& name) override {
    return plan_.Around("cdi.remove", [&] { return inner_.RemoveSpec(name); });
  }
  bool SpecExists(const std::string& name) override { return inner_.SpecExists(name); }
  bool SpecIsCurrent(const std::string& name, const CdiSpec& spec) override {
    return inner_.SpecIsCurrent(name, spec);
  }

 private:
  CdiWriter& inner_;
  CrashPlan& plan_;
};

class CrashingBackend final : public DeviceBackend {
 public:
  CrashingBackend(DeviceBackend& inner, CrashPlan& plan) : inner_(inner), plan_(plan) {}
  absl::StatusOr<PreparedDevice> Prepare(const DevicePrepareRequest& request) override {
    return plan_.Around("backend.prepare", [&] { return inner_.Prepare(request); });
  }
  absl::Status Unprepare(const DeviceUnprepareRequest& request) override {
    return plan_.Around("backend.unprepare", [&] { return inner_.Unprepare(request); });
  }

  bool PreparedStateSurvivesReboot() const override {
    return inner_.PreparedStateSurvivesReboot();
  }

 private:
  DeviceBackend& inner_;
  CrashPlan& plan_;
};

// CrashingFileSystem puts crash points inside the state/ checkpoint's own writes:
// "journal.write" (a journal record: PrepareStarted, PrepareCompleted, unprepare's removal),
// "journal.clear" (zeroing the journal after a compaction), "snapshot.rename" (checkpoint.json
// replaced by a compaction; the first one is at start-up).
class CrashingFileSystem final : public devlet::cdi::testing::ForwardingFileSystem {
 public:
  explicit CrashingFileSystem(CrashPlan& plan) : plan_(plan) {}
  absl::Status Rename(const std::string& from, const std::string& to) override {
    if (!to.ends_with("/checkpoint.json")) return inner().Rename(from, to);
    return plan_.Around("snapshot.rename", [&] { return inner().Rename(from, to); });
  }
  absl::Status WriteAt(int fd, std::string_view data, std::uint64_t offset,
                       const std::string& path) override {
    const bool record = data.starts_with("DVJ1");
    const std::string op = record ? "journal.write" : "journal.clear";
    int call = plan_.Before(op);
    if (plan_.Torn(op, call)) {
      // Half of the record's header and payload (the rest of a record is zero padding), or half
      // of the zeros.
      std::size_t length = data.size();
      if (record && data.size() >= devlet::state::kJournalHeaderSize) {
        length = devlet::state::kJournalHeaderSize;
        for (int i = 3; i >= 0; --i) {
          length += static_cast<std::size_t>(static_cast<unsigned char>(data[4 + i]))
                    << (8 * i);
        }
      }
      (void)inner().WriteAt(fd, data.substr(0, length / 2), offset, path);
      CrashPlan::Crash(op, "torn");
    }
    absl::Status status = inner().WriteAt(fd, data, offset, path);
    plan_.After(op, call);
    return status;
  }

 private:
  CrashPlan& plan_;
};

}  // namespace

int main(int argc, char** argv) {
  sigset_t signals;
  sigemptyset(&signals);
  for (int sig : {SIGTERM, SIGINT, SIGUSR1, SIGUSR2}) sigaddset(&signals, sig);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);  // Before any thread starts.

  CLI::App app{"devlet kubelet plugin test server (simulated devices, claims from files)"};
  std::string driver_name = "gpu.devlet.test";
  std::string node_name;
  std::string registrar_dir = std::string(devlet::dra_kubelet::kDefaultRegistrarDir);
  std::string plugins_dir = std::string(devlet::dra_kubelet::kDefaultPluginsDir);
  std::string cdi_root = "/var/run/cdi";
  std::string claims_dir;
  std::string pod_uid;
  int devices = 4;
  bool enable_metadata = false;
  bool health = true;
  int health_resend_ms = 20000;
  devlet::flags::AddFlag(app, "--driver-name", driver_name, "DRA driver name");
  devlet::flags::AddFlag(app, "--node-name", node_name, "Node name; also the pool name");
  devlet::flags::AddFlag(app, "--kubelet-registrar-directory-path", registrar_dir,
                         "Kubelet plugin registry directory");
  devlet::flags::AddFlag(app, "--kubelet-plugins-directory-path", plugins_dir,
                         "Kubelet plugins directory; the data directory is <this>/<driver>");
  devlet::flags::AddFlag(app, "--cdi-root", cdi_root, "Directory for transient CDI specs");
  devlet::flags::AddFlag(app, "--claims-dir", claims_dir, "Directory of ResourceClaim JSON files")
      ->required();
  devlet::flags::AddFlag(app, "--pod-uid", pod_uid, "Pod UID: rolling-update socket names");
  devlet::flags::AddFlag(app, "--devices", devices, "Number of simulated GPUs (gpu-0 ...)");
  devlet::flags::AddFlag(app, "--enable-device-metadata", enable_metadata,
                         "Write KEP-5304 device-metadata files");
  devlet::flags::AddFlag(app, "--health", health, "Serve the resource health services");
  devlet::flags::AddFlag(app, "--health-resend-interval-ms", health_resend_ms,
                         "Re-send health at least this often");
  std::string crash_at;
  devlet::flags::AddFlag(app, "--crash-at", crash_at,
                         "Crash injection: SIGKILL at <op>:<n>[:after|:torn], op one of "
                         "checkpoint.put, checkpoint.delete, cdi.write, cdi.remove, "
                         "backend.prepare, backend.unprepare, journal.write, journal.clear, "
                         "snapshot.rename");
  std::uint64_t journal_bytes = devlet::state::StoreOptions{}.journal_bytes;
  std::uint64_t compact_after_bytes = 0;
  devlet::flags::AddFlag(app, "--journal-bytes", journal_bytes,
                         "Size of the checkpoint journal (0: none)");
  devlet::flags::AddFlag(app, "--compact-after-bytes", compact_after_bytes,
                         "Compact the journal past this many bytes, in the call "
                         "that crossed it (0: the default, in the background)");
  if (std::optional<int> exit_code = devlet::flags::ParseCommandLine(app, argc, argv)) {
    return *exit_code;
  }
  devlet::log::Logger logger;
  if (node_name.empty()) node_name = "node-1";
  if (pod_uid.empty()) {
    if (const char* env = std::getenv("POD_UID")) pod_uid = env;
  }

  const std::string data_dir = plugins_dir + "/" + driver_name;
  CrashPlan plan(crash_at);
  CrashingFileSystem crashing_fs(plan);
  SimulatedBackend backend(node_name, SimulatedBackend::Gpus(devices));
  ManifestClaimSource claims(claims_dir);
  CdiSpecWriter cdi(cdi_root);
  devlet::state::StoreOptions store_options{.dir = data_dir, .fs = &crashing_fs};
  store_options.journal_bytes = journal_bytes;
  if (compact_after_bytes > 0) {
    store_options.compact_after_bytes = compact_after_bytes;
    store_options.background_compaction = false;
  }
  absl::StatusOr<std::unique_ptr<StateClaimRecordStore>> checkpoint =
      StateClaimRecordStore::Open(store_options, driver_name, cdi_root);
  if (!checkpoint.ok()) {
    logger.Error(checkpoint.status(), "Cannot open the checkpoint");
    return 1;
  }
  PreparerOptions preparer_options;
  preparer_options.driver_name = driver_name;
  preparer_options.node_name = node_name;
  preparer_options.plugin_data_dir = data_dir;
  preparer_options.enable_device_metadata = enable_metadata;
  if (!pod_uid.empty()) preparer_options.serialize_lock_path = data_dir + "/serialize.lock";
  CrashingStore crashing_store(**checkpoint, plan);
  CrashingCdi crashing_cdi(cdi, plan);
  CrashingBackend crashing_backend(backend, plan);
  ClaimPreparer preparer(preparer_options, claims, crashing_backend, crashing_cdi, crashing_store);

  PluginOptions options;
  options.driver_name = driver_name;
  options.registrar_dir = registrar_dir;
  options.plugin_data_dir = data_dir;
  options.pod_uid = pod_uid;
  options.health = health;
  options.health_resend_interval = std::chrono::milliseconds(health_resend_ms);
  absl::StatusOr<std::unique_ptr<KubeletPlugin>> plugin =
      KubeletPlugin::Start(options, preparer, &backend);
  if (!plugin.ok()) {
    logger.Error(plugin.status(), "Cannot start the kubelet plugin");
    return 1;
  }
  while (true) {
    int sig = 0;
    if (sigwait(&signals, &sig) != 0) continue;
    if (sig == SIGUSR1) {
      backend.SetHealth("gpu-0", HealthStatus::kUnhealthy, "simulated XID 79: GPU has fallen off the bus");
      continue;
    }
    if (sig == SIGUSR2) {
      for (int i = 0; i < devices; ++i) {
        backend.SetHealth("gpu-" + std::to_string(i), HealthStatus::kHealthy, "");
      }
      continue;
    }
    logger.Info("Stopping on signal", "signal", sig);
    (*plugin)->Stop();
    return 0;
  }
}
