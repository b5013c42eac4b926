// Port of k8s.io/apimachinery/pkg/api/resource Quantity semantics (see quantity.h). The structure
// follows upstream's two representations: an int64 mantissa with a base-10 scale, and an
// arbitrary-precision decimal (gopkg.in/inf.v0 Dec: unscaled big integer, value = unscaled *
// 10^-scale). Every observable rule (which form a value lands in, its scale, the remembered text)
// follows upstream so that String(), AsInt64() and AsApproximateFloat64() agree bit for bit.
#include "devlet/cel/quantity.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "devlet/common/status.h"

namespace devlet::cel {
namespace internal_quantity {
namespace {

// ---- Small integer helpers (Go semantics: wrapping int32 scale arithmetic). ----------------------

int32_t WrapAdd32(int32_t a, int32_t b) {
  return static_cast<int32_t>(static_cast<uint32_t>(a) + static_cast<uint32_t>(b));
}
int32_t WrapNeg32(int32_t a) { return static_cast<int32_t>(0u - static_cast<uint32_t>(a)); }
int64_t WrapNeg64(int64_t a) { return static_cast<int64_t>(0ull - static_cast<uint64_t>(a)); }

constexpr int64_t kMaxInt64 = std::numeric_limits<int64_t>::max();
constexpr int64_t kMinInt64 = std::numeric_limits<int64_t>::min();

// a * b with overflow detection (Go's int64Multiply / int64MultiplyScale are exact overflow checks).
bool MulOverflow(int64_t a, int64_t b, int64_t* out) { return __builtin_mul_overflow(a, b, out); }
bool AddOverflow(int64_t a, int64_t b, int64_t* out) { return __builtin_add_overflow(a, b, out); }

// positiveScaleInt64: base * 10^scale, nullopt on overflow.
std::optional<int64_t> PositiveScale(int64_t base, int64_t scale) {
  if (base == 0 || scale == 0) return base;
  int64_t value = base;
  for (int64_t i = 0; i < scale; ++i) {
    if (MulOverflow(value, 10, &value)) return std::nullopt;
  }
  return value;
}

// negativeScaleInt64: base / 10^scale rounded away from zero; exact = no fraction was dropped.
std::pair<int64_t, bool> NegativeScale(int64_t base, int64_t scale) {
  if (scale == 0) return {base, true};
  int64_t value = base;
  bool fraction = false;
  for (int64_t i = 0; i < scale; ++i) {
    if (!fraction && value % 10 != 0) fraction = true;
    value = value / 10;
    if (value == 0) {
      if (fraction) return {base > 0 ? 1 : -1, false};
      return {0, true};
    }
  }
  if (fraction) value += base > 0 ? 1 : -1;
  return {value, !fraction};
}

// ---- Go's math.Pow10, table for table. ------------------------------------------------------------

constexpr double kPow10Tab[] = {1e00, 1e01, 1e02, 1e03, 1e04, 1e05, 1e06, 1e07, 1e08, 1e09, 1e10,
                                1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21,
                                1e22, 1e23, 1e24, 1e25, 1e26, 1e27, 1e28, 1e29, 1e30, 1e31};
constexpr double kPow10PosTab32[] = {1e00,  1e32,  1e64,  1e96,  1e128,
                                     1e160, 1e192, 1e224, 1e256, 1e288};
constexpr double kPow10NegTab32[] = {1e-00,  1e-32,  1e-64,  1e-96,  1e-128, 1e-160,
                                     1e-192, 1e-224, 1e-256, 1e-288, 1e-320};

double GoPow10(int64_t n) {
  if (0 <= n && n <= 308) return kPow10PosTab32[n / 32] * kPow10Tab[n % 32];
  if (-323 <= n && n <= 0) return kPow10NegTab32[-n / 32] / kPow10Tab[-n % 32];
  if (n > 0) return std::numeric_limits<double>::infinity();
  return 0;
}

// ---- A minimal sign-magnitude big integer. -----------------------------------------------------

constexpr uint32_t kPow10U32[] = {1,      10,      100,      1000,      10000,
                                  100000, 1000000, 10000000, 100000000, 1000000000};
constexpr double kLog2Of10Low = 3.3219;   // Below log2(10) = 3.32192809...
constexpr double kLog2Of10High = 3.3220;  // Above log2(10).

class BigInt {
 public:
  BigInt() = default;
  static BigInt FromInt64(int64_t v) {
    BigInt b;
    b.neg_ = v < 0;
    uint64_t m = v < 0 ? 0ull - static_cast<uint64_t>(v) : static_cast<uint64_t>(v);
    while (m != 0) {
      b.mag_.push_back(static_cast<uint32_t>(m));
      m >>= 32;
    }
    return b;
  }
  // Digits only (validated by the caller), no sign.
  static BigInt FromDigits(std::string_view digits) {
    BigInt b;
    size_t i = 0;
    size_t first = digits.size() % 9;
    if (first == 0) first = 9;
    while (i < digits.size()) {
      size_t n = i == 0 ? std::min(first, digits.size()) : 9;
      uint32_t chunk = 0;
      for (size_t k = 0; k < n; ++k) chunk = chunk * 10 + static_cast<uint32_t>(digits[i + k] - '0');
      b.MulAddSmall(kPow10U32[n], chunk);
      i += n;
    }
    return b;
  }

