// RE2-backed regular expressions for matches, find and findAll.
#include <re2/re2.h>

#include "eval.h"

namespace devlet::cel::internal {

class Regex {
 public:
  explicit Regex(std::string_view pattern) : re_(re2::StringPiece(pattern.data(), pattern.size()), Options()) {}
  const re2::RE2& re() const { return re_; }

 private:
  static re2::RE2::Options Options() {
    re2::RE2::Options o;
    o.set_log_errors(false);
    return o;
  }
  re2::RE2 re_;
};

// Go's regexp/syntax error codes (what Kubernetes reports) for RE2's.
std::string_view GoErrorCode(re2::RE2::ErrorCode code) {
  switch (code) {
    case re2::RE2::ErrorBadEscape: return "invalid escape sequence";
    case re2::RE2::ErrorBadCharClass: return "invalid character class";
    case re2::RE2::ErrorBadCharRange: return "invalid character class range";
    case re2::RE2::ErrorMissingBracket: return "missing closing ]";
    case re2::RE2::ErrorMissingParen: return "missing closing )";
    case re2::RE2::ErrorUnexpectedParen: return "unexpected )";
    case re2::RE2::ErrorTrailingBackslash: return "trailing backslash at end of expression";
    case re2::RE2::ErrorRepeatArgument: return "missing argument to repetition operator";
    case re2::RE2::ErrorRepeatSize: return "invalid repeat count";
    case re2::RE2::ErrorRepeatOp: return "invalid nested repetition operator";
    case re2::RE2::ErrorBadPerlOp: return "invalid or unsupported Perl syntax";
    case re2::RE2::ErrorBadUTF8: return "invalid UTF-8";
    case re2::RE2::ErrorBadNamedCapture: return "invalid named capture";
    case re2::RE2::ErrorPatternTooLarge: return "expression too large";
    default: return {};
  }
}

std::shared_ptr<const Regex> CompileRegex(std::string_view pattern, std::string* error) {
  auto re = std::make_shared<const Regex>(pattern);
  if (!re->re().ok()) {
    // Go's text: "error parsing regexp: missing closing ): `(`".
    const std::string_view code = GoErrorCode(re->re().error_code());
    *error = code.empty() ? "error parsing regexp: " + re->re().error()
                          : "error parsing regexp: " + std::string(code) + ": `" +
                                re->re().error_arg() + "`";
    return nullptr;
  }
  return re;
}

bool RegexMatch(const Regex& re, std::string_view text) {
  return re2::RE2::PartialMatch(re2::StringPiece(text.data(), text.size()), re.re());
}

Val RegexFind(Ctx& /*ctx*/, const Regex& re, std::string_view text) {
  re2::StringPiece match;
  if (!re.re().Match(re2::StringPiece(text.data(), text.size()), 0, text.size(), re2::RE2::UNANCHORED,
                     &match, 1)) {
    return Val::Str("");
  }
  return Val::Str(std::string_view(match.data(), match.size()));  // borrows from `text`
}

Val RegexFindAll(Ctx& ctx, const Regex& re, std::string_view text, int64_t limit) {
  std::vector<Val> out;
  const re2::StringPiece input(text.data(), text.size());
  size_t pos = 0;
  while (limit < 0 || static_cast<int64_t>(out.size()) < limit) {
    if (pos > text.size()) break;
    re2::StringPiece match;
    if (!re.re().Match(input, pos, text.size(), re2::RE2::UNANCHORED, &match, 1)) break;
    out.push_back(Val::Str(std::string_view(match.data(), match.size())));
    const size_t end = static_cast<size_t>(match.data() - text.data()) + match.size();
    pos = match.empty() ? end + 1 : end;
  }
  return ctx.List(out.data(), static_cast<uint32_t>(out.size()));
}

}  // namespace devlet::cel::internal
