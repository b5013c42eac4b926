#include "devlet/kube/json_util.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdint>
#include <exception>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "devlet/common/status.h"
#include "devlet/common/strings.h"
#include "yaml-cpp/eventhandler.h"
#include "yaml-cpp/exceptions.h"
#include "yaml-cpp/mark.h"
#include "yaml-cpp/parser.h"

namespace devlet::kube::internal {
namespace {

std::string StripNlohmannPrefix(std::string message) {
  // "[json.exception.parse_error.101] parse error at line 1, ..." -> "parse error at line 1, ..."
  if (!message.empty() && message[0] == '[') {
    std::size_t end = message.find("] ");
    if (end != std::string::npos) {
      message.erase(0, end + 2);
    }
  }
  return message;
}

}  // namespace

bool IsValidUtf8(std::string_view text) {
  std::size_t i = 0;
  const std::size_t n = text.size();
  while (i < n) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c < 0x80) {
      ++i;
      continue;
    }
    int extra = 0;
    uint32_t cp = 0;
    if ((c & 0xE0) == 0xC0) {
      extra = 1;
      cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      extra = 2;
      cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      extra = 3;
      cp = c & 0x07;
    } else {
      return false;
    }
    if (i + static_cast<std::size_t>(extra) >= n) {
      return false;
    }
    for (int k = 1; k <= extra; ++k) {
      const auto cc = static_cast<unsigned char>(text[i + k]);
      if ((cc & 0xC0) != 0x80) {
        return false;
      }
      cp = (cp << 6) | (cc & 0x3F);
    }
    if ((extra == 1 && cp < 0x80) || (extra == 2 && cp < 0x800) || (extra == 3 && cp < 0x10000) ||
        cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
      return false;
    }
    i += extra + 1;
  }
  return true;
}

std::string TypeName(const Json& json) {
  switch (json.type()) {
    case Json::value_t::null:
      return "null";
    case Json::value_t::object:
      return "an object";
    case Json::value_t::array:
      return "a list";
    case Json::value_t::string:
      return "a string";
    case Json::value_t::boolean:
      return "a boolean";
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned:
      return "an integer";
    case Json::value_t::number_float:
      return "a number";
    default:
      return "an unsupported value";
  }
}

absl::Status CheckJsonDepth(std::string_view text, int max_depth) {
  int depth = 0;
  bool in_string = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth) {
        return InvalidArgument("JSON nests deeper than " + std::to_string(max_depth) +
                               " levels (at byte " + std::to_string(i) + ")");
      }
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return absl::OkStatus();
}

namespace {

// AppendKey and AppendIndex build field paths the way Kubernetes' strict decoding errors write them
// ("spec.items[2].name").
void AppendKey(std::string& path, std::string_view key) {
  if (!path.empty()) {
    path += '.';
  }
  path += key;
}

void AppendIndex(std::string& path, std::size_t index) {
  path += '[';
  path += std::to_string(index);
  path += ']';
}

// JsonSaxBuilder builds the tree from nlohmann's SAX events. nlohmann's own DOM builder lets a
// repeated key overwrite the first silently; this one rejects it with its path, as Kubernetes'
// strict decoding does. Each member is placed with one O(1) emplace (IndexedOrderedMap).
class JsonSaxBuilder {
 public:
  using number_integer_t = Json::number_integer_t;
  using number_unsigned_t = Json::number_unsigned_t;
  using number_float_t = Json::number_float_t;
  using string_t = Json::string_t;
  using binary_t = Json::binary_t;

  Json& root() { return root_; }

  const std::string& error() const { return error_; }

  bool null() { return Put(Json()); }

  bool boolean(bool value) { return Put(Json(value)); }

  bool number_integer(number_integer_t value) { return Put(Json(value)); }

  bool number_unsigned(number_unsigned_t value) { return Put(Json(value)); }

  bool number_float(number_float_t value, const string_t&) { return Put(Json(value)); }

  bool string(string_t& value) { return Put(Json(std::move(value))); }

  bool binary(binary_t&) {
    error_ = "invalid JSON: binary values are not JSON";  // only the binary formats send these
    return false;
  }

  bool start_object(std::size_t) { return Open(Json::object()); }

  bool start_array(std::size_t) { return Open(Json::array()); }

  bool end_object() { return Close(); }

  bool end_array() { return Close(); }

  bool key(string_t& key) {
    Frame& frame = stack_.back();
    auto [it, inserted] = frame.value->get_ref<Json::object_t&>().emplace(std::move(key), Json());
    if (!inserted) {
      std::string path = Path();
      AppendKey(path, it->first);
      error_ = "invalid JSON: duplicate field " + QuoteForMessage(path);
      return false;
    }
    frame.member = &it->second;
    frame.key = &it->first;
    return true;
  }