  bool IsZero() const { return mag_.empty(); }
  int Sign() const { return IsZero() ? 0 : (neg_ ? -1 : 1); }
  bool negative() const { return neg_; }
  void SetNegative(bool negative) { neg_ = negative && !IsZero(); }
  void Negate() { SetNegative(!neg_); }

  int64_t BitLength() const {
    if (mag_.empty()) return 0;
    return static_cast<int64_t>(mag_.size() - 1) * 32 + (32 - __builtin_clz(mag_.back()));
  }

  // |this| = |this| * m + add.
  void MulAddSmall(uint32_t m, uint32_t add) {
    uint64_t carry = add;
    for (uint32_t& w : mag_) {
      uint64_t t = static_cast<uint64_t>(w) * m + carry;
      w = static_cast<uint32_t>(t);
      carry = t >> 32;
    }
    if (carry != 0) mag_.push_back(static_cast<uint32_t>(carry));
    Trim();
  }
  // |this| = |this| / d; returns the remainder.
  uint32_t DivSmall(uint32_t d) {
    uint64_t rem = 0;
    for (size_t i = mag_.size(); i-- > 0;) {
      uint64_t cur = (rem << 32) | mag_[i];
      mag_[i] = static_cast<uint32_t>(cur / d);
      rem = cur % d;
    }
    Trim();
    return static_cast<uint32_t>(rem);
  }
  // Remainder of |this| / d without changing this.
  uint32_t ModSmall(uint32_t d) const {
    uint64_t rem = 0;
    for (size_t i = mag_.size(); i-- > 0;) rem = ((rem << 32) | mag_[i]) % d;
    return static_cast<uint32_t>(rem);
  }
  void MulPow10(int64_t n) {
    if (IsZero()) return;
    while (n >= 9) {
      MulAddSmall(kPow10U32[9], 0);
      n -= 9;
    }
    if (n > 0) MulAddSmall(kPow10U32[n], 0);
  }
  // Whether |this| * 10^n stays within `max_bits`.
  bool MulPow10Fits(int64_t n, int64_t max_bits) const {
    if (IsZero()) return true;
    return static_cast<double>(BitLength()) + static_cast<double>(n) * kLog2Of10High + 1 <=
           static_cast<double>(max_bits);
  }
  void ShiftLeft(int64_t bits) {
    if (IsZero() || bits == 0) return;
    size_t words = static_cast<size_t>(bits / 32);
    unsigned rest = static_cast<unsigned>(bits % 32);
    if (rest != 0) {
      uint32_t carry = 0;
      for (uint32_t& w : mag_) {
        uint32_t next = w >> (32 - rest);
        w = (w << rest) | carry;
        carry = next;
      }
      if (carry != 0) mag_.push_back(carry);
    }
    mag_.insert(mag_.begin(), words, 0u);
  }
  // |this| = ceil(|this| / 10^n) (rounding away from zero), n >= 0.
  void DivPow10RoundUp(int64_t n) {
    if (IsZero() || n <= 0) return;
    // |this| < 2^bits <= 10^(bits*log10(2)+1): when n exceeds that, the quotient is 0.
    if (static_cast<double>(n) > static_cast<double>(BitLength()) / kLog2Of10Low + 1) {
      mag_ = {1};
      return;
    }
    bool rem = false;
    while (n >= 9) {
      rem |= DivSmall(kPow10U32[9]) != 0;
      n -= 9;
    }
    if (n > 0) rem |= DivSmall(kPow10U32[n]) != 0;
    if (rem) MulAddSmall(1, 1);
  }
  // Removes factors of `factor` (10 or 1024) while divisible; returns how many.
  int64_t RemoveFactors(uint32_t factor) {
    int64_t times = 0;
    if (factor == 10) {
      while (!IsZero() && ModSmall(kPow10U32[9]) == 0) {
        DivSmall(kPow10U32[9]);
        times += 9;
      }
    }
    while (!IsZero() && ModSmall(factor) == 0) {
      DivSmall(factor);
      ++times;
    }
    return times;
  }

