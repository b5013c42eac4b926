// google.protobuf.Timestamp and google.protobuf.Duration values: timestamp(), duration(), their
// string forms, arithmetic helpers and the get* accessors (named time zones through absl/cctz,
// which reads the system zoneinfo). Nothing here reads the process's own zone (TZ, /etc/localtime):
// results equal cel-go's in Kubernetes' API server, whose time.Local is UTC.
#include <sys/stat.h>

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/civil_time.h"
#include "absl/time/time.h"
#include "devlet/common/strings.h"
#include "eval.h"

namespace devlet::cel::internal {

namespace {
using K = Type::Kind;
__extension__ typedef __int128 Int128;  // exact intermediate arithmetic
#define NO_OVERLOAD(name) return ctx.NoOverload(name, a, n)

// 0001-01-01T00:00:00Z and 9999-12-31T23:59:59Z, as cel-go's valid timestamp range.
constexpr int64_t kMinSeconds = -62135596800;
constexpr int64_t kMaxSeconds = 253402300799;

bool Digits(std::string_view s, size_t pos, size_t n, int64_t* out) {
  if (pos + n > s.size()) return false;
  int64_t v = 0;
  for (size_t i = 0; i < n; ++i) {
    const char c = s[pos + i];
    if (c < '0' || c > '9') return false;
    v = v * 10 + (c - '0');
  }
  *out = v;
  return true;
}

// RFC 3339 (Go's time.RFC3339 layout, which also accepts fractional seconds). `*offset` is the
// numeric zone offset in seconds, or nullopt for "Z".
bool ParseRfc3339(std::string_view s, int64_t* seconds, uint32_t* nanos,
                  std::optional<int64_t>* zone_offset) {
  int64_t y, mo, d, h, mi, se;
  if (!Digits(s, 0, 4, &y) || s.size() < 20 || s[4] != '-' || !Digits(s, 5, 2, &mo) || s[7] != '-' ||
      !Digits(s, 8, 2, &d) || (s[10] != 'T' && s[10] != 't') || !Digits(s, 11, 2, &h) || s[13] != ':' ||
      !Digits(s, 14, 2, &mi) || s[16] != ':' || !Digits(s, 17, 2, &se)) {
    return false;
  }
  size_t pos = 19;
  int64_t frac = 0;
  if (pos < s.size() && s[pos] == '.') {
    ++pos;
    size_t digits = 0;
    while (pos < s.size() && s[pos] >= '0' && s[pos] <= '9') {
      if (digits < 9) frac = frac * 10 + (s[pos] - '0');
      ++digits;
      ++pos;
    }
    if (digits == 0) return false;
    for (size_t i = digits; i < 9; ++i) frac *= 10;
  }
  int64_t offset = 0;
  *zone_offset = std::nullopt;
  if (pos < s.size() && (s[pos] == 'Z' || s[pos] == 'z')) {
    ++pos;
  } else if (pos < s.size() && (s[pos] == '+' || s[pos] == '-')) {
    int64_t oh, om;
    if (!Digits(s, pos + 1, 2, &oh) || pos + 3 >= s.size() || s[pos + 3] != ':' || !Digits(s, pos + 4, 2, &om)) {
      return false;
    }
    if (oh > 23 || om > 59) return false;
    offset = (oh * 3600 + om * 60) * (s[pos] == '-' ? -1 : 1);
    *zone_offset = offset;
    pos += 6;
  } else {
    return false;
  }
  if (pos != s.size()) return false;
  if (mo < 1 || mo > 12 || d < 1 || h > 23 || mi > 59 || se > 59) return false;
  const absl::CivilSecond cs(y, mo, d, h, mi, se);
  if (cs.day() != d || cs.month() != mo) return false;  // e.g. February 30
  const int64_t unix = absl::ToUnixSeconds(absl::FromCivil(cs, absl::UTCTimeZone())) - offset;
  *seconds = unix;
  *nanos = static_cast<uint32_t>(frac);
  return true;
}

// The Go location time.Parse gives a timestamp literal, as a kTimestamp's Val::sub (only map keys
// tell them apart: Go's time.Time compares its location pointer). "Z" is UTC (nil); an offset
// equal to the local zone's is time.Local (Kubernetes' API server runs in UTC, so +00:00);
// whole-hour offsets from -12 to +14 are FixedZones Go caches (one per offset); any other offset
// gets a FixedZone of its own: a fresh id each parse, so two parses never match (ids wrap after
// 227, so a match needs 227 such parses in between).
uint8_t TimestampZone(const std::optional<int64_t>& offset) {
  if (!offset) return kZoneUtc;
  if (*offset == 0) return kZoneLocal;
  if (*offset % 3600 == 0 && *offset >= -12 * 3600 && *offset <= 14 * 3600) {
    return static_cast<uint8_t>(kZoneLocal + 13 + *offset / 3600);  // 2..28
  }
  static std::atomic<uint32_t> next{0};
  return static_cast<uint8_t>(kZoneUnique + next.fetch_add(1, std::memory_order_relaxed) % 227);
}

Val MakeTimestamp(Ctx& ctx, int64_t seconds, int64_t nanos) {
  // Normalize nanos into [0, 1e9).
  seconds += nanos / 1'000'000'000;
  nanos %= 1'000'000'000;
  if (nanos < 0) {
    nanos += 1'000'000'000;
    seconds -= 1;
  }
  if (seconds < kMinSeconds || seconds > kMaxSeconds) return ctx.Error("timestamp overflow");
  Val r;
  r.kind = VK::kTimestamp;
  r.i = seconds;
  r.n = static_cast<uint32_t>(nanos);
  return r;
}

// Durations are seconds + nanoseconds in [0, 1e9) (floored): with go_durations within cel-go's
// range, a Go time.Duration (int64 nanoseconds, about +-292 years), else within protobuf's
// +-10000 years.
constexpr Int128 kNanosPerSecond = 1'000'000'000;
constexpr Int128 kMaxGoDurationNanos = INT64_MAX;
constexpr Int128 kMinGoDurationNanos = INT64_MIN;
constexpr Int128 kMaxProtoDurationNanos =
    static_cast<Int128>(315'576'000'000) * kNanosPerSecond + 999'999'999;

Int128 TotalNanos(const Val& v) { return static_cast<Int128>(v.i) * kNanosPerSecond + v.n; }

Val MakeDuration(Ctx& ctx, Int128 nanos) {
  // cel-go's checked int64 arithmetic on the nanoseconds.
  if (ctx.go_durations && (nanos > kMaxGoDurationNanos || nanos < kMinGoDurationNanos)) {
    return ctx.Error("integer overflow");
  }
  if (nanos > kMaxProtoDurationNanos || nanos < -kMaxProtoDurationNanos) {
    return ctx.Error("duration out of range");
  }
  Int128 secs = nanos / kNanosPerSecond;
  Int128 rem = nanos % kNanosPerSecond;
  if (rem < 0) {
    rem += kNanosPerSecond;
    secs -= 1;
  }
  Val r;
  r.kind = VK::kDuration;
  r.i = static_cast<int64_t>(secs);
  r.n = static_cast<uint32_t>(rem);
  return r;
}

// Go's time.ParseDuration: int64 nanoseconds ("-9223372036854775808ns" is the smallest) with
// `go_range`, else protobuf's +-315,576,000,000.999999999 s.
bool ParseGoDuration(std::string_view s, bool go_range, Int128* out) {
  const Int128 max_neg = go_range ? -kMinGoDurationNanos : kMaxProtoDurationNanos;
  const Int128 max_pos = go_range ? kMaxGoDurationNanos : kMaxProtoDurationNanos;
  if (s.empty()) return false;
  bool neg = false;
  if (s[0] == '-' || s[0] == '+') {
    neg = s[0] == '-';
    s.remove_prefix(1);
  }
  if (s == "0") {
    *out = 0;
    return true;
  }
  if (s.empty()) return false;
  double total = 0;  // nanoseconds, checked against int64 at the end
  Int128 exact = 0;
  while (!s.empty()) {
    size_t i = 0;
    Int128 whole = 0;
    bool any = false;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9') {
      whole = whole * 10 + (s[i] - '0');
      if (whole > (static_cast<Int128>(1) << 100)) return false;
      ++i;
      any = true;
    }
    double frac = 0, scale = 1;
    if (i < s.size() && s[i] == '.') {
      ++i;
      while (i < s.size() && s[i] >= '0' && s[i] <= '9') {
        scale /= 10;
        frac += (s[i] - '0') * scale;
        ++i;
        any = true;
      }
    }
    if (!any) return false;
    size_t u = i;
    while (u < s.size() && !(s[u] >= '0' && s[u] <= '9') && s[u] != '.') ++u;
    const std::string_view unit = s.substr(i, u - i);
    int64_t mult;
    if (unit == "ns") {
      mult = 1;
    } else if (unit == "us" || unit == "\xc2\xb5s" || unit == "\xce\xbcs") {
      mult = 1'000;
    } else if (unit == "ms") {
      mult = 1'000'000;
    } else if (unit == "s") {
      mult = 1'000'000'000;
    } else if (unit == "m") {
      mult = 60'000'000'000;
    } else if (unit == "h") {
      mult = 3'600'000'000'000;
    } else {
      return false;
    }
    exact += whole * mult + static_cast<Int128>(frac * static_cast<double>(mult));
    total += static_cast<double>(whole) * static_cast<double>(mult);
    if (exact > max_neg || total > 1e30) return false;
    s.remove_prefix(u);
  }
  if (!neg && exact > max_pos) return false;
  *out = neg ? -exact : exact;
  return true;
}

Val Timestamp(Ctx& ctx, const Val* a, uint32_t n) {
  if (a[0].kind == VK::kTimestamp) return a[0];
  if (a[0].kind == VK::kInt) return MakeTimestamp(ctx, a[0].i, 0);
  if (a[0].kind != VK::kString) NO_OVERLOAD("timestamp");
  int64_t seconds;
  uint32_t nanos;
  std::optional<int64_t> offset;
  if (!ParseRfc3339(a[0].str(), &seconds, &nanos, &offset)) {
    return ctx.Error("type conversion error from 'string' to 'google.protobuf.Timestamp'");
  }
  Val r = MakeTimestamp(ctx, seconds, nanos);
  if (!r.is_error()) {
    r.sub = TimestampZone(offset);
    r.tz_minutes = static_cast<int16_t>(offset.value_or(0) / 60);
  }
  return r;
}

Val Duration(Ctx& ctx, const Val* a, uint32_t n) {
  if (a[0].kind == VK::kDuration) return a[0];
  if (a[0].kind != VK::kString) NO_OVERLOAD("duration");
  Int128 nanos;
  if (!ParseGoDuration(a[0].str(), ctx.go_durations, &nanos)) {
    return ctx.Error("type conversion error from 'string' to 'google.protobuf.Duration'");
  }
  return MakeDuration(ctx, nanos);
}

// Go's strconv.Atoi (base 10, an optional sign, no spaces or underscores), with its error text.
bool GoAtoi(std::string_view s, int64_t* out, std::string* error) {
  size_t p = 0;
  const bool neg = !s.empty() && s[0] == '-';
  if (!s.empty() && (s[0] == '+' || s[0] == '-')) p = 1;
  if (p == s.size()) {
    *error = "strconv.Atoi: parsing " + GoQuote(s) + ": invalid syntax";
    return false;
  }
  uint64_t v = 0;
  bool overflow = false;
  for (size_t i = p; i < s.size(); ++i) {
    if (s[i] < '0' || s[i] > '9') {
      *error = "strconv.Atoi: parsing " + GoQuote(s) + ": invalid syntax";
      return false;
    }
    const uint64_t d = static_cast<uint64_t>(s[i] - '0');
    if (v > (UINT64_MAX - d) / 10) {
      overflow = true;
    } else {
      v = v * 10 + d;
    }
  }
  if (overflow || v > (neg ? uint64_t{1} << 63 : (uint64_t{1} << 63) - 1)) {
    *error = "strconv.Atoi: parsing " + GoQuote(s) + ": value out of range";
    return false;
  }
  *out = neg ? static_cast<int64_t>(0 - v) : static_cast<int64_t>(v);
  return true;
}

// The zone argument of the get* accessors, as cel-go's stdlib inTimeZone resolves it: with a ':'
// it is "hours:minutes" (Go's Atoi each, any values, the minutes subtracted when the text starts
// with '-'), a fixed offset of any size; otherwise Go's time.LoadLocation: "" and "UTC" are UTC,
// "Local" is time.Local, which is UTC in Kubernetes' API server (never the host's zone here), a
// name with ".." or a leading '/' or '\\' is refused, anything else is a zoneinfo file.
// `*offset` is set for fixed offsets (seconds east of UTC), `*tz` otherwise.
bool Zone(std::string_view name, absl::TimeZone* tz, std::optional<int64_t>* offset,
          std::string* error) {
  *offset = std::nullopt;
  *tz = absl::UTCTimeZone();
  const size_t colon = name.find(':');
  if (colon != std::string_view::npos) {
    int64_t hours, minutes;
    if (!GoAtoi(name.substr(0, colon), &hours, error) ||
        !GoAtoi(name.substr(colon + 1), &minutes, error)) {
      return false;
    }
    // Go: offset = hr*60 -/+ min in int, then time.Duration(offset) * time.Minute, Seconds(),
    // int(): int64 arithmetic that wraps, then a truncating division.
    const uint64_t h = static_cast<uint64_t>(hours) * 60;
    const uint64_t m = static_cast<uint64_t>(minutes);
    const auto total_minutes = static_cast<int64_t>(name[0] == '-' ? h - m : h + m);
    const auto nanos =
        static_cast<int64_t>(static_cast<uint64_t>(total_minutes) * 60'000'000'000ULL);
    *offset = nanos / 1'000'000'000;
    return true;
  }
  // "localtime" is a zoneinfo link to /etc/localtime (Debian), the host's zone: taken as UTC like
  // time.Local, so that no host setting changes a result.
  if (name.empty() || name == "UTC" || name == "Local" || name == "localtime") return true;
  if (name.find("..") != std::string_view::npos || name[0] == '/' || name[0] == '\\') {
    *error = "time: invalid location name";
    return false;
  }
  // absl takes "UTC0" as UTC without a file (Go has none); it refuses the leap-second "right/"
  // zones, which Go reads ignoring the leap seconds: the zone without the prefix differs only by
  // those seconds around its transitions.
  std::string file(name.starts_with("right/") ? name.substr(6) : name);
  if (name != "UTC0" && absl::LoadTimeZone(file, tz)) return true;
  // A file that is not zoneinfo data (zone.tab) is Go's "malformed time zone information".
  const char* dir = std::getenv("TZDIR");
  struct stat st;
  const std::string zoneinfo = dir != nullptr && *dir != '\0' ? dir : "/usr/share/zoneinfo";
  if (name != "UTC0" && stat((zoneinfo + "/" + file).c_str(), &st) == 0 && S_ISREG(st.st_mode)) {
    *error = "malformed time zone information";
  } else {
    *error = "unknown time zone " + std::string(name);
  }
  return false;
}

enum class Part { kFullYear, kMonth, kDate, kDayOfMonth, kDayOfWeek, kDayOfYear, kHours, kMinutes, kSeconds, kMillis };

template <Part kPart>
Val Get(Ctx& ctx, const Val* a, uint32_t n) {
  static constexpr const char* kNames[] = {"getFullYear", "getMonth", "getDate", "getDayOfMonth",
                                           "getDayOfWeek", "getDayOfYear", "getHours", "getMinutes",
                                           "getSeconds", "getMilliseconds"};
  const char* name = kNames[static_cast<int>(kPart)];
  if (a[0].kind == VK::kDuration && n == 1) {
    const Int128 d = TotalNanos(a[0]);
    switch (kPart) {
      case Part::kHours: return Val::Int(static_cast<int64_t>(d / (3600 * kNanosPerSecond)));
      case Part::kMinutes: return Val::Int(static_cast<int64_t>(d / (60 * kNanosPerSecond)));
      case Part::kSeconds: return Val::Int(static_cast<int64_t>(d / kNanosPerSecond));
      case Part::kMillis: return Val::Int(static_cast<int64_t>(d / 1'000'000));
      default: NO_OVERLOAD(name);
    }
  }
  if (a[0].kind != VK::kTimestamp || (n == 2 && a[1].kind != VK::kString)) NO_OVERLOAD(name);
  absl::TimeZone tz;
  std::optional<int64_t> offset;
  std::string error;
  if (!Zone(n == 2 ? a[1].str() : std::string_view(), &tz, &offset, &error)) {
    return ctx.Error(error);
  }
  const absl::Time t = absl::FromUnixSeconds(a[0].i) + absl::Nanoseconds(a[0].n);
  // A fixed offset of any size (Go's FixedZone has no bounds; absl's is limited to a day).
  const absl::CivilSecond cs =
      offset ? absl::ToCivilSecond(t + absl::Seconds(*offset), absl::UTCTimeZone())
             : absl::ToCivilSecond(t, tz);
  switch (kPart) {
    case Part::kFullYear: return Val::Int(cs.year());
    case Part::kMonth: return Val::Int(cs.month() - 1);
    case Part::kDate: return Val::Int(cs.day());
    case Part::kDayOfMonth: return Val::Int(cs.day() - 1);
    case Part::kDayOfWeek: {
      // absl::Weekday: monday = 0 ... sunday = 6; CEL: Sunday = 0.
      const int wd = static_cast<int>(absl::GetWeekday(cs));
      return Val::Int((wd + 1) % 7);
    }
    case Part::kDayOfYear: return Val::Int(absl::GetYearDay(cs) - 1);
    case Part::kHours: return Val::Int(cs.hour());
    case Part::kMinutes: return Val::Int(cs.minute());
    case Part::kSeconds: return Val::Int(cs.second());
    case Part::kMillis: return Val::Int(a[0].n / 1'000'000);
  }
  NO_OVERLOAD(name);
}

#undef NO_OVERLOAD
}  // namespace

std::string FormatTimestamp(int64_t seconds, uint32_t nanos, int tz_minutes) {
  const absl::CivilSecond cs = absl::ToCivilSecond(
      absl::FromUnixSeconds(seconds) + absl::Minutes(tz_minutes), absl::UTCTimeZone());
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%04d-%02d-%02dT%02d:%02d:%02d", static_cast<int>(cs.year()), cs.month(),
                cs.day(), cs.hour(), cs.minute(), cs.second());
  std::string out = buf;
  if (nanos != 0) {
    std::snprintf(buf, sizeof(buf), ".%09u", nanos);
    std::string frac = buf;
    while (frac.back() == '0') frac.pop_back();
    out += frac;
  }
  if (tz_minutes == 0) return out + "Z";
  const int m = tz_minutes < 0 ? -tz_minutes : tz_minutes;
  std::snprintf(buf, sizeof(buf), "%c%02d:%02d", tz_minutes < 0 ? '-' : '+', m / 60, m % 60);
  return out + buf;
}

std::string FormatDuration(int64_t seconds, uint32_t nanos) {
  // cel-go: strconv.FormatFloat(d.Seconds(), 'f', -1, 64) + "s", digits exact here.
  Int128 total = static_cast<Int128>(seconds) * kNanosPerSecond + nanos;
  const bool neg = total < 0;
  if (neg) total = -total;
  const auto whole = static_cast<uint64_t>(total / kNanosPerSecond);
  const auto frac = static_cast<uint64_t>(total % kNanosPerSecond);
  // Appended, not `"-" + std::to_string(...)`: GCC 12 at -O3 (Release) reports that prepend as
  // an overlapping memcpy (-Werror=restrict), a false positive.
  std::string out = neg ? "-" : "";
  out += std::to_string(whole);
  if (frac != 0) {
    char buf[16];
    std::snprintf(buf, sizeof(buf), "%09llu", static_cast<unsigned long long>(frac));
    std::string f = buf;
    while (f.back() == '0') f.pop_back();
    out += "." + f;
  }
  return out + "s";
}

int64_t DurationNanosSaturated(const Val& v, bool* overflow) {
  const Int128 t = TotalNanos(v);
  *overflow = t > INT64_MAX || t < INT64_MIN;
  return *overflow ? 0 : static_cast<int64_t>(t);
}

Val TimeAdd(Ctx& ctx, const Val& x, const Val& y, bool subtract) {
  if (x.kind == VK::kTimestamp && y.kind == VK::kDuration) {
    // cel-go subtracts by adding the negated duration: the smallest one cannot be negated.
    if (ctx.go_durations && subtract && TotalNanos(y) == kMinGoDurationNanos) {
      return ctx.Error("integer overflow");
    }
    const Int128 t = TotalNanos(x) + (subtract ? -TotalNanos(y) : TotalNanos(y));
    Int128 secs = t / kNanosPerSecond;
    Int128 rem = t % kNanosPerSecond;
    if (rem < 0) {
      rem += kNanosPerSecond;
      secs -= 1;
    }
    if (secs < kMinSeconds || secs > kMaxSeconds) return ctx.Error("timestamp overflow");
    Val r = MakeTimestamp(ctx, static_cast<int64_t>(secs), static_cast<int64_t>(rem));
    r.sub = x.sub;  // Go's Time.Add keeps the location
    r.tz_minutes = x.tz_minutes;
    return r;
  }
  if (!subtract && x.kind == VK::kDuration && y.kind == VK::kTimestamp) return TimeAdd(ctx, y, x, false);
  if (x.kind == VK::kDuration && y.kind == VK::kDuration) {
    return MakeDuration(ctx, TotalNanos(x) + (subtract ? -TotalNanos(y) : TotalNanos(y)));
  }
  if (subtract && x.kind == VK::kTimestamp && y.kind == VK::kTimestamp) {
    return MakeDuration(ctx, TotalNanos(x) - TotalNanos(y));
  }
  Val args[2] = {x, y};
  return ctx.NoOverload(subtract ? "_-_" : "_+_", args, 2);
}


Val NegateDuration(Ctx& ctx, const Val& d) { return MakeDuration(ctx, -TotalNanos(d)); }

std::vector<FunctionDef> TimeFunctions() {
  return {
      {"timestamp", Timestamp, true, false, 0, nullptr, K::kTimestamp, 1, 1,
       "string -> timestamp; int -> timestamp; timestamp -> timestamp"},
      {"duration", Duration, true, false, 0, nullptr, K::kDuration, 1, 1,
       "string -> duration; duration -> duration"},
      {"getFullYear", Get<Part::kFullYear>, false, true, 0, nullptr, K::kInt, 1, 2,
       "timestamp -> int; timestamp, string -> int"},
      {"getMonth", Get<Part::kMonth>, false, true, 0, nullptr, K::kInt, 1, 2,
       "timestamp -> int; timestamp, string -> int"},
      {"getDate", Get<Part::kDate>, false, true, 0, nullptr, K::kInt, 1, 2,
       "timestamp -> int; timestamp, string -> int"},
      {"getDayOfMonth", Get<Part::kDayOfMonth>, false, true, 0, nullptr, K::kInt, 1, 2,
       "timestamp -> int; timestamp, string -> int"},
      {"getDayOfWeek", Get<Part::kDayOfWeek>, false, true, 0, nullptr, K::kInt, 1, 2,
       "timestamp -> int; timestamp, string -> int"},
      {"getDayOfYear", Get<Part::kDayOfYear>, false, true, 0, nullptr, K::kInt, 1, 2,
       "timestamp -> int; timestamp, string -> int"},
      {"getHours", Get<Part::kHours>, false, true, 0, nullptr, K::kInt, 1, 2,
       "timestamp -> int; timestamp, string -> int; duration -> int"},
      {"getMinutes", Get<Part::kMinutes>, false, true, 0, nullptr, K::kInt, 1, 2,
       "timestamp -> int; timestamp, string -> int; duration -> int"},
      {"getSeconds", Get<Part::kSeconds>, false, true, 0, nullptr, K::kInt, 1, 2,
       "timestamp -> int; timestamp, string -> int; duration -> int"},
      {"getMilliseconds", Get<Part::kMillis>, false, true, 0, nullptr, K::kInt, 1, 2,
       "timestamp -> int; timestamp, string -> int; duration -> int"},
  };
}

}  // namespace devlet::cel::internal