  bool parse_error(std::size_t, const std::string& last_token,
                   const nlohmann::detail::exception& e) {
    std::string message = StripNlohmannPrefix(e.what());
    // The lexer quotes the whole offending token, which can be a 100 KB number: shorten it.
    if (last_token.size() > 64) {
      const std::size_t at = message.find(last_token);
      if (at != std::string::npos) {
        message.replace(
            at, last_token.size(),
            last_token.substr(0, 32) + "...(" + std::to_string(last_token.size()) + " bytes)");
      }
    }
    error_ = "invalid JSON: " + EscapeForMessage(message);
    return false;
  }

 private:
  struct Frame {
    Json* value = nullptr;             // the open object or array
    Json* member = nullptr;            // objects: where the value of the last key goes
    const std::string* key = nullptr;  // objects: the last key (for paths in errors)
  };

  // Path names the position of the value being read, for errors.
  std::string Path() const {
    std::string path;
    for (std::size_t i = 0; i < stack_.size(); ++i) {
      const Frame& frame = stack_[i];
      const bool last = i + 1 == stack_.size();
      if (frame.value->is_array()) {
        if (!last) {
          AppendIndex(path, frame.value->size() - 1);
        }
      } else if (!last && frame.key != nullptr) {
        AppendKey(path, *frame.key);
      }
    }
    return path;
  }

  // Place puts a finished value where it belongs and returns where it now lives.
  Json* Place(Json&& value) {
    if (stack_.empty()) {
      root_ = std::move(value);
      return &root_;
    }
    Frame& frame = stack_.back();
    if (frame.value->is_array()) {
      frame.value->push_back(std::move(value));
      return &frame.value->back();
    }
    *frame.member = std::move(value);
    return frame.member;
  }

  bool Put(Json&& value) {
    Place(std::move(value));
    return true;
  }

  bool Open(Json&& container) {
    stack_.push_back(Frame{Place(std::move(container))});
    return true;
  }

  bool Close() {
    stack_.pop_back();
    return true;
  }

  Json root_;
  std::vector<Frame> stack_;
  std::string error_;
};

}  // namespace

absl::StatusOr<Json> ParseJson(std::string_view text, const Limits& limits) {
  DEVLET_RETURN_IF_ERROR(CheckJsonDepth(text, limits.max_depth));
  JsonSaxBuilder builder;
  try {
    if (!Json::sax_parse(text.begin(), text.end(), &builder)) {
      return InvalidArgument(builder.error().empty() ? std::string("invalid JSON")
                                                     : builder.error());
    }
  } catch (const std::exception& e) {
    return InvalidArgument("invalid JSON: " + EscapeForMessage(StripNlohmannPrefix(e.what())));
  }
  return std::move(builder.root());
}

namespace {

// AppendEscaped appends `text` with control bytes and invalid UTF-8 escaped (\n, \t, \r, \xNN).
void AppendEscaped(std::string& out, std::string_view text) {
  static constexpr char kHex[] = "0123456789abcdef";
  for (std::size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
      continue;
    }
    if (c >= 0x80) {
      // Keep a well-formed UTF-8 sequence as it is.
      const std::size_t n = (c & 0xE0) == 0xC0   ? 2
                            : (c & 0xF0) == 0xE0 ? 3
                            : (c & 0xF8) == 0xF0 ? 4
                                                 : 0;
      if (n > 0 && i + n <= text.size() && IsValidUtf8(text.substr(i, n))) {
        out.append(text.substr(i, n));
        i += n - 1;
        continue;
      }
    }
    out += c == '\n' ? "\\n" : c == '\t' ? "\\t" : c == '\r' ? "\\r" : "";
    if (c != '\n' && c != '\t' && c != '\r') {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 0xf];
    }
  }
}

}  // namespace

std::string QuoteForMessage(std::string_view text, std::size_t max_bytes) {
  if (text.size() <= max_bytes) {
    return GoQuote(text);
  }
  std::string out = GoQuote(text.substr(0, max_bytes));
  out.insert(out.size() - 1, "...");
  out += " (" + std::to_string(text.size()) + " bytes)";
  return out;
}

std::string EscapeForMessage(std::string_view text, std::size_t max_bytes) {
  std::string out;
  out.reserve(std::min(text.size(), max_bytes));
  AppendEscaped(out, text.substr(0, std::min(text.size(), max_bytes)));
  if (text.size() > max_bytes) {
    out += "...(" + std::to_string(text.size()) + " bytes)";
  }
  return out;
}

