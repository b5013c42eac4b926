#include "devlet/cdi/spec_dir.h"

#include <set>
#include <string>
#include <utility>

#include "devlet/cdi/codec.h"
#include "devlet/cdi/names.h"
#include "devlet/common/status.h"

namespace devlet::cdi {
namespace {

std::string Quote(std::string_view s) { return std::string(1, '"').append(s).append(1, '"'); }

FileSystem& Fs(FileSystem* fs) { return fs != nullptr ? *fs : RealFileSystem(); }

bool HasSpecExtension(std::string_view name) {
  return name.ends_with(".json") || name.ends_with(".yaml");
}

std::string WithExtension(std::string_view name) {
  return HasSpecExtension(name) ? std::string(name) : std::string(name) + ".json";
}

std::string CleanDir(std::string dir) {
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  return dir;
}

}  // namespace

std::string SpecName(std::string_view vendor, std::string_view klass) {
  return std::string(vendor) + "-" + std::string(klass);
}

std::string TransientSpecName(std::string_view vendor, std::string_view klass,
                              std::string_view transient_id) {
  std::string id(transient_id);
  for (char& c : id) {
    if (c == '/') c = '_';
  }
  return SpecName(vendor, klass) + "_" + id;
}

absl::StatusOr<std::string> WriteSpec(const std::string& dir, std::string_view name, Spec spec,
                                      const WriteSpecOptions& options) {
  if (name.empty() || name.find('/') != std::string_view::npos) {
    return InvalidArgument("CDI spec file name " + Quote(name) + ": must be a plain file name");
  }
  if (name.ends_with(".yaml")) {
    return InvalidArgument("CDI spec file name " + Quote(name) + ": we write JSON only");
  }
  if (options.fill_minimum_version && spec.version.empty()) {
    spec.version = MinimumRequiredVersion(spec);
  }
  const std::string path = CleanDir(dir) + "/" + WithExtension(name);
  const std::string context = "CDI spec " + Quote(path);
  DEVLET_RETURN_IF_ERROR(WithContext(ValidateSpec(spec), context));
  if (const std::string minimum = MinimumRequiredVersion(spec);
      CompareVersions(spec.version, minimum) < 0) {
    return InvalidArgument(context + ": cdiVersion: the spec uses features of v" + minimum +
                           ", so its version must be at least v" + minimum);
  }
  if (spec.Vendor().size() > 253) {
    return InvalidArgument(context + ": kind: vendor longer than 253 characters");
  }
  if (spec.Class().size() > 63) {
    return InvalidArgument(context + ": kind: class longer than 63 characters");
  }
  DEVLET_RETURN_IF_ERROR(WriteFileAtomically(Fs(options.fs), path, EncodeSpecJson(spec),
                                             {.mode = options.mode, .create_dirs = true,
                                              .sync = options.sync}));
  return path;
}

absl::Status RemoveSpec(const std::string& dir, std::string_view name, FileSystem* fs) {
  const std::string clean = CleanDir(dir);
  const std::string path = clean + "/" + WithExtension(name);
  absl::Status s = Fs(fs).Remove(path);
  if (absl::IsNotFound(s)) return absl::OkStatus();
  DEVLET_RETURN_IF_ERROR(WithContext(s, "remove CDI spec"));
  return Fs(fs).SyncDir(clean);
}

absl::StatusOr<std::map<std::string, std::string>> ListTransientSpecs(const std::string& dir,
                                                                      std::string_view vendor,
                                                                      std::string_view klass,
                                                                      FileSystem* fs) {
  std::map<std::string, std::string> out;
  auto entries = Fs(fs).ListDir(CleanDir(dir));
  if (!entries.ok()) {
    if (absl::IsNotFound(entries.status())) return out;
    return entries.status();
  }
  const std::string prefix = SpecName(vendor, klass) + "_";
  for (const DirEntry& entry : *entries) {
    if (!entry.is_regular || !entry.name.starts_with(prefix) || !entry.name.ends_with(".json")) {
      continue;
    }
    std::string id = entry.name.substr(prefix.size(), entry.name.size() - prefix.size() - 5);
    if (id.empty()) continue;
    out[id] = CleanDir(dir) + "/" + entry.name;
  }
  return out;
}

absl::StatusOr<std::vector<std::string>> RemoveStaleTransientSpecs(
    const std::string& dir, std::string_view vendor, std::string_view klass,
    const std::vector<std::string>& live_ids, FileSystem* fs) {
  DEVLET_ASSIGN_OR_RETURN(auto specs, ListTransientSpecs(dir, vendor, klass, fs));
  std::set<std::string> live;
  for (const std::string& id : live_ids) {
    std::string clean = id;
    for (char& c : clean) {
      if (c == '/') c = '_';
    }
    live.insert(clean);
  }
  std::vector<std::string> removed;
  for (const auto& [id, path] : specs) {
    if (live.contains(id)) continue;
    absl::Status s = Fs(fs).Remove(path);
    if (!s.ok() && !absl::IsNotFound(s)) return WithContext(s, "remove stale CDI spec");
    removed.push_back(path);
  }
  if (!removed.empty()) DEVLET_RETURN_IF_ERROR(Fs(fs).SyncDir(CleanDir(dir)));
  return removed;
}

absl::StatusOr<int> RemoveLeakedTempFiles(const std::string& dir, std::string_view vendor,
                                          std::string_view klass, FileSystem* fs) {
  return RemoveTempFiles(Fs(fs), CleanDir(dir), SpecName(vendor, klass));
}

// ---- Registry -------------------------------------------------------------------------------

Registry Registry::Load(const std::vector<std::string>& dirs, FileSystem* fs) {
  Registry registry;
  for (size_t priority = 0; priority < dirs.size(); ++priority) {
    const std::string dir = CleanDir(dirs[priority]);
    auto entries = Fs(fs).ListDir(dir);
    if (!entries.ok()) {
      if (!absl::IsNotFound(entries.status())) {
        registry.load_errors_[dir].push_back(Message(entries.status()));
      }
      continue;
    }
    for (const DirEntry& entry : *entries) {
      if (entry.is_directory || !HasSpecExtension(entry.name)) continue;
      const std::string path = dir + "/" + entry.name;
      auto data = Fs(fs).ReadFile(path);
      if (!data.ok()) {
        registry.load_errors_[path].push_back(Message(data.status()));
        continue;
      }
      auto spec = DecodeSpec(*data);
      if (!spec.ok()) {
        registry.load_errors_[path].push_back("CDI spec " + Quote(path) + ": " +
                                              Message(spec.status()));
        continue;
      }
      registry.AddWithoutRebuild(path, static_cast<int>(priority), *std::move(spec));
    }
  }
  registry.Rebuild();
  return registry;
}

void Registry::Add(std::string path, int priority, Spec spec) {
  AddWithoutRebuild(std::move(path), priority, std::move(spec));
  Rebuild();
}

void Registry::AddWithoutRebuild(std::string path, int priority, Spec spec) {
  if (absl::Status s = ValidateSpec(spec); !s.ok()) {
    load_errors_[path].push_back("CDI spec " + Quote(path) + ": " + Message(s));
    return;
  }
  auto loaded = std::make_unique<LoadedSpec>();
  loaded->path = std::move(path);
  loaded->priority = priority;
  loaded->spec = std::move(spec);
  specs_.push_back(std::move(loaded));
}

void Registry::Rebuild() {
  devices_.clear();
  errors_ = load_errors_;
  std::set<std::string> conflicts;
  for (const auto& loaded : specs_) {
    const std::string vendor = loaded->spec.Vendor();
    const std::string klass = loaded->spec.Class();
    for (const Device& device : loaded->spec.devices) {
      std::string name = QualifiedName(vendor, klass, device.name);
      auto it = devices_.find(name);
      if (it != devices_.end()) {
        const LoadedSpec* old = it->second.spec;
        if (loaded->priority < old->priority) continue;
        if (loaded->priority == old->priority) {
          const std::string message = "conflicting device " + Quote(name) + " (specs " +
                                      Quote(loaded->path) + ", " + Quote(old->path) + ")";
          errors_[loaded->path].push_back(message);
          errors_[old->path].push_back(message);
          conflicts.insert(name);
          continue;
        }
      }
      devices_[name] = Entry{loaded.get(), &device};
    }
  }
  // As in the reference cache, a conflicting name is unusable whatever other directories say.
  for (const std::string& name : conflicts) devices_.erase(name);
}

const LoadedSpec* Registry::FindSpec(std::string_view qualified_name) const {
  auto it = devices_.find(qualified_name);
  return it == devices_.end() ? nullptr : it->second.spec;
}

const Device* Registry::FindDevice(std::string_view qualified_name) const {
  auto it = devices_.find(qualified_name);
  return it == devices_.end() ? nullptr : it->second.device;
}

std::vector<std::string> Registry::DeviceNames() const {
  std::vector<std::string> out;
  out.reserve(devices_.size());
  for (const auto& [name, entry] : devices_) out.push_back(name);
  return out;
}

absl::StatusOr<ContainerEdits> Registry::Resolve(const std::vector<std::string>& devices,
                                                 std::vector<std::string>* unresolved) const {
  ContainerEdits edits;
  std::set<const LoadedSpec*> seen;
  std::vector<std::string> missing;
  for (const std::string& name : devices) {
    auto it = devices_.find(name);
    if (it == devices_.end()) {
      missing.push_back(name);
      continue;
    }
    if (seen.insert(it->second.spec).second) {
      edits.Append(it->second.spec->spec.container_edits);
    }
    edits.Append(it->second.device->container_edits);
  }
  if (unresolved != nullptr) *unresolved = missing;
  if (!missing.empty()) {
    std::string list;
    for (const std::string& name : missing) {
      list += (list.empty() ? "" : ", ") + name;
    }
    return NotFound("unresolvable CDI devices " + list);
  }
  return edits;
}

}  // namespace devlet::cdi
