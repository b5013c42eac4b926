#include "devlet/common/strings.h"

#include <cstddef>

namespace devlet {
namespace {

// Length of the valid UTF-8 sequence starting at text[i], or 0 when the bytes there are not one
// (overlong two-byte forms and lead bytes above U+10FFFF included).
size_t Utf8SequenceLength(std::string_view text, size_t i) {
  const auto lead = static_cast<unsigned char>(text[i]);
  const size_t n = lead >= 0xc2 && lead < 0xe0    ? 2
                   : lead >= 0xe0 && lead < 0xf0  ? 3
                   : lead >= 0xf0 && lead <= 0xf4 ? 4
                                                  : 0;
  if (n == 0 || i + n > text.size())
    return 0;
  for (size_t k = 1; k < n; ++k) {
    if ((static_cast<unsigned char>(text[i + k]) & 0xc0) != 0x80)
      return 0;
  }
  return n;
}

}  // namespace

void AppendGoQuoted(std::string& out, std::string_view text) {
  static constexpr char kHex[] = "0123456789abcdef";
  out += '"';
  for (size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    switch (c) {
      case '"':
        out += "\\\"";
        continue;
      case '\\':
        out += "\\\\";
        continue;
      case '\a':
        out += "\\a";
        continue;
      case '\b':
        out += "\\b";
        continue;
      case '\f':
        out += "\\f";
        continue;
      case '\n':
        out += "\\n";
        continue;
      case '\r':
        out += "\\r";
        continue;
      case '\t':
        out += "\\t";
        continue;
      case '\v':
        out += "\\v";
        continue;
      default:
        break;
    }
    if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
      continue;
    }
    if (const size_t n = c >= 0x80 ? Utf8SequenceLength(text, i) : 0; n > 0) {
      out.append(text.substr(i, n));
      i += n - 1;
      continue;
    }
    out += "\\x";
    out += kHex[c >> 4];
    out += kHex[c & 0xf];
  }
  out += '"';
}

std::string GoQuote(std::string_view text) {
  std::string out;
  out.reserve(text.size() + 2);
  AppendGoQuoted(out, text);
  return out;
}

}  // namespace devlet