std::string DumpJson(const Json& json, int indent) {
  return json.dump(indent, ' ', false, Json::error_handler_t::replace);
}

namespace {

bool IsPlainInt(std::string_view s, Json* out) {
  std::string_view digits = s;
  bool negative = false;
  if (!digits.empty() && (digits[0] == '-' || digits[0] == '+')) {
    negative = digits[0] == '-';
    digits.remove_prefix(1);
  }
  if (digits.empty()) {
    return false;
  }
  int base = 10;
  if (digits.size() > 2 && digits[0] == '0' && (digits[1] == 'x' || digits[1] == 'o')) {
    base = digits[1] == 'x' ? 16 : 8;
    digits.remove_prefix(2);
  }
  for (char c : digits) {
    const bool ok = base == 16 ? std::isxdigit(static_cast<unsigned char>(c)) != 0
                               : (c >= '0' && c <= (base == 8 ? '7' : '9'));
    if (!ok) {
      return false;
    }
  }
  uint64_t magnitude = 0;
  auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), magnitude, base);
  if (ec == std::errc::result_out_of_range) {
    // Too large for 64 bits: keep as a float like Go's YAML-to-JSON does; typed decoding of an
    // integer field then reports it.
    *out = negative ? -1e300 : 1e300;
    return true;
  }
  if (ec != std::errc() || ptr != digits.data() + digits.size()) {
    return false;
  }
  if (negative) {
    if (magnitude > static_cast<uint64_t>(INT64_MAX) + 1) {
      *out = -1e300;
    } else {
      *out = static_cast<int64_t>(0 - magnitude);
    }
  } else if (magnitude > static_cast<uint64_t>(INT64_MAX)) {
    *out = magnitude;
  } else {
    *out = static_cast<int64_t>(magnitude);
  }
  return true;
}

bool IsPlainFloat(std::string_view s, Json* out) {
  // [-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?
  std::size_t i = 0;
  if (i < s.size() && (s[i] == '-' || s[i] == '+')) {
    ++i;
  }
  std::size_t int_digits = 0;
  while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) {
    ++i;
    ++int_digits;
  }
  std::size_t frac_digits = 0;
  if (i < s.size() && s[i] == '.') {
    ++i;
    while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) {
      ++i;
      ++frac_digits;
    }
  }
  if (int_digits == 0 && frac_digits == 0) {
    return false;
  }
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    if (i < s.size() && (s[i] == '-' || s[i] == '+')) {
      ++i;
    }
    std::size_t exp_digits = 0;
    while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) {
      ++i;
      ++exp_digits;
    }
    if (exp_digits == 0) {
      return false;
    }
  }
  if (i != s.size()) {
    return false;
  }
  std::string copy(s[0] == '+' ? s.substr(1) : s);
  double value = 0;
  auto [ptr, ec] = std::from_chars(copy.data(), copy.data() + copy.size(), value);
  if (ptr != copy.data() + copy.size()) {
    return false;
  }
  if (ec == std::errc::result_out_of_range) {
    value = copy[0] == '-' ? -1e300 : 1e300;
  }
  *out = value;
  return true;
}

// Thrown from the event handler to stop yaml-cpp's parser; caught in ParseYaml.
struct YamlStop {
  std::string message;
};

std::string At(const YAML::Mark& mark) {
  if (mark.line < 0) {
    return "";
  }
  return " at line " + std::to_string(mark.line + 1) + ", column " +
         std::to_string(mark.column + 1);
}

// JsonBuilder turns yaml-cpp parse events into one JSON value per document. It replaces
// YAML::LoadAll, which loops forever on some inputs (a stray ',' at the top of a document) and
// stops silently at a null document; building JSON directly also bounds depth and alias expansion
// as the events arrive.
// Yaml11Bool resolves the YAML 1.1 booleans that Kubernetes' YAML reader (go-yaml v2 behind
// sigs.k8s.io/yaml) accepts: y/yes/on/true and n/no/off/false in three cases.
std::optional<bool> Yaml11Bool(const std::string& text) {
  static constexpr std::string_view kTrue[] = {"y",    "Y",    "yes", "Yes", "YES", "true",
                                               "True", "TRUE", "on",  "On",  "ON"};
  static constexpr std::string_view kFalse[] = {"n",     "N",     "no",  "No",  "NO", "false",
                                                "False", "FALSE", "off", "Off", "OFF"};
  for (std::string_view t : kTrue) {
    if (text == t)
      return true;
  }
  for (std::string_view f : kFalse) {
    if (text == f)
      return false;
  }
  return std::nullopt;
}

