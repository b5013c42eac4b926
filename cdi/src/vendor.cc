#include "devlet/cdi/vendor.h"

#include <string>
#include <vector>

#include "devlet/cdi/names.h"
#include "devlet/cdi/spec_dir.h"
#include "devlet/common/status.h"

namespace devlet::cdi {

absl::StatusOr<ContainerEdits> ResolveVendorDevices(const std::vector<std::string>& dirs,
                                                    const std::vector<std::string>& names,
                                                    FileSystem* fs) {
  for (const std::string& name : names) {
    if (absl::StatusOr<QualifiedDevice> parsed = ParseQualifiedName(name); !parsed.ok()) {
      return FailedPrecondition("vendor CDI device \"" + name +
                                "\" is not a CDI device name (vendor/class=device): " +
                                Message(parsed.status()));
    }
  }
  if (names.empty()) return ContainerEdits{};
  const Registry registry = Registry::Load(dirs, fs);
  std::vector<std::string> unresolved;
  absl::StatusOr<ContainerEdits> edits = registry.Resolve(names, &unresolved);
  if (edits.ok()) return edits;
  std::string where;
  for (const std::string& dir : dirs) where += (where.empty() ? "" : ", ") + dir;
  std::string message;
  for (const std::string& name : unresolved) {
    const std::string kind = name.substr(0, name.find('='));
    std::string known;
    for (const std::string& other : registry.DeviceNames()) {
      if (other.compare(0, kind.size() + 1, kind + "=") != 0) continue;
      known += (known.empty() ? "" : ", ") + other.substr(kind.size() + 1);
    }
    message += (message.empty() ? "" : "; ") + std::string("vendor CDI device \"") + name +
               "\" is defined by no spec in " + where +
               (known.empty() ? " (no spec defines kind " + kind + ")"
                              : " (" + kind + " defines: " + known + ")");
  }
  if (unresolved.empty()) message = Message(edits.status());
  // A vendor spec that does not parse is the likely cause: name every such file and why.
  std::string broken;
  for (const auto& [path, problems] : registry.errors()) {
    for (const std::string& problem : problems) {
      broken += (broken.empty() ? "" : "; ") + problem;
    }
  }
  if (!broken.empty()) message += "; spec files skipped: " + broken;
  return FailedPrecondition(message);
}

}  // namespace devlet::cdi
