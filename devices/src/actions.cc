#include "devlet/devices/actions.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cctype>
#include <cstdio>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>

#include "devlet/common/files.h"
#include "devlet/common/status.h"

namespace devlet::devices {
namespace {

std::string Dev(std::string_view address) { return "bus/pci/devices/" + std::string(address); }

std::string CurrentDriver(const Sysfs& sysfs, std::string_view address) {
  auto name = LinkBaseName(sysfs, Dev(address) + "/driver");
  return name.ok() ? *name : "";
}

std::string CurrentOverride(const Sysfs& sysfs, std::string_view address) {
  auto value = ReadTrimmed(sysfs, Dev(address) + "/driver_override");
  if (!value.ok() || *value == "(null)") return "";
  return *value;
}

// A fresh random (version 4) UUID, lowercase, as mdev `create` wants it.
std::string NewUuid() {
  std::random_device random;
  unsigned char bytes[16];
  for (int i = 0; i < 16; i += 4) {
    unsigned int word = random();
    for (int j = 0; j < 4; ++j) bytes[i + j] = static_cast<unsigned char>(word >> (8 * j));
  }
  bytes[6] = static_cast<unsigned char>((bytes[6] & 0x0f) | 0x40);
  bytes[8] = static_cast<unsigned char>((bytes[8] & 0x3f) | 0x80);
  char out[37];
  std::snprintf(out, sizeof(out),
                "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", bytes[0],
                bytes[1], bytes[2], bytes[3], bytes[4], bytes[5], bytes[6], bytes[7], bytes[8],
                bytes[9], bytes[10], bytes[11], bytes[12], bytes[13], bytes[14], bytes[15]);
  return out;
}

// Lowercases a UUID in 8-4-4-4-12 hex form; nullopt when it is not one.
std::optional<std::string> NormalizeUuid(std::string_view uuid) {
  if (uuid.size() != 36) return std::nullopt;
  std::string out;
  for (size_t i = 0; i < uuid.size(); ++i) {
    const char c = uuid[i];
    if (i == 8 || i == 13 || i == 18 || i == 23) {
      if (c != '-') return std::nullopt;
      out.push_back(c);
    } else if (std::isxdigit(static_cast<unsigned char>(c))) {
      out.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
    } else {
      return std::nullopt;
    }
  }
  return out;
}

}  // namespace

// ---- SriovLedger ----------------------------------------------------------------------------
//
// File format, one PF per line (device names are DNS labels, addresses have no spaces):
//   pf=0000:1a:00.0 numVfs=2 previousNumVfs=0 previousAutoprobe=-1 holders=vf-0-vf-0,vf-0-vf-1

absl::StatusOr<std::unique_ptr<SriovLedger>> SriovLedger::Open(std::string path) {
  std::unique_ptr<SriovLedger> ledger(new SriovLedger(path));
  if (path.empty()) return ledger;
  std::ifstream in(path);
  if (!in) {
    if (errno == ENOENT) return ledger;
    return ErrnoToStatus(errno, "opening SR-IOV ledger " + path);
  }
  std::string line;
  int number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (line.empty() || line[0] == '#') continue;
    const std::string where = "SR-IOV ledger " + path + " line " + std::to_string(number);
    std::istringstream fields(line);
    std::string field;
    std::map<std::string, std::string> values;
    while (fields >> field) {
      size_t eq = field.find('=');
      if (eq == std::string::npos) return InvalidArgument(where + ": \"" + field + "\" is not key=value");
      values[field.substr(0, eq)] = field.substr(eq + 1);
    }
    Entry entry;
    entry.creation.kind = ActionKind::kSriovNumVfs;
    entry.creation.device = values["pf"];
    if (entry.creation.device.empty()) return InvalidArgument(where + ": pf is missing");
    try {
      entry.creation.num_vfs = std::stoi(values.at("numVfs"));
      entry.creation.previous_num_vfs = std::stoi(values.at("previousNumVfs"));
      entry.creation.previous_autoprobe = std::stoi(values.at("previousAutoprobe"));
    } catch (...) {
      return InvalidArgument(where + ": numVfs, previousNumVfs and previousAutoprobe must be "
                                     "integers");
    }
    std::istringstream holders(values["holders"]);
    std::string holder;
    while (std::getline(holders, holder, ',')) {
      if (!holder.empty()) entry.holders.insert(holder);
    }
    ledger->entries_[entry.creation.device] = std::move(entry);
  }
  return ledger;
}

