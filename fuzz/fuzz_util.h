// Checks shared by the fuzz targets.
#pragma once

#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "absl/status/status.h"

namespace devlet::fuzz {

// Fail reports a broken promise and aborts, so that libFuzzer records the input.
[[noreturn]] inline void Fail(const char* what, std::string_view message) {
  std::fprintf(stderr, "fuzz check failed: %s: %.*s\n", what,
               static_cast<int>(message.size() > 2000 ? 2000 : message.size()), message.data());
  std::abort();
}

// CheckErrorMessage: an error on bad input is InvalidArgument with a message for a person:
// not empty, at most `max_bytes`, and without raw NUL or other control bytes (tabs and newlines
// excepted only when `allow_newlines`).
inline void CheckErrorMessage(const absl::Status& status, std::size_t max_bytes,
                              bool allow_newlines = false) {
  const std::string_view message(status.message().data(), status.message().size());
  if (status.code() != absl::StatusCode::kInvalidArgument) {
    Fail("error is not InvalidArgument", status.ToString());
  }
  if (message.empty()) {
    Fail("empty error message", "");
  }
  if (message.size() > max_bytes) {
    Fail("error message too long", message);
  }
  for (char c : message) {
    const auto u = static_cast<unsigned char>(c);
    if ((u < 0x20 && !(allow_newlines && (c == '\n' || c == '\t'))) || u == 0x7f) {
      Fail("raw control byte in error message", message);
    }
  }
}

}  // namespace devlet::fuzz
