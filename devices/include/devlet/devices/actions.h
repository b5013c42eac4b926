// File: devlet/devices/actions.h
//
// Reversible preparation actions on the host, each step announced to a journal before it is done,
// so that the node state checkpoint always knows how to undo what may have happened:
//
//   Preparer preparer(sysfs, [&](const JournalEntry& entry) { return checkpoint.Record(entry); });
//   DEVLET_ASSIGN_OR_RETURN(std::vector<ActionRecord> done, preparer.Prepare(device));
//   ...                                         // store `done` with the claim
//   DEVLET_RETURN_IF_ERROR(preparer.Unprepare(done));
//
// Actions:
//   - vfio-pci binding: driver_override=vfio-pci, unbind from the current driver, drivers_probe,
//     verify; undone by unbinding from vfio-pci, restoring driver_override and re-probing the
//     original driver (bind directly if probing does not bring it back);
//   - SR-IOV VF creation: sriov_numvfs=N on a PF that has no VFs yet (with sriov_drivers_autoprobe=0
//     first when the VFs go to vfio-pci), waiting for the virtfn links; undone by restoring the
//     count (and autoprobe) recorded before (never changes a non-zero count to another: that
//     destroys VFs in use). The VFs serve every VF device of the PF, so with an SriovLedger they
//     are removed when the last of those devices is unprepared, and only if devlet created them;
//   - mediated devices: a UUID written to mdev_supported_types/<type>/create on the parent
//     function; undone by writing 1 to bus/mdev/devices/<uuid>/remove;
//   - administrator commands (init, then cleanup on unprepare or when init fails) run confined by
//     RunCommand.
// A failed action leaves the host as it found it (completed steps are rolled back) and returns an
// error written for a person.
//
// Partitions (for example MIG instances) have no generic kernel interface: the profile's init and
// cleanup commands create and remove them, with DEVLET_PARTITION (index), DEVLET_PARTITIONS (count)
// and DEVLET_PARENT_DEVICE in their environment.
//
// Thread-safe: sysfs actions are serialised inside the Preparer; commands run concurrently.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "devlet/devices/command.h"
#include "devlet/devices/dra_device.h"
#include "devlet/devices/sysfs.h"

namespace devlet::devices {

// ActionKind names an action.
enum class ActionKind { kVfioBind, kSriovNumVfs, kCommand, kMdev };

// ActionKindName returns "vfio-bind", "sriov-numvfs", "command" or "mdev".
std::string_view ActionKindName(ActionKind kind);

// ActionSurvivesReboot reports whether what an action does to the host outlives a reboot (power
// cut, kernel crash), which decides whether the DRA kubelet plugin must sync its PrepareStarted
// record before the action (dra_kubelet::DeviceBackend::PreparedStateSurvivesReboot).
// vfio-pci binding (driver_override, the bound driver), SR-IOV VFs (sriov_numvfs,
// sriov_drivers_autoprobe) and mediated devices (mdev_supported_types/<type>/create) live in
// the kernel's memory and are gone after a boot: false. An administrator's command (and the
// partitions a profile's init command creates) may write anything, anywhere: true.
bool ActionSurvivesReboot(ActionKind kind);

// ActionRecord is everything needed to undo one action, also after a crash and restart; the
// checkpoint stores it.
struct ActionRecord {
  ActionKind kind = ActionKind::kVfioBind;
  // PCI address (vfio: the function; sriov: the PF; mdev: the parent) or DRA device (command).
  std::string device;
  bool noop = false;   // the host was already in the wanted state: undo does nothing
  // kVfioBind
  std::string original_driver;    // "" when the function was unbound
  std::string original_override;  // driver_override before ("" when unset)
  // kSriovNumVfs
  int previous_num_vfs = 0;
  int num_vfs = 0;
  int previous_autoprobe = -1;  // sriov_drivers_autoprobe before; -1 when left alone
  // The DRA device whose preparation needed the VFs (the SriovLedger's holder); set by Prepare.
  std::string holder;
  // kMdev
  std::string mdev_type;  // "nvidia-63"
  std::string mdev_uuid;  // lowercase 8-4-4-4-12
  // kCommand
  std::optional<CommandLine> cleanup;
  std::map<std::string, std::string> env;  // the init command's extra environment, for cleanup
  bool operator==(const ActionRecord&) const = default;
};

// JournalEntry announces one step before it is done (kDo) or undone (kUndo). `action` is the
// record as it will be returned, so a crash right after this step can be undone from it.
struct JournalEntry {
  enum class Phase { kDo, kUndo };
  Phase phase = Phase::kDo;
  ActionRecord action;
  std::string step;  // for people: "write vfio-pci to bus/pci/devices/0000:18:00.0/driver_override"
};

// Journal receives every step before it happens. An error stops the action: the step is not done
// and the steps before it are rolled back.
using Journal = std::function<absl::Status(const JournalEntry&)>;

// SriovLedger remembers which PFs' VFs devlet created (the creating ActionRecord, with the count
// and autoprobe setting found before) and which prepared DRA devices use them, so that the VFs
// are removed when the last of those devices is unprepared, also across restarts of devlet: the
// ledger is a small text file (in the node's state directory) rewritten atomically on each
// change. VFs that existed before devlet touched the PF are never removed. Thread-safe.
class SriovLedger {
 public:
  // Entry is one PF's VFs created by devlet.
  struct Entry {
    ActionRecord creation;            // kSriovNumVfs, not noop
    std::set<std::string> holders;    // DRA device names
    bool operator==(const Entry&) const = default;
  };