  static int CompareMagnitude(const BigInt& a, const BigInt& b) {
    if (a.mag_.size() != b.mag_.size()) return a.mag_.size() < b.mag_.size() ? -1 : 1;
    for (size_t i = a.mag_.size(); i-- > 0;) {
      if (a.mag_[i] != b.mag_[i]) return a.mag_[i] < b.mag_[i] ? -1 : 1;
    }
    return 0;
  }
  static int Compare(const BigInt& a, const BigInt& b) {
    if (a.Sign() != b.Sign()) return a.Sign() < b.Sign() ? -1 : 1;
    int m = CompareMagnitude(a, b);
    return a.neg_ ? -m : m;
  }
  static BigInt Add(const BigInt& a, const BigInt& b) {
    if (a.neg_ == b.neg_) {
      BigInt r = AddMagnitude(a, b);
      r.SetNegative(a.neg_);
      return r;
    }
    int m = CompareMagnitude(a, b);
    if (m == 0) return BigInt();
    BigInt r = m > 0 ? SubMagnitude(a, b) : SubMagnitude(b, a);
    r.SetNegative(m > 0 ? a.neg_ : b.neg_);
    return r;
  }

  std::optional<int64_t> ToInt64() const {
    if (mag_.size() > 2) return std::nullopt;
    uint64_t m = 0;
    for (size_t i = mag_.size(); i-- > 0;) m = (m << 32) | mag_[i];
    if (!neg_) {
      if (m > static_cast<uint64_t>(kMaxInt64)) return std::nullopt;
      return static_cast<int64_t>(m);
    }
    if (m > static_cast<uint64_t>(kMaxInt64) + 1) return std::nullopt;
    return static_cast<int64_t>(0ull - m);
  }

  // Correctly rounded (nearest, ties to even) conversion, like big.Float.SetInt(x).Float64().
  double ToDouble() const {
    int64_t bits = BitLength();
    double result;
    if (bits <= 64) {
      uint64_t m = 0;
      for (size_t i = mag_.size(); i-- > 0;) m = (m << 32) | mag_[i];
      result = static_cast<double>(m);
    } else {
      // Top 64 bits, with a sticky bit for everything below (64 > 53 + 2 keeps rounding exact).
      int64_t shift = bits - 64;
      size_t w = static_cast<size_t>(shift / 32);
      unsigned r = static_cast<unsigned>(shift % 32);
      auto word = [&](size_t i) -> uint64_t { return i < mag_.size() ? mag_[i] : 0u; };
      uint64_t low = word(w) | (word(w + 1) << 32);
      uint64_t top = r == 0 ? low : (low >> r) | (word(w + 2) << (64 - r));
      bool sticky = r != 0 && (mag_[w] & ((1u << r) - 1)) != 0;
      for (size_t i = 0; i < w && !sticky; ++i) sticky = mag_[i] != 0;
      if (sticky) top |= 1u;
      result = std::ldexp(static_cast<double>(top), static_cast<int>(std::min<int64_t>(shift, 4096)));
    }
    return neg_ ? -result : result;
  }

  std::string ToString() const {
    if (IsZero()) return "0";
    BigInt t = *this;
    std::vector<uint32_t> chunks;
    while (!t.IsZero()) chunks.push_back(t.DivSmall(kPow10U32[9]));
    std::string out = neg_ ? "-" : "";
    out += std::to_string(chunks.back());
    for (size_t i = chunks.size() - 1; i-- > 0;) {
      std::string c = std::to_string(chunks[i]);
      out.append(9 - c.size(), '0');
      out += c;
    }
    return out;
  }

 private:
  void Trim() {
    while (!mag_.empty() && mag_.back() == 0) mag_.pop_back();
    if (mag_.empty()) neg_ = false;
  }
  static BigInt AddMagnitude(const BigInt& a, const BigInt& b) {
    BigInt r;
    size_t n = std::max(a.mag_.size(), b.mag_.size());
    r.mag_.resize(n);
    uint64_t carry = 0;
    for (size_t i = 0; i < n; ++i) {
      uint64_t t = carry;
      if (i < a.mag_.size()) t += a.mag_[i];
      if (i < b.mag_.size()) t += b.mag_[i];
      r.mag_[i] = static_cast<uint32_t>(t);
      carry = t >> 32;
    }
    if (carry != 0) r.mag_.push_back(static_cast<uint32_t>(carry));
    return r;
  }
  // |a| - |b| with |a| >= |b|.
  static BigInt SubMagnitude(const BigInt& a, const BigInt& b) {
    BigInt r;
    r.mag_.resize(a.mag_.size());
    int64_t borrow = 0;
    for (size_t i = 0; i < a.mag_.size(); ++i) {
      int64_t t = static_cast<int64_t>(a.mag_[i]) - borrow -
                  (i < b.mag_.size() ? static_cast<int64_t>(b.mag_[i]) : 0);
      borrow = t < 0 ? 1 : 0;
      if (t < 0) t += int64_t{1} << 32;
      r.mag_[i] = static_cast<uint32_t>(t);
    }
    r.Trim();
    return r;
  }

