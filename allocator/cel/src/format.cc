// The Kubernetes format library (k8s.io/apiserver pkg/cel/library/format.go, in the DRA selector
// environment since 1.31): `format.named(name)`, one constant per named format
// (`format.dns1123Label()`, ...) and `<format>.validate(string)`, which returns optional.none()
// for a valid string and otherwise an optional list of the validator's messages. The validators
// mirror the Go functions the library binds (apimachinery's name and label validation, and
// kube-openapi strfmt's uuid, byte, date and datetime checks); the messages are theirs to the
// byte, because a selector can compare or print them.
#include <array>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "eval.h"
#include "neturl.h"
#include "utf8.h"

namespace devlet::cel::internal {
namespace {

using K = Type::Kind;

// One named format: its CEL name and the regex size Kubernetes prices validate() with
// (Format.MaxRegexSize: the validator's regex length, or an estimate where it uses none).
struct NamedFormat {
  std::string_view name;
  uint32_t max_regex_size;
};

enum FormatId : uint8_t {
  kDns1123Label,
  kDns1123Subdomain,
  kDns1035Label,
  kQualifiedName,
  kDns1123LabelPrefix,
  kDns1123SubdomainPrefix,
  kDns1035LabelPrefix,
  kLabelValue,
  kUri,
  kUuid,
  kByte,
  kDate,
  kDatetime,
  kFormatCount,
};

// Indexed by FormatId. The uuid size is the length of strfmt's UUID pattern; date and datetime
// use the length of its date-time pattern; uri and byte are govalidator's regex sizes.
constexpr std::array<NamedFormat, kFormatCount> kFormats = {{
    {"dns1123Label", 30},
    {"dns1123Subdomain", 60},
    {"dns1035Label", 30},
    {"qualifiedName", 60},
    {"dns1123LabelPrefix", 30},
    {"dns1123SubdomainPrefix", 60},
    {"dns1035LabelPrefix", 30},
    {"labelValue", 40},
    {"uri", 1103},
    {"uuid", 70},
    {"byte", 84},
    {"date", 71},
    {"datetime", 71},
}};

// ---- Character classes and the anchored patterns of apimachinery's validators --------------

bool IsLowerAlnum(char c) {
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

bool IsAlnum(char c) {
  return IsLowerAlnum(c) || (c >= 'A' && c <= 'Z');
}

bool IsDigit(char c) {
  return c >= '0' && c <= '9';
}

bool IsHex(char c) {
  return IsDigit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

// ^[a-z0-9]([-a-z0-9]*[a-z0-9])?$
bool MatchesDns1123Label(std::string_view s) {
  if (s.empty() || !IsLowerAlnum(s.front()) || !IsLowerAlnum(s.back()))
    return false;
  for (char c : s) {
    if (!IsLowerAlnum(c) && c != '-')
      return false;
  }
  return true;
}

// ^<label>(\.<label>)*$
bool MatchesDns1123Subdomain(std::string_view s) {
  while (true) {
    const size_t dot = s.find('.');
    if (!MatchesDns1123Label(s.substr(0, dot)))
      return false;
    if (dot == std::string_view::npos)
      return true;
    s.remove_prefix(dot + 1);
  }
}

// ^[a-z]([-a-z0-9]*[a-z0-9])?$
bool MatchesDns1035Label(std::string_view s) {
  return MatchesDns1123Label(s) && s.front() >= 'a' && s.front() <= 'z';
}

// ^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$ (the name part of a label key)
bool MatchesLabelKeyName(std::string_view s) {
  if (s.empty() || !IsAlnum(s.front()) || !IsAlnum(s.back()))
    return false;
  for (char c : s) {
    if (!IsAlnum(c) && c != '-' && c != '_' && c != '.')
      return false;
  }
  return true;
}

// apimachinery's RegexError: the message, the examples, then the pattern.
std::string RegexError(std::string_view msg, std::string_view pattern,
                       std::initializer_list<std::string_view> examples) {
  std::string out(msg);
  if (examples.size() == 0) {
    out += " (regex used for validation is '";
  } else {
    out += " (e.g. ";
    bool first = true;
    for (std::string_view e : examples) {
      if (!first)
        out += " or ";
      first = false;
      out += "'";
      out += e;
      out += "', ";
    }
    out += "regex used for validation is '";
  }
  out += pattern;
  out += "')";
  return out;
}

constexpr std::string_view kDns1123LabelFmt = "[a-z0-9]([-a-z0-9]*[a-z0-9])?";
constexpr std::string_view kDns1123SubdomainFmt =
    "[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";
constexpr std::string_view kDns1035LabelFmt = "[a-z]([-a-z0-9]*[a-z0-9])?";
constexpr std::string_view kLabelKeyFmt = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
constexpr std::string_view kLabelValueFmt = "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?";
constexpr std::string_view kLabelKeyMsg =
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
    "alphanumeric character";

// Two generations of the length message: util/validation says "characters" (the DNS name
// validators), api/validate/content says "bytes" (label keys and values, and the subdomain check
// of a label key's prefix).
std::string MaxLenCharacters(int n) {
  return "must be no more than " + std::to_string(n) + " characters";
}

std::string MaxLenBytes(int n) {
  return "must be no more than " + std::to_string(n) + " bytes";
}

// util/validation IsDNS1123Label.
std::vector<std::string> Dns1123Label(std::string_view s) {
  std::vector<std::string> errs;
  if (s.size() > 63)
    errs.push_back(MaxLenCharacters(63));
  if (!MatchesDns1123Label(s)) {
    if (MatchesDns1123Subdomain(s)) {
      errs.emplace_back("must not contain dots");
    } else {
      errs.push_back(RegexError(
          "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or "
          "'-', and must start and end with an alphanumeric character",
          kDns1123LabelFmt, {"my-name", "123-abc"}));
    }
  }
  return errs;
}

constexpr std::string_view kDns1123SubdomainMsg =
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
    "'.', and must start and end with an alphanumeric character";

// util/validation IsDNS1123Subdomain (`bytes`: the api/validate/content copy, whose length
// message says bytes).
std::vector<std::string> Dns1123Subdomain(std::string_view s, bool bytes = false) {
  std::vector<std::string> errs;
  if (s.size() > 253)
    errs.push_back(bytes ? MaxLenBytes(253) : MaxLenCharacters(253));
  if (!MatchesDns1123Subdomain(s)) {
    errs.push_back(RegexError(kDns1123SubdomainMsg, kDns1123SubdomainFmt, {"example.com"}));
  }
  return errs;
}

// util/validation IsDNS1035Label.
std::vector<std::string> Dns1035Label(std::string_view s) {
  std::vector<std::string> errs;
  if (s.size() > 63)
    errs.push_back(MaxLenCharacters(63));
  if (!MatchesDns1035Label(s)) {
    errs.push_back(RegexError(
        "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with "
        "an alphabetic character, and end with an alphanumeric character",
        kDns1035LabelFmt, {"my-name", "abc-123"}));
  }
  return errs;
}

// api/validate/content IsLabelKey (IsQualifiedName).
std::vector<std::string> QualifiedName(std::string_view s) {
  std::vector<std::string> errs;
  std::string_view name = s;
  const size_t slash = s.find('/');
  if (slash != std::string_view::npos) {
    if (s.find('/', slash + 1) != std::string_view::npos) {
      errs.push_back("a valid label key " +
                     RegexError(kLabelKeyMsg, kLabelKeyFmt, {"MyName", "my.name", "123-abc"}) +
                     " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')");
      return errs;
    }
    const std::string_view prefix = s.substr(0, slash);
    name = s.substr(slash + 1);
    if (prefix.empty()) {
      errs.emplace_back("prefix part must be non-empty");
    } else {
      for (std::string& m : Dns1123Subdomain(prefix, /*bytes=*/true)) {
        errs.push_back("prefix part " + m);
      }
    }
  }
  if (name.empty()) {
    errs.emplace_back("name part must be non-empty");
  } else if (name.size() > 63) {
    errs.push_back("name part " + MaxLenBytes(63));
  }
  if (!MatchesLabelKeyName(name)) {
    errs.push_back("name part " +
                   RegexError(kLabelKeyMsg, kLabelKeyFmt, {"MyName", "my.name", "123-abc"}));
  }
  return errs;
}

// api/validate/content IsLabelValue.
std::vector<std::string> LabelValue(std::string_view s) {
  std::vector<std::string> errs;
  if (s.size() > 63)
    errs.push_back(MaxLenBytes(63));
  if (!s.empty() && !MatchesLabelKeyName(s)) {
    errs.push_back(RegexError(
        "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' "
        "or '.', and must start and end with an alphanumeric character",
        kLabelValueFmt, {"MyValue", "my_value", "12345"}));
  }
  return errs;
}

// apimachinery's maskTrailingDash for the *Prefix formats (generateName prefixes may end in '-'):
// it replaces the last TWO bytes with "a", so "ab-" is checked as "aa" and "-" stays as is.
std::string MaskTrailingDash(std::string_view s) {
  if (s.size() > 1 && s.back() == '-')
    return std::string(s.substr(0, s.size() - 2)) + "a";
  return std::string(s);
}

// strfmt's UUID pattern: (?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}$
// (a hexadecimal digit is never '-', so taking each optional hyphen greedily is exact).
bool IsUuid(std::string_view s) {
  size_t i = 0;
  constexpr int kGroups[] = {8, 4, 4, 4, 12};
  for (int g = 0; g < 5; ++g) {
    if (g > 0 && i < s.size() && s[i] == '-')
      ++i;
    for (int k = 0; k < kGroups[g]; ++k, ++i) {
      if (i >= s.size() || !IsHex(s[i]))
        return false;
    }
  }
  return i == s.size();
}

// govalidator's IsBase64 pattern: groups of four from [A-Za-z0-9+/], the last one possibly padded
// ("xx==" or "xxx="); the empty string does not match.
bool IsBase64(std::string_view s) {
  auto b64 = [](char c) {
    return IsAlnum(c) || c == '+' || c == '/';
  };
  if (s.empty() || s.size() % 4 != 0)
    return false;
  const size_t last = s.size() - 4;
  for (size_t i = 0; i < last; ++i) {
    if (!b64(s[i]))
      return false;
  }
  const std::string_view tail = s.substr(last);
  if (!b64(tail[0]) || !b64(tail[1]))
    return false;
  if (tail[2] == '=')
    return tail[3] == '=';
  return b64(tail[2]) && (tail[3] == '=' || b64(tail[3]));
}

// Go's time.Parse("2006-01-02", s) succeeds: four-digit year, two-digit month 1-12, two-digit
// day within the month (proleptic Gregorian leap years, year 0 included).
bool IsDate(std::string_view s) {
  if (s.size() != 10 || s[4] != '-' || s[7] != '-')
    return false;
  for (size_t i : {0, 1, 2, 3, 5, 6, 8, 9}) {
    if (!IsDigit(s[i]))
      return false;
  }
  auto num = [&](size_t at, size_t len) {
    int v = 0;
    for (size_t i = at; i < at + len; ++i)
      v = v * 10 + (s[i] - '0');
    return v;
  };
  const int year = num(0, 4), month = num(5, 2), day = num(8, 2);
  if (month < 1 || month > 12)
    return false;
  static constexpr int kDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  const bool leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
  const int days = kDays[month - 1] + (month == 2 && leap ? 1 : 0);
  return day >= 1 && day <= days;
}

// The zone of strfmt's date-time pattern: "z" or [+-]dd:dd (after lower-casing).
bool IsZone(std::string_view s) {
  if (s == "z")
    return true;
  return s.size() == 6 && (s[0] == '+' || s[0] == '-') && IsDigit(s[1]) && IsDigit(s[2]) &&
         s[3] == ':' && IsDigit(s[4]) && IsDigit(s[5]);
}

bool AllDigits(std::string_view s) {
  for (char c : s) {
    if (!IsDigit(c))
      return false;
  }
  return true;
}

// strfmt's IsDateTime: the lower-cased text split at every 't'; the first part a date, the second
// matching ^(dd):(dd):(dd)(.[0-9]+)?(z|[+-]dd:dd)$ with hours <= 23 and minutes, seconds <= 59
// (text comparison); parts after a second 't' are ignored. The `.` of the fraction is any one
// character but a newline (the pattern's typo for "\.").
bool IsDateTime(std::string_view text) {
  if (text.size() < 4)
    return false;
  // Only ASCII case matters: no other character lowers to one the pattern looks at.
  std::string lower(text);
  for (char& c : lower) {
    if (c >= 'A' && c <= 'Z')
      c = static_cast<char>(c - 'A' + 'a');
  }
  const std::string_view s = lower;
  const size_t t = s.find('t');
  if (t == std::string_view::npos || !IsDate(s.substr(0, t)))
    return false;
  std::string_view time = s.substr(t + 1);
  time = time.substr(0, time.find('t'));
  if (time.size() < 8 || !IsDigit(time[0]) || !IsDigit(time[1]) || time[2] != ':' ||
      !IsDigit(time[3]) || !IsDigit(time[4]) || time[5] != ':' || !IsDigit(time[6]) ||
      !IsDigit(time[7])) {
    return false;
  }
  std::string_view rest = time.substr(8);
  bool ok = IsZone(rest);
  if (!ok && !rest.empty() && rest[0] != '\n') {
    // One character (a UTF-8 sequence, or one invalid byte as Go's regexp reads it), digits,
    // then the zone.
    const size_t n = Utf8SequenceLength(rest, 0);
    const std::string_view after = rest.substr(n == 0 ? 1 : n);
    for (size_t zone : {size_t{1}, size_t{6}}) {
      if (after.size() > zone && IsZone(after.substr(after.size() - zone)) &&
          AllDigits(after.substr(0, after.size() - zone))) {
        ok = true;
      }
    }
  }
  return ok && time.substr(0, 2) <= "23" && time.substr(3, 2) <= "59" && time.substr(6, 2) <= "59";
}

std::vector<std::string> Validate(FormatId id, std::string_view s) {
  switch (id) {
    case kDns1123Label:
      return Dns1123Label(s);
    case kDns1123Subdomain:
      return Dns1123Subdomain(s);
    case kDns1035Label:
      return Dns1035Label(s);
    case kQualifiedName:
      return QualifiedName(s);
    case kDns1123LabelPrefix:
      return Dns1123Label(MaskTrailingDash(s));
    case kDns1123SubdomainPrefix:
      return Dns1123Subdomain(MaskTrailingDash(s));
    case kDns1035LabelPrefix:
      return Dns1035Label(MaskTrailingDash(s));
    case kLabelValue:
      return LabelValue(s);
    case kUri: {
      // url.ParseRequestURI's error, as written by Go: `parse "<text>": <reason>`.
      GoUrl url;
      std::string error;
      if (ParseRequestUri(s, &url, &error))
        return {};
      return {error};
    }
    case kUuid:
      if (IsUuid(s))
        return {};
      return {"does not match the UUID format"};
    case kByte:
      if (IsBase64(s))
        return {};
      return {"invalid base64"};
    case kDate:
      if (IsDate(s))
        return {};
      return {"invalid date"};
    case kDatetime:
      if (IsDateTime(s))
        return {};
      return {"invalid datetime"};
    case kFormatCount:
      break;
  }
  return {};
}

// ---- CEL bindings ---------------------------------------------------------------------------

Val FormatVal(FormatId id) {
  Val r;
  r.kind = VK::kFormat;
  r.i = id;
  return r;
}

template <FormatId kId>
Val FormatConstant(Ctx&, const Val*, uint32_t) {
  return FormatVal(kId);
}

Val FormatNamed(Ctx& ctx, const Val* a, uint32_t n) {
  if (a[0].kind != VK::kString)
    return ctx.NoOverload("format.named", a, n);
  for (size_t i = 0; i < kFormats.size(); ++i) {
    if (kFormats[i].name == a[0].str()) {
      return ctx.Optional(FormatVal(static_cast<FormatId>(i)));
    }
  }
  return Val::Opt(nullptr);
}

Val FormatValidate(Ctx& ctx, const Val* a, uint32_t n) {
  if (a[0].kind != VK::kFormat || a[1].kind != VK::kString) {
    return ctx.NoOverload("validate", a, n);
  }
  const std::vector<std::string> errs = Validate(static_cast<FormatId>(a[0].i), a[1].str());
  if (errs.empty())
    return Val::Opt(nullptr);
  Val list = ctx.ListWithCapacity(static_cast<uint32_t>(errs.size()));
  for (const std::string& e : errs) {
    const Val s = ctx.String(e);
    list = ctx.Append(list, &s, 1);
  }
  return ctx.Optional(list);
}

// Kubernetes' CallCost for validate: the string's traversal, ceil(0.1 * (1 + code points)),
// times the format's regex size at 0.25 per character (a non-string argument counts as size 1;
// the cost is charged before the overload fails). Without a format receiver it is cel-go's 1.
uint64_t ValidateCost(const Val* a, uint32_t) {
  if (a[0].kind != VK::kFormat)
    return 1;
  const uint64_t size = a[1].kind == VK::kString ? Utf8CountCodePoints(a[1].str()) : 1;
  return CostOf(0.1, 1 + size) * CostOf(0.25, kFormats[a[0].i].max_regex_size);
}

}  // namespace

std::string_view FormatName(int64_t id) {
  return id >= 0 && id < kFormatCount ? kFormats[id].name : std::string_view();
}

int64_t FormatIdOf(std::string_view name) {
  for (size_t i = 0; i < kFormats.size(); ++i) {
    if (kFormats[i].name == name)
      return static_cast<int64_t>(i);
  }
  return -1;
}

std::vector<FunctionDef> FormatFunctions() {
  constexpr uint32_t kF = kFormatLibrary;
  return {
      {"format.named", FormatNamed, true, false, kF, nullptr, K::kOptional, 1, 1,
       "string -> optional(format)", KC::kNominalByName},
      {"validate", FormatValidate, false, true, kF, ValidateCost, K::kOptional, 2, 2,
       "format, string -> optional(list(string))", KC::kValidate},
      {"format.dns1123Label", FormatConstant<kDns1123Label>, true, false, kF, nullptr, K::kFormat,
       0, 0},
      {"format.dns1123Subdomain", FormatConstant<kDns1123Subdomain>, true, false, kF, nullptr,
       K::kFormat, 0, 0},
      {"format.dns1035Label", FormatConstant<kDns1035Label>, true, false, kF, nullptr, K::kFormat,
       0, 0},
      {"format.qualifiedName", FormatConstant<kQualifiedName>, true, false, kF, nullptr, K::kFormat,
       0, 0},
      {"format.dns1123LabelPrefix", FormatConstant<kDns1123LabelPrefix>, true, false, kF, nullptr,
       K::kFormat, 0, 0},
      {"format.dns1123SubdomainPrefix", FormatConstant<kDns1123SubdomainPrefix>, true, false, kF,
       nullptr, K::kFormat, 0, 0},
      {"format.dns1035LabelPrefix", FormatConstant<kDns1035LabelPrefix>, true, false, kF, nullptr,
       K::kFormat, 0, 0},
      {"format.labelValue", FormatConstant<kLabelValue>, true, false, kF, nullptr, K::kFormat, 0,
       0},
      {"format.uri", FormatConstant<kUri>, true, false, kF, nullptr, K::kFormat, 0, 0},
      {"format.uuid", FormatConstant<kUuid>, true, false, kF, nullptr, K::kFormat, 0, 0},
      {"format.byte", FormatConstant<kByte>, true, false, kF, nullptr, K::kFormat, 0, 0},
      {"format.date", FormatConstant<kDate>, true, false, kF, nullptr, K::kFormat, 0, 0},
      {"format.datetime", FormatConstant<kDatetime>, true, false, kF, nullptr, K::kFormat, 0, 0},
  };
}

}  // namespace devlet::cel::internal
