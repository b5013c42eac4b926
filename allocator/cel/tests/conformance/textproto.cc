// Protobuf text-format reader for the conformance runner (see textproto.h).
#include "textproto.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#include "devlet/common/status.h"

namespace devlet::cel::conformance {

const TextprotoField* TextprotoMessage::Find(std::string_view name) const {
  for (const TextprotoField& f : fields) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

std::vector<const TextprotoField*> TextprotoMessage::FindAll(std::string_view name) const {
  std::vector<const TextprotoField*> out;
  for (const TextprotoField& f : fields) {
    if (f.name == name) out.push_back(&f);
  }
  return out;
}

std::string TextprotoMessage::Text(std::string_view name, std::string fallback) const {
  const TextprotoField* f = Find(name);
  return f != nullptr && f->kind != TextprotoField::Kind::kMessage ? f->text : fallback;
}

bool TextprotoMessage::Flag(std::string_view name) const {
  std::string t = Text(name, "false");
  return t == "true" || t == "1" || t == "True" || t == "t";
}

namespace {

class Reader {
 public:
  explicit Reader(std::string_view text) : text_(text) {}

  absl::StatusOr<TextprotoMessage> ReadAll() {
    TextprotoMessage message;
    DEVLET_RETURN_IF_ERROR(ReadFields(&message, '\0'));
    return message;
  }

 private:
  absl::Status Error(std::string_view what) const {
    int line = 1;
    int column = 1;
    for (size_t i = 0; i < pos_ && i < text_.size(); ++i) {
      if (text_[i] == '\n') {
        ++line;
        column = 1;
      } else {
        ++column;
      }
    }
    return InvalidArgument("textproto " + std::to_string(line) + ":" + std::to_string(column) +
                           ": " + std::string(what));
  }

  void SkipSpace() {
    while (pos_ < text_.size()) {
      char c = text_[pos_];
      if (c == '#') {
        while (pos_ < text_.size() && text_[pos_] != '\n') ++pos_;
      } else if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v') {
        ++pos_;
      } else {
        return;
      }
    }
  }

  bool Peek(char c) {
    SkipSpace();
    return pos_ < text_.size() && text_[pos_] == c;
  }
  bool Consume(char c) {
    if (!Peek(c)) return false;
    ++pos_;
    return true;
  }

  static bool IsIdentChar(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '_' || c == '.' || c == '-' || c == '+';
  }

  // Reads fields until `close` (or the end of input when close is '\0').
  absl::Status ReadFields(TextprotoMessage* message, char close) {
    while (true) {
      SkipSpace();
      if (pos_ >= text_.size()) {
        if (close == '\0') return absl::OkStatus();
        return Error("unexpected end of input");
      }
      if (close != '\0' && text_[pos_] == close) {
        ++pos_;
        return absl::OkStatus();
      }
      std::string name;
      if (Consume('[')) {
        size_t end = text_.find(']', pos_);
        if (end == std::string_view::npos) return Error("unterminated [name]");
        name = "[" + std::string(text_.substr(pos_, end - pos_)) + "]";
        pos_ = end + 1;
      } else {
        size_t start = pos_;
        while (pos_ < text_.size() && IsIdentChar(text_[pos_])) ++pos_;
        if (start == pos_) return Error("expected a field name");
        name = std::string(text_.substr(start, pos_ - start));
      }
      bool colon = Consume(':');
      if (Peek('[')) {
        if (!colon) return Error("expected ':' before a list");
        ++pos_;
        if (!Consume(']')) {
          while (true) {
            DEVLET_RETURN_IF_ERROR(ReadValue(message, name));
            if (Consume(']')) break;
            if (!Consume(',')) return Error("expected ',' or ']' in a list");
          }
        }
      } else {
        DEVLET_RETURN_IF_ERROR(ReadValue(message, name));
      }
      // Optional separators.
      if (!Consume(',')) Consume(';');
    }
  }

  absl::Status ReadValue(TextprotoMessage* message, const std::string& name) {
    TextprotoField field;
    field.name = name;
    SkipSpace();
    if (Peek('{') || Peek('<')) {
      char close = text_[pos_] == '{' ? '}' : '>';
      ++pos_;
      auto nested = std::make_shared<TextprotoMessage>();
      if (depth_ > 100) return Error("nesting too deep");
      ++depth_;
      DEVLET_RETURN_IF_ERROR(ReadFields(nested.get(), close));
      --depth_;
      field.kind = TextprotoField::Kind::kMessage;
      field.message = std::move(nested);
    } else if (Peek('"') || Peek('\'')) {
      field.kind = TextprotoField::Kind::kString;
      while (Peek('"') || Peek('\'')) {
        DEVLET_RETURN_IF_ERROR(ReadString(&field.text));
      }
    } else {
      size_t start = pos_;
      while (pos_ < text_.size() && IsIdentChar(text_[pos_])) ++pos_;
      if (start == pos_) return Error("expected a value");
      field.kind = TextprotoField::Kind::kScalar;
      field.text = std::string(text_.substr(start, pos_ - start));
    }
    message->fields.push_back(std::move(field));
    return absl::OkStatus();
  }

  static void AppendUtf8(uint32_t cp, std::string* out) {
    if (cp < 0x80) {
      *out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      *out += static_cast<char>(0xc0 | (cp >> 6));
      *out += static_cast<char>(0x80 | (cp & 0x3f));
    } else if (cp < 0x10000) {
      *out += static_cast<char>(0xe0 | (cp >> 12));
      *out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
      *out += static_cast<char>(0x80 | (cp & 0x3f));
    } else {
      *out += static_cast<char>(0xf0 | (cp >> 18));
      *out += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
      *out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
      *out += static_cast<char>(0x80 | (cp & 0x3f));
    }
  }

  static int HexValue(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  }

  // One quoted literal, C escapes decoded, appended to `out`.
  absl::Status ReadString(std::string* out) {
    char quote = text_[pos_++];
    while (true) {
      if (pos_ >= text_.size() || text_[pos_] == '\n') return Error("unterminated string");
      char c = text_[pos_++];
      if (c == quote) return absl::OkStatus();
      if (c != '\\') {
        *out += c;
        continue;
      }
      if (pos_ >= text_.size()) return Error("unterminated escape");
      char e = text_[pos_++];
      switch (e) {
        case 'n': *out += '\n'; break;
        case 't': *out += '\t'; break;
        case 'r': *out += '\r'; break;
        case 'a': *out += '\a'; break;
        case 'b': *out += '\b'; break;
        case 'f': *out += '\f'; break;
        case 'v': *out += '\v'; break;
        case '\\': *out += '\\'; break;
        case '\'': *out += '\''; break;
        case '"': *out += '"'; break;
        case '?': *out += '?'; break;
        case 'x':
        case 'X': {
          int value = 0;
          int digits = 0;
          while (digits < 2 && pos_ < text_.size() && HexValue(text_[pos_]) >= 0) {
            value = value * 16 + HexValue(text_[pos_++]);
            ++digits;
          }
          if (digits == 0) return Error("bad \\x escape");
          *out += static_cast<char>(value);
          break;
        }
        case 'u':
        case 'U': {
          int want = e == 'u' ? 4 : 8;
          uint32_t cp = 0;
          for (int i = 0; i < want; ++i) {
            if (pos_ >= text_.size() || HexValue(text_[pos_]) < 0) return Error("bad \\u escape");
            cp = cp * 16 + static_cast<uint32_t>(HexValue(text_[pos_++]));
          }
          AppendUtf8(cp, out);
          break;
        }
        default:
          if (e >= '0' && e <= '7') {
            int value = e - '0';
            for (int i = 0; i < 2 && pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '7';
                 ++i) {
              value = value * 8 + (text_[pos_++] - '0');
            }
            *out += static_cast<char>(value);
          } else {
            return Error(std::string("unknown escape \\") + e);
          }
      }
    }
  }

  std::string_view text_;
  size_t pos_ = 0;
  int depth_ = 0;
};

}  // namespace

absl::StatusOr<TextprotoMessage> ParseTextproto(std::string_view text) {
  return Reader(text).ReadAll();
}

}  // namespace devlet::cel::conformance
