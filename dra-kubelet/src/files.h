// Private file helpers of dra-kubelet; atomic writes and reads live in devlet/common/files.h.
#pragma once

#include <sys/types.h>

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace devlet::dra_kubelet::internal {

// MakeDirs creates `path` and its parents with exactly `mode`, whatever the umask (existing
// directories are kept as they are).
absl::Status MakeDirs(const std::string& path, mode_t mode);

// RemoveFile removes one file (never a directory, and a symlink itself, not its target); a missing
// path is success. There is deliberately no recursive removal: devlet removes only the files it
// wrote, then the directories it made if they are empty (RemoveEmptyDirectory).
absl::Status RemoveFile(const std::string& path);

// ListDirectory returns the names of the entries of `dir` (not "." or ".."), each with whether it
// is a directory (lstat: a symlink is not); a missing directory is an empty list.
absl::StatusOr<std::vector<std::pair<std::string, bool>>> ListDirectory(const std::string& dir);

// ListJsonFiles returns the names of the regular files (not directories) in `dir` whose names end
// in ".json" after at least one other character; a missing directory is an empty list.
absl::StatusOr<std::vector<std::string>> ListJsonFiles(const std::string& dir);

// RemoveEmptyDirectory removes `dir` if it is an empty directory; anything else is left alone.
void RemoveEmptyDirectory(const std::string& dir);

// IsRegularFile reports whether `path` is a regular file (without following a final symlink).
bool IsRegularFile(const std::string& path);

// PathExists reports whether something exists at `path` (without following a final symlink).
bool PathExists(const std::string& path);

// Sha256 returns the SHA-256 digest of `data`.
std::array<std::uint8_t, 32> Sha256(std::string_view data);

// HexEncode renders bytes as lower-case hex.
std::string HexEncode(const std::uint8_t* data, std::size_t size);

// Base64RawUrl renders bytes in unpadded base64url (Go's base64.RawURLEncoding).
std::string Base64RawUrl(const std::uint8_t* data, std::size_t size);

}  // namespace devlet::dra_kubelet::internal
