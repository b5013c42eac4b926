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

// MakeDirs creates `path` and its parents with `mode` (existing directories are kept).
absl::Status MakeDirs(const std::string& path, mode_t mode);

// RemoveIfExists removes a file or a directory tree; a missing path is success.
absl::Status RemoveIfExists(const std::string& path);

// ListDirectory returns the names of the entries of `dir` (not "." or ".."), each with whether it
// is a directory (lstat: a symlink is not); a missing directory is an empty list.
absl::StatusOr<std::vector<std::pair<std::string, bool>>> ListDirectory(const std::string& dir);

// ListJsonFiles returns the names of the regular files (not directories) in `dir` whose names end
// in ".json" after at least one other character; a missing directory is an empty list.
absl::StatusOr<std::vector<std::string>> ListJsonFiles(const std::string& dir);

// RemoveEmptyDirectory removes `dir` if it is an empty directory; anything else is left alone.
void RemoveEmptyDirectory(const std::string& dir);

// PathExists reports whether something exists at `path` (without following a final symlink).
bool PathExists(const std::string& path);

// Sha256 returns the SHA-256 digest of `data`.
std::array<std::uint8_t, 32> Sha256(std::string_view data);

// HexEncode renders bytes as lower-case hex.
std::string HexEncode(const std::uint8_t* data, std::size_t size);

// Base64RawUrl renders bytes in unpadded base64url (Go's base64.RawURLEncoding).
std::string Base64RawUrl(const std::uint8_t* data, std::size_t size);

}  // namespace devlet::dra_kubelet::internal
