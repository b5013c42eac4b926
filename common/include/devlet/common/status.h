// File: devlet/common/status.h
//
// Error propagation for devlet. Module boundaries return absl::Status or absl::StatusOr<T>; these
// helpers supply what the Debian absl LTS (20220623) lacks:
//
//   DEVLET_RETURN_IF_ERROR(WriteSpec(spec));
//   DEVLET_ASSIGN_OR_RETURN(Claim claim, FetchClaim(uid));
//   return WithContext(status, "preparing claim " + name);
//
// Error philosophy (after Envoy's STYLE.md): input from users, the kubelet, the runtime, the API
// server and the machine is untrusted and yields a Status with a message written for a person,
// because it ends up verbatim in pod events. A broken invariant inside devlet is a bug and aborts.
#pragma once

#include <string>
#include <string_view>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace devlet {

// WithContext returns `status` with `context + ": "` prefixed to its message, keeping the code and
// payloads; OK stays OK. The equivalent of Go's fmt.Errorf("context: %w", err).
absl::Status WithContext(const absl::Status& status, std::string_view context);

// Message returns the status message as a std::string (Debian's absl::string_view is not
// std::string_view, so this keeps absl vocabulary types out of callers).
std::string Message(const absl::Status& status);

// Shorthands that take std::string_view (Debian absl's error constructors do not).
absl::Status InvalidArgument(std::string_view message);
absl::Status NotFound(std::string_view message);
absl::Status FailedPrecondition(std::string_view message);
absl::Status Internal(std::string_view message);
absl::Status Unavailable(std::string_view message);
absl::Status AlreadyExists(std::string_view message);
absl::Status DeadlineExceeded(std::string_view message);
absl::Status ResourceExhausted(std::string_view message);
absl::Status Unimplemented(std::string_view message);
absl::Status PermissionDenied(std::string_view message);
absl::Status Aborted(std::string_view message);
absl::Status Cancelled(std::string_view message);
absl::Status OutOfRange(std::string_view message);

// ErrnoToStatus maps an errno value to a Status whose message is `context: strerror(errno)`:
// ENOENT NotFound, EACCES/EPERM PermissionDenied, EEXIST AlreadyExists, EINVAL InvalidArgument,
// ETIMEDOUT DeadlineExceeded, EAGAIN and lost connections Unavailable, ENOSPC/EDQUOT/ENOMEM
// ResourceExhausted, EROFS FailedPrecondition, anything else Internal.
absl::Status ErrnoToStatus(int error_number, std::string_view context);

namespace internal_status {

inline const absl::Status& AsStatus(const absl::Status& status) { return status; }

template <typename T>
const absl::Status& AsStatus(const absl::StatusOr<T>& status_or) {
  return status_or.status();
}

}  // namespace internal_status
}  // namespace devlet

#define DEVLET_STATUS_CONCAT_INNER_(a, b) a##b
#define DEVLET_STATUS_CONCAT_(a, b) DEVLET_STATUS_CONCAT_INNER_(a, b)

// DEVLET_RETURN_IF_ERROR(expr): evaluates `expr` (a Status or StatusOr) once and returns its
// status from the enclosing function if it is not OK.
#define DEVLET_RETURN_IF_ERROR(expr)                                                        \
  do {                                                                                      \
    const auto& devlet_status_ = (expr);                                                    \
    if (!devlet_status_.ok()) {                                                             \
      return ::devlet::internal_status::AsStatus(devlet_status_);                           \
    }                                                                                       \
  } while (false)

// DEVLET_ASSIGN_OR_RETURN(lhs, expr): evaluates `expr` (a StatusOr<T>); on error returns its
// status, otherwise move-assigns the value to `lhs`, which may be a declaration.
#define DEVLET_ASSIGN_OR_RETURN(lhs, expr) \
  DEVLET_ASSIGN_OR_RETURN_IMPL_(DEVLET_STATUS_CONCAT_(devlet_statusor_, __LINE__), lhs, expr)

#define DEVLET_ASSIGN_OR_RETURN_IMPL_(statusor, lhs, expr) \
  auto statusor = (expr);                                  \
  if (!statusor.ok()) {                                    \
    return std::move(statusor).status();                   \
  }                                                        \
  lhs = std::move(statusor).value()
