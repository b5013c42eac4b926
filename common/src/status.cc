#include "devlet/common/status.h"

#include <cstring>
#include <string>

namespace devlet {

absl::Status WithContext(const absl::Status& status, std::string_view context) {
  if (status.ok()) {
    return status;
  }
  absl::Status result(status.code(), std::string(context) + ": " + Message(status));
  status.ForEachPayload([&result](auto type_url, const auto& payload) {
    result.SetPayload(type_url, payload);
  });
  return result;
}

std::string Message(const absl::Status& status) { return std::string(status.message()); }

#define DEVLET_DEFINE_ERROR_(Name, Code) \
  absl::Status Name(std::string_view message) { return {absl::StatusCode::Code, std::string(message)}; }

DEVLET_DEFINE_ERROR_(InvalidArgument, kInvalidArgument)
DEVLET_DEFINE_ERROR_(NotFound, kNotFound)
DEVLET_DEFINE_ERROR_(FailedPrecondition, kFailedPrecondition)
DEVLET_DEFINE_ERROR_(Internal, kInternal)
DEVLET_DEFINE_ERROR_(Unavailable, kUnavailable)
DEVLET_DEFINE_ERROR_(AlreadyExists, kAlreadyExists)
DEVLET_DEFINE_ERROR_(DeadlineExceeded, kDeadlineExceeded)
DEVLET_DEFINE_ERROR_(ResourceExhausted, kResourceExhausted)
DEVLET_DEFINE_ERROR_(Unimplemented, kUnimplemented)
DEVLET_DEFINE_ERROR_(PermissionDenied, kPermissionDenied)
DEVLET_DEFINE_ERROR_(Aborted, kAborted)
DEVLET_DEFINE_ERROR_(Cancelled, kCancelled)
DEVLET_DEFINE_ERROR_(OutOfRange, kOutOfRange)

#undef DEVLET_DEFINE_ERROR_

absl::Status ErrnoToStatus(int error_number, std::string_view context) {
  char buffer[256];
  // GNU strerror_r returns a pointer that may or may not be `buffer`.
  const char* text = strerror_r(error_number, buffer, sizeof(buffer));
  std::string message = std::string(context) + ": " + text;
  switch (error_number) {
    case ENOENT:
      return {absl::StatusCode::kNotFound, message};
    case EACCES:
    case EPERM:
      return {absl::StatusCode::kPermissionDenied, message};
    case EEXIST:
      return {absl::StatusCode::kAlreadyExists, message};
    case EINVAL:
      return {absl::StatusCode::kInvalidArgument, message};
    case ETIMEDOUT:
      return {absl::StatusCode::kDeadlineExceeded, message};
    case EAGAIN:
    case ECONNREFUSED:
    case ECONNRESET:
    case EPIPE:
      return {absl::StatusCode::kUnavailable, message};
    case EROFS:  // not a bug of ours: the file system must be made writable first
      return {absl::StatusCode::kFailedPrecondition, message};
    case ENOSPC:
    case EDQUOT:
    case ENOMEM:
      return {absl::StatusCode::kResourceExhausted, message};
    default:
      return {absl::StatusCode::kInternal, message};
  }
}

}  // namespace devlet
