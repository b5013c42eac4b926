// File: devlet/common/log.h
//
// Structured logging in the formats Kubernetes operators' tooling expects, always to stderr:
//
//   text (klog):  I1202 15:56:42.123456   12345 prepare.cc:88] "Prepared claim" claim="ns/c" devices=2
//   json:         {"ts":1764690. ,"caller":"prepare.cc:88","msg":"Prepared claim","v":2,...}
//
// Verbosity follows Kubernetes practice: V(0) always, V(2) steady-state events, V(4) decisions,
// V(5) traces, V(6) full request dumps.
//
//   devlet::log::Logger logger = devlet::log::Logger().With("claim", claim_name);
//   logger.V(2).Info("Prepared claim", "devices", devices.size());
//   logger.Error(status, "Preparing claim failed");
//
// Thread-safe: a record is formatted on the caller's thread and written with a single write(2).
#pragma once

#include <cstdint>
#include <functional>
#include <source_location>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/status/status.h"

namespace devlet::log {

// Format selects the record encoding (`--logging-format=text|json`).
enum class Format { kText, kJson };

// Options is the process-wide logging configuration.
struct Options {
  Format format = Format::kText;
  int verbosity = 0;  // -v=N: records at V(n) with n <= verbosity are written.
};

// Configure replaces the process-wide options. Call it at start-up, before threads log.
void Configure(const Options& options);

// CurrentOptions returns the process-wide options.
Options CurrentOptions();

// SetSinkForTest redirects records to `sink` (one call per record, without the trailing newline);
// an empty function restores stderr.
void SetSinkForTest(std::function<void(std::string_view)> sink);

// Field is one key/value pair of a record. Strings are quoted in text output; numbers and
// booleans are not.
struct Field {
  std::string key;
  std::string value;
  bool quoted = true;
};

// Message carries a log message and the call site, so that records name file:line without macros.
struct Message {
  template <typename S>
    requires std::is_convertible_v<const S&, std::string_view>
  Message(const S& message_text,  // NOLINT(google-explicit-constructor): call-site sugar.
          std::source_location call_site = std::source_location::current())
      : text(message_text), location(call_site) {}

  std::string_view text;
  std::source_location location;
};

namespace internal {

Field MakeField(std::string_view key, std::string_view value);
Field MakeField(std::string_view key, const absl::Status& value);
Field MakeField(std::string_view key, bool value);
Field MakeField(std::string_view key, double value);
Field MakeField(std::string_view key, std::int64_t value);
Field MakeField(std::string_view key, std::uint64_t value);

template <typename T>
Field MakeField(std::string_view key, const T& value) {
  if constexpr (std::is_same_v<T, bool>) {
    return MakeField(key, static_cast<bool>(value));
  } else if constexpr (std::is_integral_v<T> && std::is_signed_v<T>) {
    return MakeField(key, static_cast<std::int64_t>(value));
  } else if constexpr (std::is_integral_v<T>) {
    return MakeField(key, static_cast<std::uint64_t>(value));
  } else if constexpr (std::is_floating_point_v<T>) {
    return MakeField(key, static_cast<double>(value));
  } else {
    return MakeField(key, std::string_view(value));
  }
}

template <typename V, typename... Rest>
void AppendPairs(std::vector<Field>& fields, std::string_view key, const V& value,
                 Rest&&... rest) {
  fields.push_back(MakeField(key, value));
  if constexpr (sizeof...(Rest) > 0) {
    AppendPairs(fields, std::forward<Rest>(rest)...);
  }
}

template <typename... Args>
void AppendFields(std::vector<Field>& fields, Args&&... args) {
  static_assert(sizeof...(Args) % 2 == 0, "key/value arguments come in pairs");
  if constexpr (sizeof...(Args) > 0) {
    AppendPairs(fields, std::forward<Args>(args)...);
  }
}

}  // namespace internal

// Logger is a cheap value carrying preset key/values (contextual logging) and a verbosity level.
class Logger {
 public:
  Logger() = default;

  // With returns a copy of this logger whose records also carry the given key/value pairs.
  template <typename... Args>
  [[nodiscard]] Logger With(Args&&... args) const {
    Logger copy = *this;
    internal::AppendFields(copy.fields_, std::forward<Args>(args)...);
    return copy;
  }

  // V returns a copy that logs at verbosity `level`; its records are dropped unless -v >= level.
  [[nodiscard]] Logger V(int level) const {
    Logger copy = *this;
    copy.level_ = level;
    return copy;
  }

  // Enabled reports whether records of this logger are written.
  [[nodiscard]] bool Enabled() const;

  // Info writes an informational record with trailing key/value pairs.
  template <typename... Args>
  void Info(Message message, Args&&... args) const {
    if (!Enabled()) {
      return;
    }
    std::vector<Field> fields = fields_;
    internal::AppendFields(fields, std::forward<Args>(args)...);
    Write('I', message, nullptr, fields);
  }

  // Warning writes a warning record (always, whatever the verbosity).
  template <typename... Args>
  void Warning(Message message, Args&&... args) const {
    std::vector<Field> fields = fields_;
    internal::AppendFields(fields, std::forward<Args>(args)...);
    Write('W', message, nullptr, fields);
  }

  // Error writes an error record carrying `error` under the key "err" (always written).
  template <typename... Args>
  void Error(const absl::Status& error, Message message, Args&&... args) const {
    std::vector<Field> fields = fields_;
    internal::AppendFields(fields, std::forward<Args>(args)...);
    Write('E', message, &error, fields);
  }

 private:
  void Write(char severity, const Message& message, const absl::Status* error,
             const std::vector<Field>& fields) const;

  std::vector<Field> fields_;
  int level_ = 0;
};

// FormatRecord renders one record without the trailing newline; exposed for tests.
std::string FormatRecord(Format format, char severity, int level, const Message& message,
                         const absl::Status* error, const std::vector<Field>& fields);

}  // namespace devlet::log
