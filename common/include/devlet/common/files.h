// File: devlet/common/files.h
//
// Crash-safe file helpers on the real file system. Every file devlet owns on the host (checkpoint
// journals, CDI specs, device-metadata files, manifests) is replaced atomically, so a reader or a
// restart after SIGKILL or power loss sees either the old or the new content, never a mix:
//
//   DEVLET_RETURN_IF_ERROR(WriteFileAtomically(path, spec_json, 0644));
//   DEVLET_ASSIGN_OR_RETURN(std::optional<std::string> old, ReadFileIfExists(path));
//
// Code that must inject file-system faults in tests goes through cdi::FileSystem instead.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace devlet {

// WriteFileAtomically replaces `path` with `content`: it writes a uniquely named temp file in the
// same directory (so concurrent writers never share one), sets `mode`, fsyncs it, renames it over
// `path` and fsyncs the directory. On failure the temp file is removed and `path` is untouched.
// The directory must exist.
absl::Status WriteFileAtomically(const std::string& path, std::string_view content,
                                 mode_t mode = 0644);

// ReadFileIfExists returns the whole content of `path`, or nullopt when it does not exist; other
// errors (permission, I/O, a directory) are returned as such.
absl::StatusOr<std::optional<std::string>> ReadFileIfExists(const std::string& path);

}  // namespace devlet
