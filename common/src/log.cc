#include "devlet/common/log.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <mutex>

#include "devlet/common/strings.h"
#include "nlohmann/json.hpp"

namespace devlet::log {
namespace {

struct State {
  std::mutex mutex;
  std::function<void(std::string_view)> sink;
};

State& GlobalState() {
  static State* state = new State();  // Never destroyed: threads may log during exit.
  return *state;
}

std::atomic<int> g_verbosity{0};
std::atomic<Format> g_format{Format::kText};

std::string_view BaseName(std::string_view path) {
  const auto slash = path.rfind('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

}  // namespace

void Configure(const Options& options) {
  g_verbosity.store(options.verbosity, std::memory_order_relaxed);
  g_format.store(options.format, std::memory_order_relaxed);
}

Options CurrentOptions() {
  return Options{.format = g_format.load(std::memory_order_relaxed),
                 .verbosity = g_verbosity.load(std::memory_order_relaxed)};
}

void SetSinkForTest(std::function<void(std::string_view)> sink) {
  State& state = GlobalState();
  std::lock_guard<std::mutex> lock(state.mutex);
  state.sink = std::move(sink);
}

namespace internal {

Field MakeField(std::string_view key, std::string_view value) {
  return Field{std::string(key), std::string(value), true};
}

Field MakeField(std::string_view key, const absl::Status& value) {
  return Field{std::string(key), value.ToString(), true};
}

Field MakeField(std::string_view key, bool value) {
  return Field{std::string(key), value ? "true" : "false", false};
}

Field MakeField(std::string_view key, double value) {
  return Field{std::string(key), nlohmann::json(value).dump(), false};
}

Field MakeField(std::string_view key, std::int64_t value) {
  return Field{std::string(key), std::to_string(value), false};
}

Field MakeField(std::string_view key, std::uint64_t value) {
  return Field{std::string(key), std::to_string(value), false};
}

}  // namespace internal

bool Logger::Enabled() const { return level_ <= g_verbosity.load(std::memory_order_relaxed); }

std::string FormatRecord(Format format, char severity, int level, const Message& message,
                         const absl::Status* error, const std::vector<Field>& fields) {
  const auto now = std::chrono::system_clock::now();
  const auto micros =
      std::chrono::duration_cast<std::chrono::microseconds>(now.time_since_epoch()).count();
  const std::string caller = std::string(BaseName(message.location.file_name())) + ":" +
                             std::to_string(message.location.line());
  if (format == Format::kJson) {
    nlohmann::ordered_json record;
    record["ts"] = static_cast<double>(micros) / 1e6;
    record["caller"] = caller;
    record["msg"] = std::string(message.text);
    if (error != nullptr) {
      record["err"] = std::string(error->message());
    } else {
      record["v"] = level;
    }
    for (const Field& field : fields) {
      record[field.key] = field.quoted ? nlohmann::ordered_json(field.value)
                                       : nlohmann::ordered_json::parse(field.value, nullptr,
                                                                       /*allow_exceptions=*/false);
    }
    return record.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  }
  const std::time_t seconds = static_cast<std::time_t>(micros / 1000000);
  std::tm tm{};
  gmtime_r(&seconds, &tm);
  char header[64];
  std::snprintf(header, sizeof(header), "%c%02d%02d %02d:%02d:%02d.%06lld %7ld ", severity,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                static_cast<long long>(micros % 1000000),  // NOLINT(google-runtime-int)
                static_cast<long>(::syscall(SYS_gettid)));  // NOLINT(google-runtime-int)
  std::string out = header;
  out += caller;
  out += "] ";
  AppendGoQuoted(out, message.text);
  if (error != nullptr) {
    out += " err=";
    AppendGoQuoted(out, std::string(error->message()));
  }
  for (const Field& field : fields) {
    out += ' ';
    out += field.key;
    out += '=';
    if (field.quoted) {
      AppendGoQuoted(out, field.value);
    } else {
      out += field.value;
    }
  }
  return out;
}

void Logger::Write(char severity, const Message& message, const absl::Status* error,
                   const std::vector<Field>& fields) const {
  std::string record = FormatRecord(g_format.load(std::memory_order_relaxed), severity, level_,
                                    message, error, fields);
  State& state = GlobalState();
  std::lock_guard<std::mutex> lock(state.mutex);
  if (state.sink) {
    state.sink(record);
    return;
  }
  record += '\n';
  std::string_view rest = record;
  while (!rest.empty()) {
    const ssize_t written = ::write(STDERR_FILENO, rest.data(), rest.size());
    if (written <= 0) {
      return;  // Nowhere to report a failing stderr.
    }
    rest.remove_prefix(static_cast<size_t>(written));
  }
}

}  // namespace devlet::log