  // Open loads the ledger from `path` (a missing file is an empty ledger; "" keeps it in memory).
  // InvalidArgument, naming the file and line, when the file does not parse.
  static absl::StatusOr<std::unique_ptr<SriovLedger>> Open(std::string path);

  // Hold records that `holder` uses VFs of the PF `record.device`. A record that created the VFs
  // (not noop) starts the PF's entry; a noop record joins an existing entry and is ignored when
  // there is none (the VFs were not devlet's). Persisted before returning.
  absl::Status Hold(const ActionRecord& record, const std::string& holder);

  // Release drops `holder` from the PF's entry. When no holder is left the entry is removed and
  // its creation record returned: the caller undoes it (removes the VFs). nullopt otherwise,
  // also when the PF has no entry.
  absl::StatusOr<std::optional<ActionRecord>> Release(const std::string& pf,
                                                      const std::string& holder);

  // Entries returns the current entries by PF address.
  std::map<std::string, Entry> Entries() const;

 private:
  explicit SriovLedger(std::string path) : path_(std::move(path)) {}
  absl::Status SaveLocked() const;

  std::string path_;
  mutable std::mutex mu_;
  std::map<std::string, Entry> entries_;
};

// PreparerOptions tunes waiting and helper commands.
struct PreparerOptions {
  std::chrono::milliseconds vf_wait_timeout{10000};  // for virtfn links after sriov_numvfs
  std::chrono::milliseconds poll_interval{20};
  SeccompPolicy seccomp;  // for init/cleanup commands
  // The directory that plays `/proc` (not owned): before unbinding a GPU from `nvidia`, its
  // `driver/nvidia/gpus/<bdf>/unbindLock` is taken (write 1, read back 1), as NVIDIA's own driver
  // does; nullptr skips that.
  Sysfs* procfs = nullptr;
  // Where VF ownership is kept (not owned). nullptr: VF devices' SR-IOV records are never undone
  // by Prepare's rollback or Unprepare (the VFs stay until an explicit Undo).
  SriovLedger* sriov_ledger = nullptr;
};

// Preparer performs actions through a Sysfs (the real one, or a fake kernel in tests).
class Preparer {
 public:
  Preparer(Sysfs& sysfs, Journal journal, PreparerOptions options = {});

  // BindVfio binds a PCI function to vfio-pci. FailedPrecondition when the function has no IOMMU
  // group, vfio-pci is not loaded, or another function of its IOMMU group is bound to a host
  // driver; NotFound when the function is gone.
  absl::StatusOr<ActionRecord> BindVfio(std::string_view pci_address);

  // EnsureNumVfs makes the PF have at least `num_vfs` VFs, creating them when it has none. With
  // `autoprobe` false, sriov_drivers_autoprobe is set to 0 first so that the new VFs stay unbound
  // (for vfio-pci); undo restores it. InvalidArgument above sriov_totalvfs; FailedPrecondition
  // when the PF has fewer, non-zero VFs.
  absl::StatusOr<ActionRecord> EnsureNumVfs(std::string_view pf_address, int num_vfs,
                                            bool autoprobe = true);