absl::Status SriovLedger::SaveLocked() const {
  if (path_.empty()) return absl::OkStatus();
  std::string text = "# devlet: SR-IOV VFs created by devlet and the prepared devices using them\n";
  for (const auto& [pf, entry] : entries_) {
    std::string holders;
    for (const std::string& holder : entry.holders) holders += (holders.empty() ? "" : ",") + holder;
    text += "pf=" + pf + " numVfs=" + std::to_string(entry.creation.num_vfs) +
            " previousNumVfs=" + std::to_string(entry.creation.previous_num_vfs) +
            " previousAutoprobe=" + std::to_string(entry.creation.previous_autoprobe) +
            " holders=" + holders + "\n";
  }
  // common/'s atomic writer: a crash leaves the old ledger or the new one.
  return WithContext(WriteFileAtomically(path_, text, 0600), "writing SR-IOV ledger");
}

absl::Status SriovLedger::Hold(const ActionRecord& record, const std::string& holder) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(record.device);
  if (it == entries_.end()) {
    if (record.noop) return absl::OkStatus();  // VFs devlet did not create: never removed
    Entry entry{.creation = record};
    entry.creation.holder.clear();
    it = entries_.emplace(record.device, std::move(entry)).first;
  }
  if (!it->second.holders.insert(holder).second) return absl::OkStatus();
  absl::Status status = SaveLocked();
  if (!status.ok()) {
    it->second.holders.erase(holder);
    if (it->second.holders.empty()) entries_.erase(it);
  }
  return status;
}

absl::StatusOr<std::optional<ActionRecord>> SriovLedger::Release(const std::string& pf,
                                                                 const std::string& holder) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(pf);
  if (it == entries_.end() || !it->second.holders.contains(holder)) {
    return std::optional<ActionRecord>();
  }
  Entry before = it->second;
  it->second.holders.erase(holder);
  std::optional<ActionRecord> last;
  if (it->second.holders.empty()) {
    last = it->second.creation;
    entries_.erase(it);
  }
  absl::Status status = SaveLocked();
  if (!status.ok()) {
    entries_[pf] = std::move(before);
    return status;
  }
  return last;
}

std::map<std::string, SriovLedger::Entry> SriovLedger::Entries() const {
  std::lock_guard<std::mutex> lock(mu_);
  return entries_;
}

// ---- Preparer -------------------------------------------------------------------------------

std::string_view ActionKindName(ActionKind kind) {
  switch (kind) {
    case ActionKind::kVfioBind: return "vfio-bind";
    case ActionKind::kSriovNumVfs: return "sriov-numvfs";
    case ActionKind::kCommand: return "command";
    case ActionKind::kMdev: return "mdev";
  }
  return "unknown";
}

bool ActionSurvivesReboot(ActionKind kind) {
  switch (kind) {
    case ActionKind::kVfioBind:     // sysfs driver_override and the driver binding
    case ActionKind::kSriovNumVfs:  // VFs exist until the PF is reset or the kernel reboots
    case ActionKind::kMdev:         // sysfs-created mdevs are not persistent (mdevctl's are)
      return false;
    case ActionKind::kCommand:
      return true;
  }
  return true;  // Unknown: the conservative answer.
}

Preparer::Preparer(Sysfs& sysfs, Journal journal, PreparerOptions options)
    : sysfs_(sysfs), journal_(std::move(journal)), options_(std::move(options)) {}

absl::Status Preparer::Step(JournalEntry::Phase phase, const ActionRecord& record,
                            std::string step) {
  if (!journal_) return absl::OkStatus();
  absl::Status status = journal_(JournalEntry{.phase = phase, .action = record, .step = step});
  if (!status.ok()) return WithContext(status, "recording step \"" + step + "\"");
  return absl::OkStatus();
}