class JsonBuilder : public YAML::EventHandler {
 public:
  explicit JsonBuilder(const Limits& limits) : limits_(limits) {}

  std::vector<Json>& documents() { return documents_; }

  void OnDocumentStart(const YAML::Mark& mark) override {
    if (started_ && mark.pos == last_document_pos_) {
      throw YamlStop{"invalid YAML" + At(mark) + ": unexpected content"};
    }
    started_ = true;
    last_document_pos_ = mark.pos;
    mark_ = mark;
    stack_.clear();
    root_ = Json();
    have_root_ = false;
  }

  void OnDocumentEnd() override { documents_.push_back(have_root_ ? std::move(root_) : Json()); }

  void OnNull(const YAML::Mark& mark, YAML::anchor_t anchor) override {
    mark_ = mark;
    Add(Json(), nullptr, anchor, 1);
  }

  void OnAlias(const YAML::Mark& mark, YAML::anchor_t anchor) override {
    mark_ = mark;
    auto it = anchors_.find(anchor);
    if (it == anchors_.end()) {
      Fail("unknown alias");
    }
    expanded_ += it->second.nodes;
    if (expanded_ > limits_.max_nodes) {
      Fail("YAML aliases expand to more than " + std::to_string(limits_.max_nodes) + " values");
    }
    scalar_plain_ = false;
    const Json copy = it->second.value;
    const std::string raw = copy.is_string() ? copy.get<std::string>() : std::string();
    Add(copy, copy.is_string() ? &raw : nullptr, 0, it->second.nodes);
  }

  void OnScalar(const YAML::Mark& mark, const std::string& tag, YAML::anchor_t anchor,
                const std::string& value) override {
    mark_ = mark;
    scalar_plain_ = tag == "?";
    if (!IsValidUtf8(value)) {
      Fail("invalid UTF-8 in a value");
    }
    Add(Resolve(tag, value), &value, anchor, 1);
  }