  // CreateMdev creates a mediated device of `type` on the PCI function `parent_address` with
  // `uuid` (a fresh random one when empty) and waits for bus/mdev/devices/<uuid>. NotFound when
  // the function is gone; FailedPrecondition when it offers no such type (the message lists the
  // types it offers) or has no instance left; InvalidArgument for a malformed UUID.
  absl::StatusOr<ActionRecord> CreateMdev(std::string_view parent_address, std::string_view type,
                                          std::string uuid = "");

  // VfAddress returns the address of VF `index` of a PF (from its virtfn<index> link).
  absl::StatusOr<std::string> VfAddress(std::string_view pf_address, int index) const;

  // RunInit runs an init command for a device; when it fails, `cleanup` runs (best effort) and the
  // error says how init ended. `env` is added to the command's environment.
  absl::StatusOr<ActionRecord> RunInit(std::string_view device, const CommandLine& init,
                                       const std::optional<CommandLine>& cleanup,
                                       const std::map<std::string, std::string>& env = {});

  // Undo reverses one action. Idempotent: undoing an already undone action, or one whose device
  // has disappeared, succeeds.
  absl::Status Undo(const ActionRecord& record);

  // Prepare performs a DRA device's Preparation in order: SR-IOV VFs (for VF devices: the PF from
  // preparation.sriov_pf, the VF index from the `vfIndex` attribute; held in the SriovLedger
  // under the device's name), vfio-pci binding, mdev creation (on the VF or the device), init
  // command (with DEVLET_DEVICE, DEVLET_PCI_ADDRESS and, for partitions, DEVLET_PARTITION,
  // DEVLET_PARTITIONS and DEVLET_PARENT_DEVICE in its environment). On failure the actions
  // already done are undone. Returns the records to store with the claim.
  absl::StatusOr<std::vector<ActionRecord>> Prepare(const DraDevice& device);

  // Reapply sets up again, after a reboot, what `records` (the result of Prepare(device) in an
  // earlier boot) did in the kernel, in their order: the PF's VFs (held again for the device),
  // the vfio-pci binding, the mediated device with its recorded UUID. Command records are kept
  // as they are (what an administrator's command did is not known to be gone). An action whose
  // state is still in place keeps its old record (its undo data stays the first boot's), so
  // Reapply in the same boot changes nothing. On failure what Reapply redid is undone and the
  // error says which step failed. Returns the records to store in place of `records`.
  absl::StatusOr<std::vector<ActionRecord>> Reapply(const DraDevice& device,
                                                    const std::vector<ActionRecord>& records);

  // Unprepare undoes records in reverse order, continuing past errors; returns the first error.
  // SR-IOV records release their holder in the SriovLedger; the VFs are removed (the PF restored
  // to the count and autoprobe setting recorded before devlet created them) when that was the
  // last holder. Prepare holds the ledger entry before it writes sriov_numvfs, so a crash between
  // the two leaves an entry whose release restores the PF. Without a ledger, or for records
  // without a holder, SR-IOV records are skipped (call Undo once no VF of the PF is prepared).
  absl::Status Unprepare(const std::vector<ActionRecord>& records);

 private:
  absl::Status Step(JournalEntry::Phase phase, const ActionRecord& record, std::string step);
  absl::Status Write(JournalEntry::Phase phase, const ActionRecord& record, const std::string& path,
                     const std::string& value);
  absl::Status UndoVfio(const ActionRecord& record);
  absl::Status UndoNumVfs(const ActionRecord& record);
  absl::Status UndoMdev(const ActionRecord& record);
  absl::Status ReleaseVfs(const ActionRecord& record);
  absl::StatusOr<ActionRecord> EnsureNumVfsFor(std::string_view pf_address, int num_vfs,
                                               bool autoprobe, const std::string& holder);
  absl::Status RunCleanup(const std::string& device, const CommandLine& cleanup,
                          const std::map<std::string, std::string>& env);

  Sysfs& sysfs_;
  Journal journal_;
  PreparerOptions options_;
  std::recursive_mutex sysfs_mutex_;  // serialises sysfs actions (rollback re-enters)
};

}  // namespace devlet::devices