absl::Status Preparer::Write(JournalEntry::Phase phase, const ActionRecord& record,
                             const std::string& path, const std::string& value) {
  std::string shown = value == "\n" ? "an empty line" : value;
  DEVLET_RETURN_IF_ERROR(Step(phase, record, "write " + shown + " to " + path));
  return sysfs_.WriteFile(path, value);
}

absl::StatusOr<ActionRecord> Preparer::BindVfio(std::string_view pci_address) {
  std::lock_guard<std::recursive_mutex> lock(sysfs_mutex_);
  const std::string address(pci_address);
  const std::string dev = Dev(address);
  const std::string what = "binding " + address + " to vfio-pci";
  if (!sysfs_.Exists(dev)) return NotFound(what + ": the PCI device is gone");
  ActionRecord record{.kind = ActionKind::kVfioBind, .device = address};
  record.original_driver = CurrentDriver(sysfs_, address);
  record.original_override = CurrentOverride(sysfs_, address);
  if (record.original_driver == "vfio-pci") {
    record.noop = true;
    return record;
  }
  auto group = LinkBaseName(sysfs_, dev + "/iommu_group");
  if (!group.ok()) {
    return FailedPrecondition(what + ": the device has no IOMMU group; enable the IOMMU "
                                     "(intel_iommu=on or amd_iommu=on) to pass it through");
  }
  if (!sysfs_.Exists("bus/pci/drivers/vfio-pci")) {
    return FailedPrecondition(what + ": the vfio-pci driver is not loaded (modprobe vfio-pci)");
  }
  auto members = sysfs_.ListDir("kernel/iommu_groups/" + *group + "/devices");
  if (members.ok()) {
    for (const std::string& member : *members) {
      if (member == address) continue;
      std::string driver = CurrentDriver(sysfs_, member);
      if (!driver.empty() && driver != "vfio-pci" && driver != "pcieport") {
        return FailedPrecondition(what + ": " + member + " in the same IOMMU group " + *group +
                                  " is bound to " + driver +
                                  "; every device of the group must be passed through together");
      }
    }
  }
  // Each step, and how to roll back what was done if a later one fails.
  auto rollback = [&](const absl::Status& cause) -> absl::Status {
    absl::Status undo = UndoVfio(record);
    absl::Status out = WithContext(cause, what);
    if (!undo.ok()) {
      return Internal(Message(out) + "; rolling back also failed, the device may be left unbound: " +
                      Message(undo));
    }
    return out;
  };
  const std::string unbind_lock = "driver/nvidia/gpus/" + address + "/unbindLock";
  if (record.original_driver == "nvidia" && options_.procfs != nullptr &&
      options_.procfs->Exists(unbind_lock)) {
    DEVLET_RETURN_IF_ERROR(WithContext(
        Step(JournalEntry::Phase::kDo, record, "write 1 to /proc/" + unbind_lock), what));
    DEVLET_RETURN_IF_ERROR(WithContext(options_.procfs->WriteFile(unbind_lock, "1"), what));
    if (ReadTrimmed(*options_.procfs, unbind_lock).value_or("") != "1") {
      return FailedPrecondition(what + ": the GPU is in use (NVIDIA's unbindLock was not granted); "
                                       "stop the host processes that hold it open");
    }
  }
  absl::Status status = Write(JournalEntry::Phase::kDo, record, dev + "/driver_override", "vfio-pci");
  if (!status.ok()) return WithContext(status, what);
  if (!record.original_driver.empty()) {
    status = Write(JournalEntry::Phase::kDo, record,
                   "bus/pci/drivers/" + record.original_driver + "/unbind", address);
    if (!status.ok()) return rollback(status);
  }
  status = Write(JournalEntry::Phase::kDo, record, "bus/pci/drivers_probe", address);
  if (!status.ok()) return rollback(status);
  std::string now = CurrentDriver(sysfs_, address);
  if (now != "vfio-pci") {
    return rollback(FailedPrecondition("after drivers_probe the device is bound to \"" + now +
                                       "\", not vfio-pci"));
  }
  return record;
}