  bool neg_ = false;
  std::vector<uint32_t> mag_;  // Little-endian base 2^32 magnitude, no leading zero words.
};

}  // namespace

// The arbitrary-precision form: value = unscaled * 10^-scale (inf.Dec's convention).
struct Decimal {
  BigInt unscaled;
  int32_t scale = 0;
};

}  // namespace internal_quantity

using internal_quantity::BigInt;
using internal_quantity::Decimal;
using internal_quantity::GoPow10;
using internal_quantity::kLog2Of10High;
using internal_quantity::kLog2Of10Low;
using internal_quantity::NegativeScale;
using internal_quantity::PositiveScale;
using internal_quantity::WrapAdd32;
using internal_quantity::WrapNeg32;
using internal_quantity::WrapNeg64;

namespace {

constexpr char kErrFormatWrong[] =
    "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'";
constexpr char kErrNumeric[] = "unable to parse numeric part of quantity";
constexpr char kErrSuffix[] = "unable to parse quantity's suffix";

absl::Status TooLarge() {
  return OutOfRange("quantity is too large to represent exactly (more than " +
                    std::to_string(Quantity::kMaxBits) + " bits)");
}

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

// The pieces of a quantity string found by upstream's parseQuantityString.
struct Scanned {
  bool positive = true;
  std::string_view value, num, denom, suffix;
};

// parseQuantityString, step for step. Returns false for ErrFormatWrong.
bool ScanQuantity(std::string_view str, Scanned* out) {
  out->positive = true;
  size_t pos = 0;
  const size_t end = str.size();
  if (pos < end) {
    if (str[0] == '-') {
      out->positive = false;
      ++pos;
    } else if (str[0] == '+') {
      ++pos;
    }
  }
  // Strip leading zeros.
  for (size_t i = pos;; ++i) {
    if (i >= end) {
      out->num = "0";
      out->value = out->num;
      return true;
    }
    if (str[i] != '0') break;
    ++pos;
  }
  // The numerator.
  for (size_t i = pos;; ++i) {
    if (i >= end) {
      out->num = str.substr(pos, end - pos);
      out->value = str.substr(0, end);
      return true;
    }
    if (!IsDigit(str[i])) {
      out->num = str.substr(pos, i - pos);
      pos = i;
      break;
    }
  }
  if (out->num.empty()) out->num = "0";
  // The denominator.
  if (pos < end && str[pos] == '.') {
    ++pos;
    for (size_t i = pos;; ++i) {
      if (i >= end) {
        out->denom = str.substr(pos, end - pos);
        out->value = str.substr(0, end);
        return true;
      }
      if (!IsDigit(str[i])) {
        out->denom = str.substr(pos, i - pos);
        pos = i;
        break;
      }
    }
  }
  out->value = str.substr(0, pos);
  // The suffix: letters, then an optional sign, then digits.
  const size_t suffix_start = pos;
  for (size_t i = pos;; ++i) {
    if (i >= end) {
      out->suffix = str.substr(suffix_start);
      return true;
    }
    if (std::strchr("eEinumkKMGTP", str[i]) == nullptr || str[i] == '\0') {
      pos = i;
      break;
    }
  }
  if (pos < end && (str[pos] == '-' || str[pos] == '+')) ++pos;
  for (size_t i = pos;; ++i) {
    if (i >= end) {
      out->suffix = str.substr(suffix_start);
      return true;
    }
    if (!IsDigit(str[i])) break;
  }
  return false;
}

struct Suffix {
  int base = 10;
  int32_t exponent = 0;
  Quantity::Format format = Quantity::Format::kDecimalSI;
};

// quantitySuffixer.interpret.
bool InterpretSuffix(std::string_view s, Suffix* out) {
  using F = Quantity::Format;
  struct Entry {
    std::string_view text;
    int base;
    int32_t exponent;
    F format;
  };
  static constexpr Entry kTable[] = {
      {"", 10, 0, F::kDecimalSI},    {"n", 10, -9, F::kDecimalSI}, {"u", 10, -6, F::kDecimalSI},
      {"m", 10, -3, F::kDecimalSI},  {"k", 10, 3, F::kDecimalSI},  {"M", 10, 6, F::kDecimalSI},
      {"G", 10, 9, F::kDecimalSI},   {"T", 10, 12, F::kDecimalSI}, {"P", 10, 15, F::kDecimalSI},
      {"E", 10, 18, F::kDecimalSI},  {"Ki", 2, 10, F::kBinarySI},  {"Mi", 2, 20, F::kBinarySI},
      {"Gi", 2, 30, F::kBinarySI},   {"Ti", 2, 40, F::kBinarySI},  {"Pi", 2, 50, F::kBinarySI},
      {"Ei", 2, 60, F::kBinarySI},
  };
  for (const Entry& e : kTable) {
    if (e.text == s) {
      *out = {e.base, e.exponent, e.format};
      return true;
    }
  }
  if (s.size() > 1 && (s[0] == 'e' || s[0] == 'E')) {
    // strconv.ParseInt(s[1:], 10, 64), then int32(parsed) (truncating, as upstream).
    std::string_view digits = s.substr(1);
    bool negative = false;
    if (!digits.empty() && (digits[0] == '+' || digits[0] == '-')) {
      negative = digits[0] == '-';
      digits.remove_prefix(1);
    }
    if (digits.empty()) return false;
    uint64_t magnitude = 0;
    for (char c : digits) {
      if (!IsDigit(c)) return false;
      if (magnitude > (std::numeric_limits<uint64_t>::max() - 9) / 10) return false;
      magnitude = magnitude * 10 + static_cast<uint64_t>(c - '0');
    }
    if (!negative && magnitude > static_cast<uint64_t>(internal_quantity::kMaxInt64)) return false;
    if (negative && magnitude > static_cast<uint64_t>(internal_quantity::kMaxInt64) + 1) return false;
    uint64_t bits = negative ? 0ull - magnitude : magnitude;
    *out = {10, static_cast<int32_t>(static_cast<uint32_t>(bits)), F::kDecimalExponent};
    return true;
  }
  return false;
}

// The suffix that quantitySuffixer.constructBytes would print (empty when it has none).
std::string ConstructSuffix(int base, int64_t exponent, Quantity::Format format) {
  switch (format) {
    case Quantity::Format::kDecimalSI:
      switch (exponent) {
        case -9: return "n";
        case -6: return "u";
        case -3: return "m";
        case 3: return "k";
        case 6: return "M";
        case 9: return "G";
        case 12: return "T";
        case 15: return "P";
        case 18: return "E";
        default: return "";
      }
    case Quantity::Format::kBinarySI:
      if (base != 2) return "";
      switch (exponent) {
        case 10: return "Ki";
        case 20: return "Mi";
        case 30: return "Gi";
        case 40: return "Ti";
        case 50: return "Pi";
        case 60: return "Ei";
        default: return "";
      }
    case Quantity::Format::kDecimalExponent:
      if (base != 10 || exponent == 0) return "";
      return std::string(1, 'e') += std::to_string(static_cast<int32_t>(exponent));
  }
  return "";
}

// Canonical decimal digits and a multiple-of-3 exponent for mantissa * 10^exponent
// (AsCanonicalBytes of both forms: strip factors of ten, then lower the exponent to a multiple
// of three).
std::pair<std::string, int64_t> CanonicalDecimal(BigInt mantissa, int64_t exponent) {
  exponent += mantissa.RemoveFactors(10);
  int64_t mod = exponent % 3;
  if (mod != 0) {
    int64_t steps = mod > 0 ? mod : mod + 3;
    mantissa.MulPow10(steps);
    exponent -= steps;
  }
  return {mantissa.ToString(), static_cast<int32_t>(exponent)};
}

// Exact sign-aware comparison of a * 10^ea and b * 10^eb without materialising huge powers.
int CompareScaled(const BigInt& a, int64_t ea, const BigInt& b, int64_t eb) {
  int sa = a.Sign();
  int sb = b.Sign();
  if (sa != sb) return sa < sb ? -1 : 1;
  if (sa == 0) return 0;
  // Compare magnitudes; flip for negatives.
  auto magnitude_compare = [](const BigInt& x, int64_t ex, const BigInt& y, int64_t ey) -> int {
    // Returns sign(|x|*10^ex - |y|*10^ey) with ex >= ey.
    int64_t diff = ex - ey;
    if (diff == 0) return BigInt::CompareMagnitude(x, y);
    // |x| * 10^diff >= 2^(bits(x)-1) * 10^diff; |y| < 2^bits(y).
    if (static_cast<double>(x.BitLength() - 1) + static_cast<double>(diff) * kLog2Of10Low >=
        static_cast<double>(y.BitLength())) {
      return 1;
    }
    BigInt scaled = x;
    scaled.MulPow10(diff);  // Bounded: diff < bits(y) / 3.32.
    return BigInt::CompareMagnitude(scaled, y);
  };
  int m = ea >= eb ? magnitude_compare(a, ea, b, eb) : -magnitude_compare(b, eb, a, ea);
  return sa < 0 ? -m : m;
}

}  // namespace

// Everything that needs the private representation.
struct Quantity::Impl {
  static Quantity MakeInt(int64_t value, int32_t scale, Format format, std::string text = "") {
    Quantity q;
    q.int_ = {value, scale};
    q.format_ = format;
    q.text_ = std::move(text);
    return q;
  }
  static Quantity MakeDecimal(Decimal d, Format format) {
    Quantity q;
    q.decimal_ = std::make_shared<const Decimal>(std::move(d));
    q.format_ = format;
    return q;
  }
  // The value as mantissa * 10^exponent.
  static std::pair<BigInt, int64_t> Scaled(const Quantity& q) {
    if (q.is_decimal()) return {q.decimal_->unscaled, -static_cast<int64_t>(q.decimal_->scale)};
    return {BigInt::FromInt64(q.int_.value), q.int_.scale};
  }

