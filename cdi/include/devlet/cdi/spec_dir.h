// File: devlet/cdi/spec_dir.h
//
// CDI spec directories: transient per-claim spec files written atomically into a CDI root, their
// removal, and reading one or more spec directories into a Registry of qualified devices, with
// the reference library's priorities and conflict rules.
//
//   std::string name = devlet::cdi::TransientSpecName("k8s.devlet.dev", "claim", claim_uid);
//   DEVLET_ASSIGN_OR_RETURN(std::string path, devlet::cdi::WriteSpec(cdi_root, name, spec));
//   ...
//   DEVLET_RETURN_IF_ERROR(devlet::cdi::RemoveSpec(cdi_root, name));
//
//   devlet::cdi::Registry registry = devlet::cdi::Registry::Load({"/etc/cdi", "/var/run/cdi"});
//   for (const auto& [path, errors] : registry.errors()) ...
#pragma once

#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "devlet/cdi/file_system.h"
#include "devlet/cdi/spec.h"

namespace devlet::cdi {

// kDefaultStaticDir and kDefaultDynamicDir are the standard spec directories; the dynamic one is
// the default `--cdi-root` for transient specs and has the higher priority.
inline constexpr std::string_view kDefaultStaticDir = "/etc/cdi";
inline constexpr std::string_view kDefaultDynamicDir = "/var/run/cdi";

// SpecName returns the reference library's spec file name for a vendor and class, without an
// extension: "vendor-class".
std::string SpecName(std::string_view vendor, std::string_view klass);

// TransientSpecName returns the file name (without extension) of a spec whose lifetime is tied to
// `transient_id` (for us: a claim UID): "vendor-class_<id>", '/' in the id replaced by '_'.
std::string TransientSpecName(std::string_view vendor, std::string_view klass,
                              std::string_view transient_id);

// WriteSpecOptions tunes WriteSpec.
struct WriteSpecOptions {
  // When true (the default) and `spec.version` is empty, the minimum required version is written.
  bool fill_minimum_version = true;
  mode_t mode = 0644;
  FileSystem* fs = nullptr;  // nullptr: RealFileSystem()
  // AtomicWriteOptions::sync: false skips the fsyncs (the rename stays atomic). For transient
  // specs that the writer regenerates from its own durable record when they are missing or stale.
  bool sync = true;
};

// WriteSpec validates `spec` (ValidateSpec, a version not older than MinimumRequiredVersion, and
// the DNS length limits 253 for the vendor and 63 for the class) and writes it as JSON to `dir/name` (".json" appended when `name` has neither
// ".json" nor ".yaml"; a ".yaml" name is refused since we only write JSON), atomically, replacing
// an existing file. Returns the path written.
absl::StatusOr<std::string> WriteSpec(const std::string& dir, std::string_view name, Spec spec,
                                      const WriteSpecOptions& options = {});

// RemoveSpec removes `dir/name` (".json" appended as in WriteSpec) and syncs the directory; a
// missing file is success.
absl::Status RemoveSpec(const std::string& dir, std::string_view name, FileSystem* fs = nullptr);

// ListTransientSpecs returns, for the files "vendor-class_<id>.json" in `dir`, a map from <id> to
// the file's path (for start-up garbage collection against the checkpoint). A missing `dir` is
// an empty map.
absl::StatusOr<std::map<std::string, std::string>> ListTransientSpecs(
    const std::string& dir, std::string_view vendor, std::string_view klass,
    FileSystem* fs = nullptr);

// RemoveStaleTransientSpecs removes the files "vendor-class_<id>.json" in `dir` whose <id> is not
// in `live_ids` (the claim UIDs in the checkpoint) and returns the removed paths. Call it at
// start-up, before serving.
absl::StatusOr<std::vector<std::string>> RemoveStaleTransientSpecs(
    const std::string& dir, std::string_view vendor, std::string_view klass,
    const std::vector<std::string>& live_ids, FileSystem* fs = nullptr);

// RemoveLeakedTempFiles removes temp files our WriteSpec left in `dir` when a crash interrupted
// it (only ours: ".vendor-class*.tmp"). Returns how many it removed.
absl::StatusOr<int> RemoveLeakedTempFiles(const std::string& dir, std::string_view vendor,
                                          std::string_view klass, FileSystem* fs = nullptr);

// LoadedSpec is one spec file read into a Registry.
struct LoadedSpec {
  std::string path;
  int priority = 0;  // index of its directory; a higher index wins
  Spec spec;
};

// Registry is the set of devices defined by one or more spec directories, as the reference
// library's cache sees them: only regular "*.json" and "*.yaml" files are read, in name order,
// without recursion; missing directories are skipped; a file that fails to parse or validate is
// skipped as a whole; a device defined in two directories comes from the later one; a device
// defined twice at the same priority is dropped and both files get a "conflicting device" error.
class Registry {
 public:
  // Load reads `dirs` (priority = index). Errors are recorded, never fatal.
  static Registry Load(const std::vector<std::string>& dirs, FileSystem* fs = nullptr);

  // Add adds one parsed spec as if read from `path` at `priority` (validating it); for tests and
  // for callers that hold specs in memory. Conflicts are resolved as in Load.
  void Add(std::string path, int priority, Spec spec);

  // Find returns the spec and device behind a qualified name, or nullptrs.
  const LoadedSpec* FindSpec(std::string_view qualified_name) const;
  const Device* FindDevice(std::string_view qualified_name) const;

  // DeviceNames lists the resolvable qualified names, sorted.
  std::vector<std::string> DeviceNames() const;

  // Specs lists every spec loaded without error, in load order.
  const std::vector<std::unique_ptr<LoadedSpec>>& specs() const { return specs_; }

  // errors maps a file (or directory) path to the problems found in it.
  const std::map<std::string, std::vector<std::string>>& errors() const { return errors_; }

  // Resolve merges the edits of `devices` as the reference library's InjectDevices does: in
  // request order, each spec's spec-level edits once (before its first device), then each
  // device's edits. If any name is unknown, nothing is merged: the error lists every unresolved
  // name and `unresolved` (if given) receives them.
  absl::StatusOr<ContainerEdits> Resolve(const std::vector<std::string>& devices,
                                         std::vector<std::string>* unresolved = nullptr) const;

 private:
  struct Entry {
    const LoadedSpec* spec = nullptr;
    const Device* device = nullptr;
  };
  void AddWithoutRebuild(std::string path, int priority, Spec spec);
  void Rebuild();

  std::vector<std::unique_ptr<LoadedSpec>> specs_;
  std::map<std::string, Entry, std::less<>> devices_;
  std::map<std::string, std::vector<std::string>> load_errors_;
  std::map<std::string, std::vector<std::string>> errors_;
};

}  // namespace devlet::cdi
