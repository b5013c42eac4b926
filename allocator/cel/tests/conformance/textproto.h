// File: allocator/cel/tests/conformance/textproto.h
//
// A small reader for protobuf text format, enough for the cel-spec conformance files
// (tests/simple/testdata/*.textproto): messages with `{}` or `<>`, optional `:` before a
// message, scalars (identifiers, numbers, `inf`, `nan`), single- or double-quoted strings with
// C escapes and adjacent-literal concatenation, `[a, b]` lists (read as repeated fields), `#`
// comments, and `[type.url/name]` extension or Any field names. It builds a schema-less tree; the
// runner interprets field names itself.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace devlet::cel::conformance {

struct TextprotoField;

// TextprotoMessage is an ordered list of fields (repeated fields appear once per value).
struct TextprotoMessage {
  std::vector<TextprotoField> fields;

  // Find returns the first field called `name`, or nullptr.
  const TextprotoField* Find(std::string_view name) const;
  // FindAll returns every field called `name`, in order.
  std::vector<const TextprotoField*> FindAll(std::string_view name) const;
  // Text returns the scalar or string text of field `name`, or `fallback` when absent.
  std::string Text(std::string_view name, std::string fallback = "") const;
  // Flag reads a bool field ("true"/"false"/"1"/"0"; absent = false).
  bool Flag(std::string_view name) const;
};

// TextprotoField is one `name: value` pair.
struct TextprotoField {
  enum class Kind { kScalar, kString, kMessage };
  std::string name;  // A field name, or the bracketed name of an extension or Any ("[a.b/c]").
  Kind kind = Kind::kScalar;
  std::string text;  // kScalar: the token as written; kString: the decoded bytes.
  std::shared_ptr<const TextprotoMessage> message;  // kMessage.
};

// ParseTextproto reads a whole text-format message. Errors name the line and column.
absl::StatusOr<TextprotoMessage> ParseTextproto(std::string_view text);

}  // namespace devlet::cel::conformance
