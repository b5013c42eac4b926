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

std::shared_ptr<const Regex> CompileRegex(std::string_view pattern, std::string* error) {
  auto re = std::make_shared<const Regex>(pattern);
  if (!re->re().ok()) {
    *error = "error parsing regexp: " + re->re().error();
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