absl::Status Preparer::UndoVfio(const ActionRecord& record) {
  std::lock_guard<std::recursive_mutex> lock(sysfs_mutex_);
  if (record.noop) return absl::OkStatus();
  const std::string& address = record.device;
  const std::string dev = Dev(address);
  if (!sysfs_.Exists(dev)) return absl::OkStatus();  // removed: nothing left to restore
  const std::string what = "restoring " + address + " to " +
                           (record.original_driver.empty() ? std::string("no driver")
                                                           : record.original_driver);
  const JournalEntry::Phase undo = JournalEntry::Phase::kUndo;
  if (CurrentDriver(sysfs_, address) == "vfio-pci") {
    DEVLET_RETURN_IF_ERROR(WithContext(
        Write(undo, record, "bus/pci/drivers/vfio-pci/unbind", address), what));
  }
  if (CurrentOverride(sysfs_, address) != record.original_override) {
    DEVLET_RETURN_IF_ERROR(WithContext(
        Write(undo, record, dev + "/driver_override",
              record.original_override.empty() ? "\n" : record.original_override),
        what));
  }
  if (record.original_driver.empty()) return absl::OkStatus();
  // Re-probe; if that fails or picks another driver, bind the original driver directly.
  absl::Status probe = absl::OkStatus();
  if (CurrentDriver(sysfs_, address).empty()) {
    probe = Write(undo, record, "bus/pci/drivers_probe", address);
  }
  absl::Status bind = absl::OkStatus();
  if (CurrentDriver(sysfs_, address).empty() &&
      sysfs_.Exists("bus/pci/drivers/" + record.original_driver + "/bind")) {
    bind = Write(undo, record, "bus/pci/drivers/" + record.original_driver + "/bind", address);
  }
  std::string now = CurrentDriver(sysfs_, address);
  if (now != record.original_driver) {
    std::string message = what + ": the device is bound to \"" + now + "\" afterwards";
    if (!probe.ok()) message += "; " + Message(probe);
    if (!bind.ok()) message += "; " + Message(bind);
    return FailedPrecondition(message);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> Preparer::VfAddress(std::string_view pf_address, int index) const {
  auto vf = LinkBaseName(sysfs_, Dev(pf_address) + "/virtfn" + std::to_string(index));
  if (!vf.ok()) {
    return NotFound("VF " + std::to_string(index) + " of " + std::string(pf_address) +
                    " does not exist");
  }
  return *vf;
}

absl::StatusOr<ActionRecord> Preparer::EnsureNumVfs(std::string_view pf_address, int num_vfs,
                                                    bool autoprobe) {
  return EnsureNumVfsFor(pf_address, num_vfs, autoprobe, "");
}

absl::StatusOr<ActionRecord> Preparer::EnsureNumVfsFor(std::string_view pf_address, int num_vfs,
                                                       bool autoprobe, const std::string& holder) {
  std::lock_guard<std::recursive_mutex> lock(sysfs_mutex_);
  const std::string pf(pf_address);
  const std::string dev = Dev(pf);
  const std::string what = "creating " + std::to_string(num_vfs) + " SR-IOV VFs on " + pf;
  if (!sysfs_.Exists(dev)) return NotFound(what + ": the PCI device is gone");
  auto total = ReadInt(sysfs_, dev + "/sriov_totalvfs");
  if (!total.ok()) return FailedPrecondition(what + ": the device is not SR-IOV capable");
  if (num_vfs < 1 || num_vfs > *total) {
    return InvalidArgument(what + ": the device supports 1 to " + std::to_string(*total) + " VFs");
  }
  auto current_or = ReadInt(sysfs_, dev + "/sriov_numvfs");
  if (!current_or.ok()) return WithContext(current_or.status(), what);
  const int current = static_cast<int>(*current_or);
  ActionRecord record{.kind = ActionKind::kSriovNumVfs, .device = pf};
  record.previous_num_vfs = current;
  record.num_vfs = num_vfs;
  record.holder = holder;
  SriovLedger* ledger = holder.empty() ? nullptr : options_.sriov_ledger;
  if (current >= num_vfs) {
    record.noop = true;
    // Join devlet's earlier creation, if it was devlet's, so that the last user removes the VFs.
    if (ledger != nullptr) DEVLET_RETURN_IF_ERROR(WithContext(ledger->Hold(record, holder), what));
    return record;
  }
  if (current != 0) {
    return FailedPrecondition(what + ": it already has " + std::to_string(current) +
                              " VFs, and changing a non-zero count would destroy VFs that may be "
                              "in use; set sriov_numvfs to 0 first");
  }
  // The ledger learns of the VFs before they exist: a crash after the write still finds them.
  if (ledger != nullptr) {
    auto autoprobe_now = ReadInt(sysfs_, dev + "/sriov_drivers_autoprobe");
    ActionRecord planned = record;
    if (!autoprobe && autoprobe_now.ok() && *autoprobe_now != 0) {
      planned.previous_autoprobe = static_cast<int>(*autoprobe_now);
    }
    DEVLET_RETURN_IF_ERROR(WithContext(ledger->Hold(planned, holder), what));
  }
  auto drop_hold = [&]() {
    if (ledger != nullptr) (void)ledger->Release(pf, holder);
  };
  // Keep new VFs unbound when they go to vfio-pci anyway (no netdevs created and torn down).
  const std::string autoprobe_path = dev + "/sriov_drivers_autoprobe";
  if (!autoprobe && sysfs_.Exists(autoprobe_path)) {
    auto previous = ReadInt(sysfs_, autoprobe_path);
    if (previous.ok() && *previous != 0) {
      record.previous_autoprobe = static_cast<int>(*previous);
      absl::Status status = Write(JournalEntry::Phase::kDo, record, autoprobe_path, "0");
      if (!status.ok()) {
        drop_hold();
        return WithContext(status, what);
      }
    }
  }
  absl::Status status =
      Write(JournalEntry::Phase::kDo, record, dev + "/sriov_numvfs", std::to_string(num_vfs));
  if (!status.ok()) {
    absl::Status undo = UndoNumVfs(record);
    if (undo.ok()) drop_hold();
    status = WithContext(status, what);
    if (!undo.ok()) return Internal(Message(status) + "; rolling back: " + Message(undo));
    return status;
  }
  const auto deadline = std::chrono::steady_clock::now() + options_.vf_wait_timeout;
  while (true) {
    bool all = true;
    for (int i = 0; i < num_vfs && all; ++i) {
      all = sysfs_.Exists(dev + "/virtfn" + std::to_string(i));
    }
    if (all) return record;
    if (std::chrono::steady_clock::now() >= deadline) break;
    std::this_thread::sleep_for(options_.poll_interval);
  }
  absl::Status undo = UndoNumVfs(record);
  if (undo.ok()) drop_hold();
  std::string message = what + ": the VFs did not appear within " +
                        std::to_string(options_.vf_wait_timeout.count()) + " ms";
  if (!undo.ok()) message += "; removing them again failed: " + Message(undo);
  return DeadlineExceeded(message);
}

absl::Status Preparer::UndoNumVfs(const ActionRecord& record) {
  std::lock_guard<std::recursive_mutex> lock(sysfs_mutex_);
  if (record.noop) return absl::OkStatus();
  const std::string dev = Dev(record.device);
  if (!sysfs_.Exists(dev)) return absl::OkStatus();
  auto current = ReadInt(sysfs_, dev + "/sriov_numvfs");
  const std::string what = "removing the SR-IOV VFs of " + record.device;
  if (!(current.ok() && *current == record.previous_num_vfs)) {
    if (current.ok() && *current != 0) {
      DEVLET_RETURN_IF_ERROR(WithContext(
          Write(JournalEntry::Phase::kUndo, record, dev + "/sriov_numvfs", "0"), what));
    }
    if (record.previous_num_vfs != 0) {
      DEVLET_RETURN_IF_ERROR(WithContext(Write(JournalEntry::Phase::kUndo, record,
                                               dev + "/sriov_numvfs",
                                               std::to_string(record.previous_num_vfs)),
                                         what));
    }
  }
  if (record.previous_autoprobe >= 0) {
    auto autoprobe = ReadInt(sysfs_, dev + "/sriov_drivers_autoprobe");
    if (!autoprobe.ok() || *autoprobe != record.previous_autoprobe) {
      DEVLET_RETURN_IF_ERROR(WithContext(
          Write(JournalEntry::Phase::kUndo, record, dev + "/sriov_drivers_autoprobe",
                std::to_string(record.previous_autoprobe)),
          what));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<ActionRecord> Preparer::CreateMdev(std::string_view parent_address,
                                                  std::string_view type_view, std::string uuid) {
  std::lock_guard<std::recursive_mutex> lock(sysfs_mutex_);
  const std::string parent(parent_address);
  const std::string type(type_view);
  const std::string dev = Dev(parent);
  const std::string what = "creating a " + type + " mediated device on " + parent;
  if (!sysfs_.Exists(dev)) return NotFound(what + ": the PCI device is gone");
  if (type.empty() || type.find('/') != std::string::npos || type == "." || type == "..") {
    return InvalidArgument(what + ": \"" + type + "\" is not an mdev type name");
  }
  auto types = sysfs_.ListDir(dev + "/mdev_supported_types");
  if (!types.ok() || types->empty()) {
    return FailedPrecondition(what + ": the device offers no mediated device types (is its "
                                     "vGPU/mdev host driver loaded?)");
  }
  if (std::find(types->begin(), types->end(), type) == types->end()) {
    std::string offered;
    for (const std::string& name : *types) offered += (offered.empty() ? "" : " ") + name;
    return FailedPrecondition(what + ": the device offers no such type; it offers [" + offered +
                              "]");
  }
  const std::string type_dir = dev + "/mdev_supported_types/" + type;
  if (auto available = ReadInt(sysfs_, type_dir + "/available_instances");
      available.ok() && *available <= 0) {
    return FailedPrecondition(what + ": no instance of the type is available on the device");
  }
  if (uuid.empty()) {
    uuid = NewUuid();
  } else if (auto normal = NormalizeUuid(uuid)) {
    uuid = *normal;
  } else {
    return InvalidArgument(what + ": \"" + uuid + "\" is not a UUID (8-4-4-4-12 hex digits)");
  }
  ActionRecord record{.kind = ActionKind::kMdev, .device = parent, .mdev_type = type,
                      .mdev_uuid = uuid};
  const std::string instance = "bus/mdev/devices/" + uuid;
  if (sysfs_.Exists(instance)) {
    record.noop = true;  // re-prepared after a crash: the instance is there already
    return record;
  }
  absl::Status status = Write(JournalEntry::Phase::kDo, record, type_dir + "/create", uuid);
  if (!status.ok()) return WithContext(status, what);
  const auto deadline = std::chrono::steady_clock::now() + options_.vf_wait_timeout;
  while (!sysfs_.Exists(instance)) {
    if (std::chrono::steady_clock::now() >= deadline) {
      absl::Status undo = UndoMdev(record);
      std::string message = what + ": " + instance + " did not appear within " +
                            std::to_string(options_.vf_wait_timeout.count()) + " ms";
      if (!undo.ok()) message += "; removing it failed: " + Message(undo);
      return DeadlineExceeded(message);
    }
    std::this_thread::sleep_for(options_.poll_interval);
  }
  return record;
}

absl::Status Preparer::UndoMdev(const ActionRecord& record) {
  std::lock_guard<std::recursive_mutex> lock(sysfs_mutex_);
  if (record.noop || record.mdev_uuid.empty()) return absl::OkStatus();
  const std::string instance = "bus/mdev/devices/" + record.mdev_uuid;
  if (!sysfs_.Exists(instance)) return absl::OkStatus();  // removed already, or the parent went
  return WithContext(Write(JournalEntry::Phase::kUndo, record, instance + "/remove", "1"),
                     "removing mediated device " + record.mdev_uuid + " of " + record.device);
}

absl::Status Preparer::ReleaseVfs(const ActionRecord& record) {
  if (options_.sriov_ledger == nullptr || record.holder.empty()) return absl::OkStatus();
  DEVLET_ASSIGN_OR_RETURN(std::optional<ActionRecord> last,
                          options_.sriov_ledger->Release(record.device, record.holder));
  if (!last) return absl::OkStatus();
  absl::Status status = UndoNumVfs(*last);
  if (!status.ok()) {
    // Keep the PF in the ledger so that a later unprepare or restart can try again.
    (void)options_.sriov_ledger->Hold(*last, record.holder);
  }
  return status;
}

absl::Status Preparer::RunCleanup(const std::string& device, const CommandLine& cleanup,
                                  const std::map<std::string, std::string>& env) {
  CommandSpec spec{.argv = cleanup.argv, .env = env,
                   .timeout = std::chrono::milliseconds(cleanup.timeout_ms),
                   .seccomp = options_.seccomp};
  auto result = RunCommand(spec);
  if (!result.ok()) return WithContext(result.status(), "cleanup command for " + device);
  return WithContext(result->ToStatus(cleanup.argv.front()), "cleanup command for " + device);
}

absl::StatusOr<ActionRecord> Preparer::RunInit(std::string_view device_view,
                                               const CommandLine& init,
                                               const std::optional<CommandLine>& cleanup,
                                               const std::map<std::string, std::string>& env) {
  const std::string device(device_view);
  ActionRecord record{.kind = ActionKind::kCommand, .device = device, .cleanup = cleanup, .env = env};
  std::string shown;
  for (const std::string& arg : init.argv) shown += (shown.empty() ? "" : " ") + arg;
  DEVLET_RETURN_IF_ERROR(Step(JournalEntry::Phase::kDo, record, "run " + shown));
  CommandSpec spec{.argv = init.argv, .env = env,
                   .timeout = std::chrono::milliseconds(init.timeout_ms),
                   .seccomp = options_.seccomp};
  absl::StatusOr<CommandResult> result = RunCommand(spec);
  absl::Status status = result.ok() ? result->ToStatus(init.argv.front()) : result.status();
  if (status.ok()) return record;
  status = WithContext(status, "init command for " + device);
  if (cleanup) {
    absl::Status step = Step(JournalEntry::Phase::kUndo, record, "run cleanup after failed init");
    absl::Status undo = step.ok() ? RunCleanup(device, *cleanup, env) : step;
    if (!undo.ok()) return Internal(Message(status) + "; then " + Message(undo));
  }
  return status;
}

absl::Status Preparer::Undo(const ActionRecord& record) {
  switch (record.kind) {
    case ActionKind::kVfioBind:
      return UndoVfio(record);
    case ActionKind::kSriovNumVfs:
      return UndoNumVfs(record);
    case ActionKind::kMdev:
      return UndoMdev(record);
    case ActionKind::kCommand:
      if (!record.cleanup || record.noop) return absl::OkStatus();
      DEVLET_RETURN_IF_ERROR(Step(JournalEntry::Phase::kUndo, record, "run cleanup"));
      return RunCleanup(record.device, *record.cleanup, record.env);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<ActionRecord>> Preparer::Prepare(const DraDevice& device) {
  std::vector<ActionRecord> done;
  auto fail = [&](const absl::Status& cause) -> absl::Status {
    absl::Status out = WithContext(cause, "preparing " + device.name);
    for (auto it = done.rbegin(); it != done.rend(); ++it) {
      // VFs may serve other devices: the ledger says whether this device was the last user.
      absl::Status undo = it->kind == ActionKind::kSriovNumVfs ? ReleaseVfs(*it) : Undo(*it);
      if (!undo.ok()) out = Internal(Message(out) + "; rolling back: " + Message(undo));
    }
    return out;
  };
  const Preparation& prep = device.preparation;
  std::string pci_address = device.pci_address;
  if (!prep.sriov_pf.empty()) {
    auto index_it = device.attributes.find("vfIndex");
    const std::int64_t* index =
        index_it == device.attributes.end() ? nullptr : std::get_if<std::int64_t>(&index_it->second);
    if (index == nullptr) return fail(InvalidArgument("the VF device has no vfIndex attribute"));
    auto record = EnsureNumVfsFor(prep.sriov_pf, prep.sriov_num_vfs,
                                  /*autoprobe=*/!prep.bind_vfio, device.name);
    if (!record.ok()) return fail(record.status());
    done.push_back(*record);
    auto vf = VfAddress(prep.sriov_pf, static_cast<int>(*index));
    if (!vf.ok()) return fail(vf.status());
    pci_address = *vf;
  }
  if (prep.bind_vfio && !prep.mdev_type.empty()) {
    return fail(InvalidArgument("a device cannot be both bound to vfio-pci and carved into a "
                                "mediated device (its profile sets vfio and mdevType)"));
  }
  if (prep.bind_vfio) {
    if (pci_address.empty()) return fail(InvalidArgument("the device has no PCI address to bind"));
    auto record = BindVfio(pci_address);
    if (!record.ok()) return fail(record.status());
    done.push_back(*record);
  }
  std::string mdev_uuid;
  if (!prep.mdev_type.empty()) {
    if (pci_address.empty()) {
      return fail(InvalidArgument("the device has no PCI function to create a mediated device on"));
    }
    auto record = CreateMdev(pci_address, prep.mdev_type);
    if (!record.ok()) return fail(record.status());
    mdev_uuid = record->mdev_uuid;
    done.push_back(*record);
  }
  if (prep.init) {
    std::map<std::string, std::string> env{{"DEVLET_DEVICE", device.name}};
    if (!pci_address.empty()) env["DEVLET_PCI_ADDRESS"] = pci_address;
    if (!mdev_uuid.empty()) env["DEVLET_MDEV_UUID"] = mdev_uuid;
    auto attribute = [&](const char* name) -> std::string {
      auto it = device.attributes.find(name);
      if (it == device.attributes.end()) return "";
      if (const auto* i = std::get_if<std::int64_t>(&it->second)) return std::to_string(*i);
      if (const auto* str = std::get_if<std::string>(&it->second)) return *str;
      return "";
    };
    if (std::string partition = attribute("partition"); !partition.empty()) {
      env["DEVLET_PARTITION"] = partition;
      env["DEVLET_PARTITIONS"] = attribute("partitions");
      env["DEVLET_PARENT_DEVICE"] = attribute("parentDevice");
    }
    auto record = RunInit(device.name, *prep.init, prep.cleanup, env);
    if (!record.ok()) return fail(record.status());
    done.push_back(*record);
  }
  return done;
}

absl::StatusOr<std::vector<ActionRecord>> Preparer::Reapply(
    const DraDevice& device, const std::vector<ActionRecord>& records) {
  std::vector<ActionRecord> out;
  std::vector<ActionRecord> redone;
  for (const ActionRecord& old : records) {
    absl::StatusOr<ActionRecord> now = old;
    switch (old.kind) {
      case ActionKind::kSriovNumVfs:
        now = EnsureNumVfsFor(old.device, old.num_vfs,
                              /*autoprobe=*/!device.preparation.bind_vfio, old.holder);
        break;
      case ActionKind::kVfioBind:
        now = BindVfio(old.device);
        break;
      case ActionKind::kMdev:
        if (!sysfs_.Exists("bus/mdev/devices/" + old.mdev_uuid)) {
          now = CreateMdev(old.device, old.mdev_type, old.mdev_uuid);
        }
        break;
      case ActionKind::kCommand:
        break;
    }
    if (!now.ok()) {
      absl::Status out_status = WithContext(now.status(), "setting " + device.name + " up again");
      for (auto it = redone.rbegin(); it != redone.rend(); ++it) {
        absl::Status undo = it->kind == ActionKind::kSriovNumVfs ? ReleaseVfs(*it) : Undo(*it);
        if (!undo.ok()) {
          out_status = Internal(Message(out_status) + "; rolling back: " + Message(undo));
        }
      }
      return out_status;
    }
    if (now->noop || *now == old) {
      out.push_back(old);  // still in place: undo as first recorded
      continue;
    }
    redone.push_back(*now);
    out.push_back(*std::move(now));
  }
  return out;
}

absl::Status Preparer::Unprepare(const std::vector<ActionRecord>& records) {
  absl::Status first = absl::OkStatus();
  for (auto it = records.rbegin(); it != records.rend(); ++it) {
    absl::Status status = it->kind == ActionKind::kSriovNumVfs ? ReleaseVfs(*it) : Undo(*it);
    if (!status.ok() && first.ok()) first = status;
  }
  return first;
}

}  // namespace devlet::devices