  // int64Amount.Add; false on overflow (a is unchanged then).
  static bool IntAdd(IntAmount* a, IntAmount b) {
    if (b.value == 0) return true;
    if (a->value == 0) {
      *a = b;
      return true;
    }
    int64_t c;
    if (a->scale == b.scale) {
      if (internal_quantity::AddOverflow(a->value, b.value, &c)) return false;
      a->value = c;
    } else if (a->scale > b.scale) {
      auto scaled = PositiveScale(a->value, static_cast<int64_t>(a->scale) - b.scale);
      if (!scaled || internal_quantity::AddOverflow(*scaled, b.value, &c)) return false;
      a->scale = b.scale;
      a->value = c;
    } else {
      auto scaled = PositiveScale(b.value, static_cast<int64_t>(b.scale) - a->scale);
      if (!scaled || internal_quantity::AddOverflow(a->value, *scaled, &c)) return false;
      a->value = c;
    }
    return true;
  }

  // Dec.Add / Dec.Sub: the result scale is the larger scale.
  static absl::StatusOr<Decimal> DecimalAdd(const Decimal& x, Decimal y, bool subtract) {
    if (subtract) y.unscaled.Negate();
    Decimal xx = x;
    int32_t scale = std::max(xx.scale, y.scale);
    for (Decimal* d : {&xx, &y}) {
      int64_t shift = static_cast<int64_t>(scale) - d->scale;
      if (shift > 0) {
        if (!d->unscaled.MulPow10Fits(shift, kMaxBits)) return TooLarge();
        d->unscaled.MulPow10(shift);
      }
      d->scale = scale;
    }
    Decimal r;
    r.unscaled = BigInt::Add(xx.unscaled, y.unscaled);
    r.scale = scale;
    if (r.unscaled.BitLength() > kMaxBits) return TooLarge();
    return r;
  }