  void OnSequenceStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t anchor,
                       YAML::EmitterStyle::value) override {
    Open(mark, Json::array(), anchor);
  }

  void OnSequenceEnd() override { Close(); }

  void OnMapStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t anchor,
                  YAML::EmitterStyle::value) override {
    Open(mark, Json::object(), anchor);
  }

  void OnMapEnd() override { Close(); }

 private:
  struct Frame {
    Json value;
    YAML::anchor_t anchor = 0;
    std::size_t nodes = 1;
    std::optional<std::string> key;  // maps: the key waiting for its value
    bool merge = false;              // the waiting key is the merge key "<<"
    std::set<std::string> merged;    // keys that came from a merge and may be overridden
  };

  struct Anchored {
    Json value;
    std::size_t nodes = 1;
  };

  // Path names the map or list being filled (the top of the stack), for errors.
  std::string Path() const {
    std::string path;
    for (std::size_t i = 0; i + 1 < stack_.size(); ++i) {
      const Frame& frame = stack_[i];
      if (frame.value.is_array()) {
        AppendIndex(path, frame.value.size());
      } else if (frame.key) {
        AppendKey(path, frame.merge ? std::string_view("<<") : std::string_view(*frame.key));
      }
    }
    return path;
  }

  [[noreturn]] void Fail(const std::string& message) {
    throw YamlStop{"invalid YAML" + At(mark_) + ": " + message};
  }

  Json Resolve(const std::string& tag, const std::string& text) {
    if (tag == "!" || tag == "tag:yaml.org,2002:str") {
      return text;  // quoted or explicitly a string
    }
    if (text.empty() || text == "~" || text == "null" || text == "Null" || text == "NULL") {
      return nullptr;
    }
    if (const std::optional<bool> b = Yaml11Bool(text)) {
      return *b;
    }
    Json number;
    if (IsPlainInt(text, &number) || IsPlainFloat(text, &number)) {
      return number;
    }
    if (text == ".inf" || text == "-.inf" || text == "+.inf" || text == ".nan" || text == ".Inf" ||
        text == ".NaN" || text == "-.Inf" || text == ".INF" || text == ".NAN") {
      Fail("\"" + text + "\" cannot be represented in JSON");
    }
    return text;
  }

  void Open(const YAML::Mark& mark, Json value, YAML::anchor_t anchor) {
    mark_ = mark;
    if (static_cast<int>(stack_.size()) >= limits_.max_depth) {
      Fail("YAML nests deeper than " + std::to_string(limits_.max_depth) + " levels");
    }
    if (!stack_.empty() && stack_.back().value.is_object() && !stack_.back().key) {
      Fail("mapping keys must be strings");
    }
    stack_.push_back(Frame{std::move(value), anchor, 1, std::nullopt});
  }

  void Close() {
    Frame frame = std::move(stack_.back());
    stack_.pop_back();
    if (frame.value.is_object() && frame.key) {
      Fail("mapping key without a value");
    }
    Add(std::move(frame.value), nullptr, frame.anchor, frame.nodes);
  }

  // Add places a finished node; `raw` is the scalar text when the node is a scalar.
  void Add(Json value, const std::string* raw, YAML::anchor_t anchor, std::size_t nodes) {
    if (anchor != 0) {
      anchors_[anchor] = Anchored{value, nodes};
    }
    if (stack_.empty()) {
      root_ = std::move(value);
      have_root_ = true;
      return;
    }
    Frame& parent = stack_.back();
    parent.nodes += nodes;
    if (parent.value.is_array()) {
      parent.value.push_back(std::move(value));
      return;
    }
    if (!parent.key) {
      if (raw == nullptr || value.is_null()) {
        Fail("mapping keys must be strings");
      }
      std::string key = *raw;
      if (scalar_plain_ && value.is_boolean()) {
        key = value.get<bool>() ? "true" : "false";  // YAML 1.1, as kubectl reads `y:` / `on:`
      }
      raw = &key;
      if (*raw == "<<" && scalar_plain_) {
        parent.key = std::string();  // merge key (YAML 1.1, as Kubernetes' YAML reader has it)
        parent.merge = true;
        return;
      }
      // An explicit key overrides a merged one (in its place: Kubernetes' YAML reader keeps no
      // order at all, and erasing would cost O(N) per key); any other repeat is an error.
      if (parent.value.contains(*raw) && parent.merged.erase(*raw) == 0) {
        std::string path = Path();
        AppendKey(path, *raw);
        Fail("duplicate field " + QuoteForMessage(path));
      }
      parent.key = *raw;
      return;
    }
    if (parent.merge) {
      parent.merge = false;
      parent.key.reset();
      if (value.is_object()) {
        Merge(parent, value);
      } else if (value.is_array()) {
        for (const Json& item : value) {
          if (!item.is_object()) {
            Fail("a merge key (<<) needs a mapping or a list of mappings");
          }
          Merge(parent, item);
        }
      } else {
        Fail("a merge key (<<) needs a mapping or a list of mappings");
      }
      return;
    }
    parent.value[*parent.key] = std::move(value);
    parent.key.reset();
  }

  // Merge adds the entries of `from` that `frame` does not have yet; explicit keys win.
  static void Merge(Frame& frame, const Json& from) {
    for (auto it = from.begin(); it != from.end(); ++it) {
      if (!frame.value.contains(it.key())) {
        frame.value[it.key()] = it.value();
        frame.merged.insert(it.key());
      }
    }
  }

  const Limits& limits_;
  std::vector<Json> documents_;
  std::vector<Frame> stack_;
  std::map<YAML::anchor_t, Anchored> anchors_;
  Json root_;
  bool have_root_ = false;
  bool started_ = false;
  int last_document_pos_ = 0;
  std::size_t expanded_ = 0;
  bool scalar_plain_ = false;
  YAML::Mark mark_;
};

}  // namespace

absl::StatusOr<std::vector<Json>> ParseYaml(std::string_view text, const Limits& limits) {
  std::istringstream stream{std::string(text)};
  JsonBuilder builder(limits);
  try {
    YAML::Parser parser(stream);
    std::size_t documents = 0;
    while (parser.HandleNextDocument(builder)) {
      if (++documents > 1000000) {
        return InvalidArgument("invalid YAML: more than 1000000 documents");
      }
    }
  } catch (const YamlStop& stop) {
    return InvalidArgument(stop.message);
  } catch (const YAML::Exception& e) {
    // yaml-cpp's messages quote the offending character raw ("unknown escape character: \0").
    if (e.mark.line >= 0) {
      return InvalidArgument("invalid YAML at line " + std::to_string(e.mark.line + 1) +
                             ", column " + std::to_string(e.mark.column + 1) + ": " +
                             EscapeForMessage(e.msg, 512));
    }
    return InvalidArgument("invalid YAML: " + EscapeForMessage(e.msg, 512));
  } catch (const std::exception& e) {
    return InvalidArgument("invalid YAML: " + EscapeForMessage(e.what(), 512));
  }
  return std::move(builder.documents());
}

}  // namespace devlet::kube::internal
