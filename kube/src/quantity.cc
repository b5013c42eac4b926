// Quantity format check: the grammar of k8s.io/apimachinery/pkg/api/resource ParseQuantity.
#include <string>
#include <string_view>

#include "decimal.h"
#include "devlet/common/status.h"
#include "devlet/kube/meta.h"
#include "devlet/kube/quantity.h"

namespace devlet::kube {
namespace {

bool IsDigit(char c) {
  return c >= '0' && c <= '9';
}

// Consumes <sign>?<digits>(.<digits>?)? or .<digits>; returns false on no digits at all.
bool ConsumeNumber(std::string_view& s, bool allow_fraction, bool* any_nonzero) {
  std::size_t i = 0;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) {
    ++i;
  }
  std::size_t digits = 0;
  while (i < s.size() && IsDigit(s[i])) {
    if (any_nonzero != nullptr && s[i] != '0') {
      *any_nonzero = true;
    }
    ++i;
    ++digits;
  }
  if (allow_fraction && i < s.size() && s[i] == '.') {
    ++i;
    while (i < s.size() && IsDigit(s[i])) {
      if (any_nonzero != nullptr && s[i] != '0') {
        *any_nonzero = true;
      }
      ++i;
      ++digits;
    }
  }
  if (digits == 0) {
    return false;
  }
  s.remove_prefix(i);
  return true;
}

bool IsSuffix(std::string_view s) {
  static constexpr std::string_view kSuffixes[] = {"",  "n", "u",  "m",  "k",  "M",  "G",  "T",
                                                   "P", "E", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"};
  for (std::string_view suffix : kSuffixes) {
    if (s == suffix) {
      return true;
    }
  }
  if (!s.empty() && (s[0] == 'e' || s[0] == 'E')) {
    std::string_view rest = s.substr(1);
    return ConsumeNumber(rest, /*allow_fraction=*/false, nullptr) && rest.empty();
  }
  return false;
}

}  // namespace

bool Quantity::IsValidFormat(std::string_view text) {
  if (text.empty() || text.size() > 256) {
    return false;
  }
  std::string_view rest = text;
  if (!ConsumeNumber(rest, /*allow_fraction=*/true, nullptr)) {
    return false;
  }
  return IsSuffix(rest);
}

absl::StatusOr<Quantity> Quantity::Parse(std::string_view text) {
  if (!IsValidFormat(text)) {
    std::string shown(text.substr(0, 64));
    return InvalidArgument("quantity \"" + shown + (text.size() > 64 ? "...\"" : "\"") +
                           " must match the regular expression "
                           "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'");
  }
  return Quantity(std::string(text));
}

const std::string& Quantity::str() const {
  static const std::string* const kZero = new std::string("0");
  return text_.empty() ? *kZero : text_;
}

absl::StatusOr<std::int64_t> QuantityScaledValue(const Quantity& q, int scale) {
  if (q.empty()) return 0;
  const std::string& text = q.str();
  const std::optional<internal::Dec> value = internal::ParseDec(text);
  std::optional<std::int64_t> scaled;
  if (value) scaled = internal::ScaledCeil(*value, scale);
  if (!scaled) {
    return OutOfRange("quantity \"" + text.substr(0, 64) + (text.size() > 64 ? "...\"" : "\"") +
                      (scale == 0 ? "" : " scaled by 10^" + std::to_string(scale)) +
                      " does not fit in a 64-bit integer");
  }
  return *scaled;
}

int Quantity::Sign() const {
  if (text_.empty()) {
    return 0;
  }
  std::string_view rest = text_;
  bool nonzero = false;
  if (!ConsumeNumber(rest, /*allow_fraction=*/true, &nonzero) || !nonzero) {
    return 0;
  }
  return text_[0] == '-' ? -1 : 1;
}

}  // namespace devlet::kube