  static absl::StatusOr<Quantity> AddOrSub(const Quantity& q, const Quantity& y, bool subtract) {
    Format format = q.format_;
    if (!q.is_decimal() && !y.is_decimal()) {
      IntAmount a = q.int_;
      IntAmount b = y.int_;
      if (subtract) {
        if (q.IsZero()) format = y.format_;
        b.value = WrapNeg64(b.value);  // Upstream negates with wrap-around, too.
      } else if (a.value == 0) {
        format = y.format_;
      }
      if (IntAdd(&a, b)) return MakeInt(a.value, a.scale, format);
    } else if (q.IsZero()) {
      format = y.format_;
    }
    DEVLET_ASSIGN_OR_RETURN(Decimal d, DecimalAdd(q.AsDecimal(), y.AsDecimal(), subtract));
    return MakeDecimal(std::move(d), format);
  }
};

Decimal Quantity::AsDecimal() const {
  if (is_decimal()) return *decimal_;
  Decimal d;
  d.unscaled = BigInt::FromInt64(int_.value);
  d.scale = WrapNeg32(int_.scale);
  return d;
}

absl::StatusOr<Quantity> Quantity::Parse(std::string_view str) {
  if (str.empty()) return InvalidArgument(kErrFormatWrong);
  if (str == "0") return Impl::MakeInt(0, 0, Format::kDecimalSI, "0");

  Scanned s;
  if (!ScanQuantity(str, &s)) return InvalidArgument(kErrFormatWrong);
  Suffix suf;
  if (!InterpretSuffix(s.suffix, &suf)) return InvalidArgument(kErrSuffix);

  // The int64 fast path.
  int32_t precision = 0;
  int32_t scale = 0;
  int64_t mantissa = 1;
  const int32_t num_len = static_cast<int32_t>(std::min<size_t>(s.num.size(), 1u << 20));
  const int32_t denom_len = static_cast<int32_t>(std::min<size_t>(s.denom.size(), 1u << 20));
  switch (suf.format) {
    case Format::kDecimalExponent:
    case Format::kDecimalSI:
      scale = suf.exponent;
      precision = 18 - (num_len + denom_len);
      break;
    case Format::kBinarySI:
      scale = 0;
      if (suf.exponent >= 0 && s.denom.empty()) {
        mantissa = int64_t{1} << suf.exponent;
        precision = 15 - num_len - (suf.exponent * 3 / 10) - 1;
      } else {
        precision = -1;
      }
      break;
  }
  if (precision >= 0) {
    scale = WrapAdd32(scale, -denom_len);
    if (scale >= -9) {
      std::string shifted;
      shifted.reserve(s.num.size() + s.denom.size());
      shifted.append(s.num);
      shifted.append(s.denom);
      int64_t value = 0;
      for (char c : shifted) value = value * 10 + (c - '0');  // At most 18 digits.
      int64_t result;
      if (!internal_quantity::MulOverflow(value, mantissa, &result)) {
        if (!s.positive) result = -result;
        // When the input is already canonical, upstream remembers it verbatim.
        bool canonical;
        if (suf.format == Format::kBinarySI) {
          canonical = suf.exponent % 10 == 0 && (value & 0x07) != 0;
        } else {
          canonical = scale % 3 == 0 &&
                      !(shifted.size() >= 3 && shifted.compare(shifted.size() - 3, 3, "000") == 0) &&
                      shifted[0] != '0';
        }
        return Impl::MakeInt(result, scale, suf.format, canonical ? std::string(str) : "");
      }
    }
  }

  // The arbitrary-precision path (inf.Dec SetString, then suffix, rounding and capping).
  std::string_view value = s.value;
  bool negative = false;
  if (!value.empty() && (value[0] == '+' || value[0] == '-')) {
    negative = value[0] == '-';
    value.remove_prefix(1);
  }
  std::string digits;
  int32_t dec_scale = 0;
  bool seen_digit = false;
  if (size_t dot = value.find('.'); dot != std::string_view::npos) {
    digits.append(value.substr(0, dot));
    digits.append(value.substr(dot + 1));
    dec_scale = static_cast<int32_t>(value.size() - dot - 1);
  } else {
    digits.append(value);
  }
  seen_digit = !digits.empty();
  if (!seen_digit) return InvalidArgument(kErrNumeric);
  // Leading zeros carry no value (they only widen the text).
  size_t first_nonzero = digits.find_first_not_of('0');
  digits.erase(0, first_nonzero == std::string::npos ? digits.size() - 1 : first_nonzero);

  Decimal amount;
  amount.scale = dec_scale;
  if (suf.base == 10) amount.scale = WrapAdd32(amount.scale, WrapNeg32(suf.exponent));
  if (static_cast<double>(digits.size()) * kLog2Of10High > kMaxBits) {
    // A very long fraction: rounding up to 1n drops every digit past the ninth decimal place, so
    // drop them here (remembering whether any was non-zero) instead of building a huge integer.
    const int64_t drop = static_cast<int64_t>(amount.scale) - 9;
    if (suf.base != 10 || drop <= 0 ||
        static_cast<double>(static_cast<int64_t>(digits.size()) - drop) * kLog2Of10High >
            kMaxBits) {
      return TooLarge();
    }
    const size_t keep = digits.size() > static_cast<size_t>(drop) ? digits.size() - drop : 0;
    const bool sticky = digits.find_first_not_of('0', keep) != std::string::npos;
    digits.resize(keep);
    amount.unscaled = BigInt::FromDigits(digits.empty() ? "0" : digits);
    if (sticky) amount.unscaled.MulAddSmall(1, 1);
    amount.scale = 9;
  } else {
    amount.unscaled = BigInt::FromDigits(digits);
    if (suf.base != 10) amount.unscaled.ShiftLeft(suf.exponent);
  }
  // Round non-zero values up to a multiple of 1n (inf.Dec.Round(amount, 9, RoundUp) on |amount|).
  if (!amount.unscaled.IsZero()) {
    int64_t shift = 9 - static_cast<int64_t>(amount.scale);
    if (shift > 0) {
      if (!amount.unscaled.MulPow10Fits(shift, kMaxBits)) return TooLarge();
      amount.unscaled.MulPow10(shift);
    } else {
      amount.unscaled.DivPow10RoundUp(-shift);
    }
    amount.scale = 9;
  }
  Format format = suf.format;
  if (format == Format::kBinarySI) {
    static const BigInt kMax = BigInt::FromInt64(internal_quantity::kMaxInt64);
    if (CompareScaled(amount.unscaled, -static_cast<int64_t>(amount.scale), kMax, 0) > 0) {
      amount.unscaled = kMax;
      amount.scale = 0;
    }
    if (!amount.unscaled.IsZero() &&
        CompareScaled(amount.unscaled, -static_cast<int64_t>(amount.scale), BigInt::FromInt64(1),
                      0) < 0) {
      format = Format::kDecimalSI;
    }
  }
  amount.unscaled.SetNegative(negative);
  return Impl::MakeDecimal(std::move(amount), format);
}

Quantity Quantity::FromInt64(int64_t value, Format format) {
  return Impl::MakeInt(value, 0, format);
}

int Quantity::Compare(const Quantity& other) const {
  if (!is_decimal() && !other.is_decimal() && int_.scale == other.int_.scale) {
    return int_.value < other.int_.value ? -1 : (int_.value > other.int_.value ? 1 : 0);
  }
  auto [a, ea] = Impl::Scaled(*this);
  auto [b, eb] = Impl::Scaled(other);
  return CompareScaled(a, ea, b, eb);
}

int Quantity::Sign() const {
  if (is_decimal()) return decimal_->unscaled.Sign();
  return int_.value == 0 ? 0 : (int_.value > 0 ? 1 : -1);
}

std::optional<int64_t> Quantity::AsInt64() const {
  if (is_decimal()) return std::nullopt;
  if (int_.scale == 0) return int_.value;
  if (int_.scale < 0) return std::nullopt;
  return PositiveScale(int_.value, int_.scale);
}

double Quantity::AsApproximateFloat() const {
  double base;
  int64_t exponent;
  if (is_decimal()) {
    base = decimal_->unscaled.ToDouble();
    exponent = -static_cast<int64_t>(decimal_->scale);
  } else {
    base = static_cast<double>(int_.value);
    exponent = int_.scale;
  }
  if (exponent == 0) return base;
  return base * GoPow10(exponent);
}

absl::StatusOr<Quantity> Quantity::Add(const Quantity& other) const {
  return Impl::AddOrSub(*this, other, /*subtract=*/false);
}

absl::StatusOr<Quantity> Quantity::Sub(const Quantity& other) const {
  return Impl::AddOrSub(*this, other, /*subtract=*/true);
}

std::string Quantity::ToString() const {
  if (!text_.empty()) return text_;
  if (IsZero()) return "0";

  Format format = format_;
  // For BinarySI: the value rounded to an integer when that is exact.
  std::optional<BigInt> rounded;
  if (format == Format::kBinarySI) {
    static const BigInt kLow = BigInt::FromInt64(-1024);
    static const BigInt kHigh = BigInt::FromInt64(1024);
    auto [m, e] = Impl::Scaled(*this);
    if (CompareScaled(m, e, kLow, 0) > 0 && CompareScaled(m, e, kHigh, 0) < 0) {
      format = Format::kDecimalSI;
    } else if (e >= 0) {
      if (m.MulPow10Fits(e, kMaxBits)) {
        m.MulPow10(e);
        rounded = std::move(m);
      } else {
        format = Format::kDecimalSI;  // Unreachable through parsing and arithmetic.
      }
    } else if (!is_decimal()) {
      auto [value, exact] = NegativeScale(int_.value, -e);
      if (exact) {
        rounded = BigInt::FromInt64(value);
      } else {
        format = Format::kDecimalSI;
      }
    } else {
      BigInt whole = m;
      BigInt check = m;
      whole.DivPow10RoundUp(-e);
      BigInt back = whole;
      if (back.MulPow10Fits(-e, kMaxBits)) back.MulPow10(-e);
      if (BigInt::CompareMagnitude(back, check) == 0) {
        whole.SetNegative(m.negative());
        rounded = std::move(whole);
      } else {
        format = Format::kDecimalSI;
      }
    }
  }

  if (format != Format::kBinarySI) {
    auto [m, e] = Impl::Scaled(*this);
    auto [digits, exponent] = CanonicalDecimal(std::move(m), e);
    return digits + ConstructSuffix(10, exponent, format);
  }
  BigInt m = std::move(*rounded);
  int64_t exponent = m.RemoveFactors(1024);
  return m.ToString() + ConstructSuffix(2, exponent * 10, format);
}

}  // namespace devlet::cel
