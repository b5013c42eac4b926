// The error path of the CEL parser: syntax errors exactly as cel-go's ANTLR parser reports them.
//
// Kubernetes shows cel-go's compile error to the user, and for a syntax error that text comes from
// ANTLR: the lexer's "token recognition error at: '...'" (it drops the characters and goes on),
// and the parser's DefaultErrorStrategy messages "extraneous input", "missing X at Y",
// "mismatched input X expecting {set}" and "no viable alternative at input '...'", each followed
// by its recovery, so one mistake can produce several errors. The fast recursive-descent parser in
// parser.cc stops at the first error; when it fails, this file reads the input again with a model
// of the ANTLR machinery for the CEL grammar:
//
//  - the lexer is ANTLR's longest match over the CEL token rules with its fallback to the longest
//    accepted prefix; on a failure the text runs from the token start to the character at which
//    no rule could continue (inclusive), and that character is skipped;
//  - the parser has one function per grammar rule and calls sync / match / adaptive prediction
//    where ANTLR's generated parser does. Each rule invocation pushes the LL(1) set that follows
//    it inside the calling rule; ANTLR's "expected tokens" (the FIRST set of the current state,
//    followed up the invocation stack while it can be empty, <EOF> at the bottom) and its
//    resynchronisation set (the union of those follow sets) are computed from that stack;
//  - adaptive prediction is written per decision: most CEL decisions are LL(1) (the loops of the
//    left-recursive rules with their precedence checks); the others look a few tokens ahead, and
//    where ANTLR's SLL prediction fails they report the no-viable-alternative input it reports, or
//    take the alternative that already left the rule, as ANTLR does;
//  - cel-go's limits: 30 recovery attempts, 256 tokens consumed per recovery, 100 reported syntax
//    errors, 250 nested invocations of one rule; and its rewrite of "no viable alternative at
//    input '.true'" into "mismatched input 'true' expecting IDENTIFIER".
// The visitor that cel-go runs over the recovered tree adds errors of its own: reserved words as
// names, literals that do not fit, macro arguments (has, all, exists, map, filter, sortBy,
// cel.bind, optMap, the two-variable comprehensions), fields without a name, and its recursion
// limit of 250 nested operators, selects, calls and indexes. Each rule function leaves the
// "shape" of what it read (kind, position, that nesting) for them; entries of map and message
// literals that lost their ':', and the arguments of a call named by a reserved word, are not
// visited by cel-go, so what they would report is dropped.
#include "syntax_errors.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "ast.h"
#include "utf8.h"

namespace devlet::cel::internal {
namespace {

// Token types, numbered as the CEL grammar's lexer numbers them: expected-token sets are printed
// in this order.
enum : int {
  kEof = 0,  // ANTLR's -1; bit 0 of a set
  kEquals = 1, kNotEquals, kIn, kLess, kLessEquals, kGreaterEquals, kGreater, kAnd, kOr,
  kLBracket, kRBracket, kLBrace, kRBrace, kLParen, kRParen, kDot, kComma, kMinus, kExclam,
  kQuestion, kColon, kPlus, kStar, kSlash, kPercent, kTrue, kFalse, kNull, kWhitespace, kComment,
  kNumFloat, kNumInt, kNumUint, kString, kBytes, kIdentifier, kEscIdentifier,
};

// A set of token types; bit 63 is ANTLR's epsilon (the rule can end here).
using Set = uint64_t;
constexpr Set Bit(int t) { return Set{1} << t; }
constexpr Set kEps = Set{1} << 63;
template <typename... T>
constexpr Set Of(T... t) {
  return (Bit(t) | ...);
}

constexpr Set kFirstMember = Of(kLBracket, kLBrace, kLParen, kDot, kMinus, kTrue, kFalse, kNull,
                                kNumFloat, kNumInt, kNumUint, kString, kBytes, kIdentifier);
constexpr Set kFirstExpr = kFirstMember | Bit(kExclam);
constexpr Set kFirstOptExpr = kFirstExpr | Bit(kQuestion);
constexpr Set kFirstOptField = Of(kQuestion, kIdentifier, kEscIdentifier);
constexpr Set kFirstLiteral =
    Of(kMinus, kNumInt, kNumUint, kNumFloat, kString, kBytes, kTrue, kFalse, kNull);
constexpr Set kRelOps = Of(kLess, kLessEquals, kGreaterEquals, kGreater, kEquals, kNotEquals, kIn);
constexpr Set kMulOps = Of(kStar, kSlash, kPercent);
constexpr Set kAddOps = Of(kPlus, kMinus);
constexpr Set kMemberFollow = Of(kDot, kLBracket) | kEps;

// How ANTLR names a token type in an expected-token set.
const char* TokenName(int t) {
  static constexpr const char* kNames[] = {
      "<EOF>", "'=='", "'!='", "'in'", "'<'", "'<='", "'>='", "'>'", "'&&'", "'||'", "'['", "']'",
      "'{'", "'}'", "'('", "')'", "'.'", "','", "'-'", "'!'", "'?'", "':'", "'+'", "'*'", "'/'",
      "'%'", "'true'", "'false'", "'null'", "WHITESPACE", "COMMENT", "NUM_FLOAT", "NUM_INT",
      "NUM_UINT", "STRING", "BYTES", "IDENTIFIER", "ESC_IDENTIFIER"};
  return kNames[t];
}

std::string SetText(Set s) {
  s &= ~kEps;
  std::vector<int> members;
  for (int t = 0; t <= kEscIdentifier; ++t) {
    if (s & Bit(t)) members.push_back(t);
  }
  if (members.size() == 1) return TokenName(members[0]);
  std::string out = "{";
  for (size_t i = 0; i < members.size(); ++i) {
    if (i > 0) out += ", ";
    out += TokenName(members[i]);
  }
  return out + "}";
}

// ANTLR's escapeWSAndQuote.
std::string Quote(std::string_view s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\t') {
      out += "\\t";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else {
      out += c;
    }
  }
  return out + "'";
}

struct Token {
  int type = kEof;
  bool hidden = false;  // whitespace and comments: not seen by the parser
  size_t begin = 0;     // byte offsets in the source
  size_t end = 0;
};

struct Report {
  int64_t offset;  // byte offset, or -1: no location (cel-go's internal errors)
  std::string message;
};

// ---- Lexer -------------------------------------------------------------------------------------

class Lexer {
 public:
  explicit Lexer(std::string_view src) : src_(src) {
    for (size_t i = 0; i < src.size();) {
      const size_t n = std::max<size_t>(1, Utf8SequenceLength(src, i));
      offsets_.push_back(i);
      cps_.push_back(DecodeAt(i, n));
      i += n;
    }
    offsets_.push_back(src.size());
  }

  // Tokenizes everything (the parser's lookahead reads ahead anyway); lexer errors go to `errors`.
  std::vector<Token> Run(std::vector<Report>* errors) {
    std::vector<Token> out;
    const size_t n = cps_.size();
    size_t i = 0;
    while (i < n) {
      int type = kEof;
      size_t accept = 0, dead = 0;
      Longest(i, &type, &accept, &dead);
      if (accept > i) {
        Token t;
        t.type = type;
        t.hidden = type == kWhitespace || type == kComment;
        t.begin = offsets_[i];
        t.end = offsets_[accept];
        out.push_back(t);
        i = accept;
        continue;
      }
      // No rule accepted a prefix: ANTLR reports the text up to and including the character at
      // which the last rule gave up, and skips that character.
      const size_t last = std::min(dead, n - 1);
      const std::string_view text = src_.substr(offsets_[i], offsets_[last + 1] - offsets_[i]);
      errors->push_back({static_cast<int64_t>(offsets_[i]),
                         "Syntax error: token recognition error at: '" + std::string(text) + "'"});
      i = dead < n ? dead + 1 : n;
    }
    Token eof;
    eof.begin = eof.end = src_.size();
    out.push_back(eof);
    return out;
  }

 private:
  char32_t DecodeAt(size_t i, size_t n) const {
    const auto b = [&](size_t k) { return static_cast<unsigned char>(src_[i + k]); };
    if (n == 1) return b(0);
    if (n == 2) return ((b(0) & 0x1F) << 6) | (b(1) & 0x3F);
    if (n == 3) return ((b(0) & 0x0F) << 12) | ((b(1) & 0x3F) << 6) | (b(2) & 0x3F);
    return ((b(0) & 0x07) << 18) | ((b(1) & 0x3F) << 12) | ((b(2) & 0x3F) << 6) | (b(3) & 0x3F);
  }
  char32_t At(size_t i) const { return i < cps_.size() ? cps_[i] : 0xFFFFFFFF; }
  static bool Digit(char32_t c) { return c >= '0' && c <= '9'; }
  static bool Letter(char32_t c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
  static bool Hex(char32_t c) {
    return Digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
  }

  // One candidate rule's outcome: the longest prefix it accepts (`accept`, > start if any) and
  // the position of the character at which it can no longer continue (`dead`).
  struct Run1 {
    int type = kEof;
    size_t accept = 0;
    size_t dead = 0;
  };

  // All rules in parallel: the longest accepted prefix (the earlier rule on a tie) and the
  // position where the last of them gave up.
  void Longest(size_t i, int* type, size_t* accept, size_t* dead) {
    std::vector<Run1> runs;
    const char32_t c = At(i);
    auto fixed = [&](int t, std::u32string_view text) {
      Run1 r;
      r.type = t;
      size_t k = 0;
      while (k < text.size() && At(i + k) == text[k]) ++k;
      r.dead = i + k;
      r.accept = k == text.size() ? i + k : 0;
      runs.push_back(r);
    };
    if (c == '\t' || c == ' ' || c == '\r' || c == '\n' || c == '\f') {
      size_t k = i;
      while (At(k) == '\t' || At(k) == ' ' || At(k) == '\r' || At(k) == '\n' || At(k) == '\f') ++k;
      runs.push_back({kWhitespace, k, k});
    }
    if (c == '/' && At(i + 1) == '/') {
      size_t k = i + 2;
      while (k < cps_.size() && At(k) != '\n') ++k;
      runs.push_back({kComment, k, k});
    }
    switch (c) {
      case '=': fixed(kEquals, U"=="); break;
      case '!': fixed(kExclam, U"!"); fixed(kNotEquals, U"!="); break;
      case '<': fixed(kLess, U"<"); fixed(kLessEquals, U"<="); break;
      case '>': fixed(kGreater, U">"); fixed(kGreaterEquals, U">="); break;
      case '&': fixed(kAnd, U"&&"); break;
      case '|': fixed(kOr, U"||"); break;
      case '[': fixed(kLBracket, U"["); break;
      case ']': fixed(kRBracket, U"]"); break;
      case '{': fixed(kLBrace, U"{"); break;
      case '}': fixed(kRBrace, U"}"); break;
      case '(': fixed(kLParen, U"("); break;
      case ')': fixed(kRParen, U")"); break;
      case '.': fixed(kDot, U"."); break;
      case ',': fixed(kComma, U","); break;
      case '-': fixed(kMinus, U"-"); break;
      case '?': fixed(kQuestion, U"?"); break;
      case ':': fixed(kColon, U":"); break;
      case '+': fixed(kPlus, U"+"); break;
      case '*': fixed(kStar, U"*"); break;
      case '/': fixed(kSlash, U"/"); break;
      case '%': fixed(kPercent, U"%"); break;
      default: break;
    }
    if (Digit(c) || (c == '.' && Digit(At(i + 1)))) runs.push_back(Number(i));
    if (Letter(c) || c == '_') {
      size_t k = i;
      while (Letter(At(k)) || Digit(At(k)) || At(k) == '_') ++k;
      const std::u32string_view word(cps_.data() + i, k - i);
      int t = kIdentifier;
      if (word == U"in") t = kIn;
      if (word == U"true") t = kTrue;
      if (word == U"false") t = kFalse;
      if (word == U"null") t = kNull;
      runs.push_back({t, k, k});
    }
    // STRING, and BYTES = ('b'|'B') STRING; a raw string starts with 'r' or 'R'.
    {
      size_t k = i;
      bool bytes = false, raw = false;
      if (At(k) == 'b' || At(k) == 'B') {
        bytes = true;
        ++k;
      }
      if (At(k) == 'r' || At(k) == 'R') {
        raw = true;
        ++k;
      }
      if (At(k) == '"' || At(k) == '\'') {
        Run1 r = String(k, raw);
        r.type = bytes ? kBytes : kString;
        runs.push_back(r);
      }
    }
    if (c == '`') {
      size_t k = i + 1;
      while (Letter(At(k)) || Digit(At(k)) || At(k) == '_' || At(k) == '.' || At(k) == '-' ||
             At(k) == '/' || At(k) == ' ') {
        ++k;
      }
      if (k > i + 1 && At(k) == '`') {
        runs.push_back({kEscIdentifier, k + 1, k + 1});
      } else {
        runs.push_back({kEscIdentifier, 0, k});
      }
    }
    *type = kEof;
    *accept = 0;
    *dead = i;
    for (const Run1& r : runs) {
      *dead = std::max(*dead, r.dead);
      if (r.accept > *accept) {
        *accept = r.accept;
        *type = r.type;
      }
    }
  }

  // NUM_FLOAT, NUM_INT, NUM_UINT (a number never fails: a digit alone is an int).
  Run1 Number(size_t i) {
    Run1 r;
    auto exponent = [&](size_t k) -> size_t {  // end of EXPONENT at k, or 0
      if (At(k) != 'e' && At(k) != 'E') return 0;
      size_t j = k + 1;
      if (At(j) == '+' || At(j) == '-') ++j;
      if (!Digit(At(j))) return 0;
      while (Digit(At(j))) ++j;
      return j;
    };
    if (At(i) == '.') {
      size_t k = i + 1;
      while (Digit(At(k))) ++k;
      const size_t e = exponent(k);
      r.type = kNumFloat;
      r.accept = r.dead = e ? e : k;
      return r;
    }
    if (At(i) == '0' && At(i + 1) == 'x' && Hex(At(i + 2))) {  // '0x' only: 0X is 0 and X
      size_t k = i + 2;
      while (Hex(At(k))) ++k;
      if (At(k) == 'u' || At(k) == 'U') {
        r.type = kNumUint;
        r.accept = r.dead = k + 1;
      } else {
        r.type = kNumInt;
        r.accept = r.dead = k;
      }
      return r;
    }
    size_t k = i;
    while (Digit(At(k))) ++k;
    r.type = kNumInt;
    r.accept = r.dead = k;
    if (At(k) == 'u' || At(k) == 'U') {
      r.type = kNumUint;
      r.accept = r.dead = k + 1;
    } else if (At(k) == '.' && Digit(At(k + 1))) {
      size_t j = k + 1;
      while (Digit(At(j))) ++j;
      const size_t e = exponent(j);
      r.type = kNumFloat;
      r.accept = r.dead = e ? e : j;
    } else if (const size_t e = exponent(k); e) {
      r.type = kNumFloat;
      r.accept = r.dead = e;
    }
    return r;
  }

  // An escape sequence at k (a backslash): its end, or the position where it went wrong
  // (`*ok` false).
  size_t Escape(size_t k, bool* ok) {
    *ok = false;
    const char32_t e = At(k + 1);
    static constexpr std::u32string_view kSimple = U"abfnrtv\"'\\?`";
    if (e != 0xFFFFFFFF && kSimple.find(e) != std::u32string_view::npos) {
      *ok = true;
      return k + 2;
    }
    auto digits = [&](size_t from, int n, auto pred) -> size_t {
      for (int d = 0; d < n; ++d) {
        if (!pred(At(from + d))) return from + d;
      }
      *ok = true;
      return from + n;
    };
    if (e == 'x' || e == 'X') return digits(k + 2, 2, Hex);
    if (e == 'u') return digits(k + 2, 4, Hex);
    if (e == 'U') return digits(k + 2, 8, Hex);
    if (e >= '0' && e <= '3') {
      return digits(k + 2, 2, [](char32_t c) { return c >= '0' && c <= '7'; });
    }
    return k + 1;
  }

  // The quoted part of a string literal at k (a quote): the one-line and the triple-quoted forms
  // run in parallel ('' is a whole empty string before ''' can open a long one).
  Run1 String(size_t k, bool raw) {
    const char32_t q = At(k);
    Run1 r;
    // One-line form.
    size_t j = k + 1;
    while (true) {
      const char32_t c = At(j);
      if (c == q) {
        r.accept = j + 1;
        r.dead = j + 1;
        break;
      }
      if (c == 0xFFFFFFFF || c == '\n' || c == '\r') {
        r.dead = j;
        break;
      }
      if (c == '\\' && !raw) {
        bool ok;
        const size_t e = Escape(j, &ok);
        if (!ok) {
          r.dead = e;
          break;
        }
        j = e;
        continue;
      }
      ++j;
    }
    if (At(k + 1) == q && At(k + 2) == q) {  // triple-quoted form
      j = k + 3;
      while (true) {
        const char32_t c = At(j);
        if (c == q && At(j + 1) == q && At(j + 2) == q) {
          r.accept = std::max(r.accept, j + 3);
          r.dead = std::max(r.dead, j + 3);
          break;
        }
        if (c == 0xFFFFFFFF) {
          r.dead = std::max(r.dead, j);
          break;
        }
        if (c == '\\' && !raw) {
          bool ok;
          const size_t e = Escape(j, &ok);
          if (!ok) {
            r.dead = std::max(r.dead, e);
            break;
          }
          j = e;
          continue;
        }
        ++j;
      }
    }
    return r;
  }

  std::string_view src_;
  std::u32string cps_;
  std::vector<size_t> offsets_;  // byte offset of each code point, and the size at the end
};

// ---- Parser ------------------------------------------------------------------------------------

// Thrown to end the parse as cel-go's panics do (recovery and reporting limits, recursion).
struct Abort {};

class Parser {
 public:
  // `lexer_errors` are reported as the parser reads up to them (cel-go's lexer runs on demand,
  // so they count towards the same limit and stop with the parse).
  Parser(std::string_view src, std::vector<Token> all, std::vector<Report> lexer_errors,
         std::vector<Report>* errors)
      : src_(src), all_(std::move(all)), lexer_errors_(std::move(lexer_errors)), errors_(errors) {
    for (size_t i = 0; i < all_.size(); ++i) {
      if (!all_[i].hidden) visible_.push_back(i);
    }
  }

  // Parses `start: expr EOF`; returns false when the parse was cut short.
  bool Run() {
    try {
      Start();
    } catch (const Abort&) {
      return false;
    }
    return true;
  }

  std::vector<Report>& visitor_errors() { return visitor_errors_; }
  // The visitor's nesting of counted nodes in the recovered tree.
  int root_vd() const { return root_vd_; }

 private:
  // ---- Tokens
  const Token& LT(size_t k) {  // k >= 1
    const Token& t = all_[visible_[std::min(p_ + k - 1, visible_.size() - 1)]];
    while (next_lexer_error_ < lexer_errors_.size() &&
           (t.type == kEof ||
            lexer_errors_[next_lexer_error_].offset < static_cast<int64_t>(t.begin))) {
      const Report& r = lexer_errors_[next_lexer_error_++];
      Count(r.offset);
      errors_->push_back(r);
    }
    return t;
  }
  int LA(size_t k) { return LT(k).type; }
  std::string_view Text(const Token& t) const { return src_.substr(t.begin, t.end - t.begin); }
  // cel-go's listener: at most 100 syntax errors, then "More than 100" ends the parse.
  void Count(int64_t offset) {
    if (reports_ < 100) {
      ++reports_;
      return;
    }
    errors_->push_back({offset, "Syntax error: More than 100 syntax errors"});
    throw Abort{};
  }
  std::string Display(const Token& t) const {
    return t.type == kEof ? "'<EOF>'" : Quote(Text(t));
  }
  void Consume() {
    if (LA(1) != kEof) ++p_;
  }

  // ---- The invocation stack: the LL(1) set following each rule invocation in its caller.
  struct Frame {
    explicit Frame(Parser* p, Set follow, int rule) : parser(p), rule_index(rule) {
      parser->stack_.push_back(follow);
      if (++parser->depth_[rule] > 250) {
        parser->errors_->push_back({-1, "expression recursion limit exceeded: 250"});
        throw Abort{};
      }
    }
    ~Frame() {
      parser->stack_.pop_back();
      --parser->depth_[rule_index];
    }
    Parser* parser;
    int rule_index;
  };

  // ANTLR's getExpectedTokens for a state whose own (within-rule) LL(1) set is `s`.
  Set Expected(Set s) const {
    Set out = s & ~kEps;
    if (!(s & kEps)) return out;
    for (size_t i = stack_.size(); i-- > 0;) {
      out |= stack_[i] & ~kEps;
      if (!(stack_[i] & kEps)) return out;
    }
    return out | Bit(kEof);
  }
  // ANTLR's getErrorRecoverySet: what follows any rule on the stack.
  Set RecoverySet() const {
    Set out = 0;
    for (Set f : stack_) out |= f;
    return out & ~kEps;
  }

  // ---- Reporting (cel-go's error listener)
  void Notify(const std::string& msg, const Token& at) {
    std::string text = msg;
    // cel-go's rewrite of a reserved word after a dot, kept for compatibility of its messages.
    static constexpr std::string_view kNoViable = "no viable alternative at input '";
    if (text.rfind(kNoViable, 0) == 0 && text.size() > kNoViable.size()) {
      const size_t cp = std::max<size_t>(1, Utf8SequenceLength(text, kNoViable.size()));
      const std::string_view rest = std::string_view(text).substr(kNoViable.size() + cp);
      for (std::string_view word : {"true", "false", "null"}) {
        if (text[kNoViable.size()] != '\n' && rest.size() == word.size() + 1 &&
            rest.substr(0, word.size()) == word && rest.back() == '\'') {
          text = "mismatched input '" + std::string(word) + "' expecting IDENTIFIER";
          break;
        }
      }
    }
    Count(static_cast<int64_t>(at.begin));
    errors_->push_back({static_cast<int64_t>(at.begin), "Syntax error: " + text});
  }

  // ---- DefaultErrorStrategy
  enum class Kind { kNone, kMismatch, kNoViable };
  struct Error {
    Kind kind = Kind::kNone;
    size_t start = 0;      // visible-token index of the decision start (no viable alternative)
    size_t offending = 0;  // visible-token index
    Set expected = 0;
  };

  bool failed() const { return error_.kind != Kind::kNone; }
  void SetMismatch(Set expected) {
    error_ = {Kind::kMismatch, p_, p_, expected};
  }
  void SetNoViable(size_t start, size_t offending) {
    error_ = {Kind::kNoViable, start, offending, 0};
  }
  void EndErrorCondition() {
    recovering_ = false;
    last_error_index_ = -1;
    last_error_states_.clear();
  }
  void ReportUnwanted(Set expected) {
    if (recovering_) return;
    recovering_ = true;
    Notify("extraneous input " + Display(LT(1)) + " expecting " + SetText(expected), LT(1));
  }
  void ReportMissing(Set expected) {
    if (recovering_) return;
    recovering_ = true;
    Notify("missing " + SetText(expected) + " at " + Display(LT(1)), LT(1));
  }
  const Token& Visible(size_t i) const { return all_[visible_[std::min(i, visible_.size() - 1)]]; }
  void ReportError() {
    if (recovering_) return;
    recovering_ = true;
    const Token& off = Visible(error_.offending);
    if (error_.kind == Kind::kMismatch) {
      Notify("mismatched input " + Display(off) + " expecting " + SetText(error_.expected), off);
      return;
    }
    const Token& start = Visible(error_.start);
    std::string input;
    if (start.type == kEof) {
      input = "<EOF>";
    } else {
      // The text of every token in between, hidden ones included (characters the lexer
      // dropped are not in any token).
      for (size_t i = visible_[error_.start]; i <= visible_[std::min(error_.offending,
                                                                       visible_.size() - 1)];
           ++i) {
        if (all_[i].type == kEof) break;
        input += Text(all_[i]);
      }
    }
    Notify("no viable alternative at input " + Quote(input), off);
  }
  // cel-go's recoveryLimitErrorStrategy: at most 30 recoveries.
  void CheckAttempts() {
    if (attempts_ == 30) {
      ++attempts_;
      Notify("error recovery attempt limit exceeded: 30", LT(1));
      throw Abort{};
    }
    ++attempts_;
  }
  // A consume during recovery: cel-go allows 256 per recovery.
  void RecoveryConsume(int* consumed) {
    if (*consumed >= 256) {
      errors_->push_back({-1, "error recovery token lookahead limit exceeded: 256"});
      throw Abort{};
    }
    ++*consumed;
    Consume();
  }
  void Recover(int state) {
    CheckAttempts();
    int consumed = 0;
    if (last_error_index_ == static_cast<int64_t>(p_) &&
        std::find(last_error_states_.begin(), last_error_states_.end(), state) !=
            last_error_states_.end()) {
      RecoveryConsume(&consumed);
    }
    last_error_index_ = static_cast<int64_t>(p_);
    last_error_states_.push_back(state);
    const Set follow = RecoverySet();
    while (LA(1) != kEof && !(follow & Bit(LA(1)))) RecoveryConsume(&consumed);
  }
  // The end of every rule: report and recover from an error raised in it.
  void ErrorExit() {
    if (!failed()) return;
    ReportError();
    Recover(state_);
    error_ = Error{};
  }

  // sync() before a decision at `state`, whose within-rule LL(1) set is `next`; `loop_back` for
  // the loop-back states of (..)* and (..)+. Returns false when it raised an error.
  bool Sync(int state, Set next, bool loop_back) {
    state_ = state;
    if (recovering_) return true;
    if ((next & kEps) || (next & Bit(LA(1)))) return true;
    if (!loop_back) {
      if (Expected(next) & Bit(LA(2))) {  // single-token deletion
        ReportUnwanted(Expected(next));
        Consume();
        EndErrorCondition();
        return true;
      }
      SetMismatch(Expected(next));
      return false;
    }
    ReportUnwanted(Expected(next));
    const Set until = Expected(next) | RecoverySet();
    while (LA(1) != kEof && !(until & Bit(LA(1)))) Consume();
    return true;
  }

  // match(ttype) at `state`; `after` is the within-rule LL(1) set after the token.
  bool Match(int state, int ttype, Set after) {
    state_ = state;
    if (LA(1) == ttype) {
      EndErrorCondition();
      Consume();
      return true;
    }
    CheckAttempts();
    const Set expected = Expected(Bit(ttype));
    if (expected & Bit(LA(2))) {  // single-token deletion
      ReportUnwanted(expected);
      Consume();
      EndErrorCondition();
      Consume();
      return true;
    }
    if (Expected(after) & Bit(LA(1))) {  // single-token insertion
      ReportMissing(expected);
      return true;
    }
    SetMismatch(expected);
    return false;
  }
  // A matched set of operators (the loop decisions already checked the token).
  void MatchOp() {
    EndErrorCondition();
    Consume();
  }

  // ---- What cel-go's visitor makes of the recovered tree, as far as its macros look at it: the
  // kind of each expression and the position cel-go gives it.
  struct Shape {
    // kOther: a call (operators, index, calls, comprehensions) or a list; kLiteral: a constant,
    // map or message literal.
    enum Kind { kOther, kIdent, kSelect, kLiteral };
    Kind kind = kOther;
    size_t offset = 0;
    std::string_view name;  // kIdent
    // Nesting of the nodes cel-go's visitor counts towards its recursion limit (conditional,
    // relation and arithmetic operators, select, member call, index).
    int vd = 0;
  };

  static int MaxVd(const std::vector<Shape>& shapes) {
    int vd = 0;
    for (const Shape& s : shapes) vd = std::max(vd, s.vd);
    return vd;
  }

  // The argument checks of the macros of the Kubernetes environment (cel-go reports them while
  // visiting the recovered tree). `target` is null for a global call.
  void CheckMacro(const Shape* target, std::string_view fn, const std::vector<Shape>& args) {
    const size_t n = args.size();
    auto need = [&](size_t i, const char* message) {
      if (args[i].kind != Shape::kIdent) {
        visitor_errors_.push_back({static_cast<int64_t>(args[i].offset), message});
        return false;
      }
      return true;
    };
    if (target == nullptr) {
      if (fn == "has" && n == 1 && args[0].kind != Shape::kSelect) {
        visitor_errors_.push_back(
            {static_cast<int64_t>(args[0].offset), "invalid argument to has() macro"});
      }
      return;
    }
    if (n == 2 && (fn == "all" || fn == "exists" || fn == "exists_one")) {
      need(0, "argument must be a simple name");
    } else if ((n == 2 && fn == "filter") || ((n == 2 || n == 3) && fn == "map")) {
      need(0, "argument is not an identifier");
    } else if ((n == 3 && (fn == "all" || fn == "exists" || fn == "existsOne" ||
                           fn == "exists_one" || fn == "transformList" || fn == "transformMap" ||
                           fn == "transformMapEntry")) ||
               (n == 4 && (fn == "transformList" || fn == "transformMap" ||
                           fn == "transformMapEntry"))) {
      if (need(0, "argument must be a simple name")) need(1, "argument must be a simple name");
    } else if (n == 2 && fn == "sortBy") {
      if (target->kind == Shape::kLiteral) {
        visitor_errors_.push_back({static_cast<int64_t>(target->offset),
                                   "sortBy can only be applied to a list, identifier, "
                                   "comprehension, call or select expression"});
      } else {
        need(0, "argument is not an identifier");
      }
    } else if (n == 2 && (fn == "optMap" || fn == "optFlatMap")) {
      need(0, fn == "optMap" ? "optMap() variable name must be a simple identifier"
                             : "optFlatMap() variable name must be a simple identifier");
    } else if (n == 3 && fn == "bind" && target->kind == Shape::kIdent && target->name == "cel") {
      need(0, "cel.bind() variable names must be simple identifiers");
    }
  }

  // ---- Grammar rules (rule indexes as the grammar numbers them)
  enum Rule {
    kStart, kExpr, kOrRule, kAndRule, kRelation, kCalc, kUnary, kMember, kPrimary, kExprList,
    kListInit, kFieldInit, kOptField, kMapInit, kEscapeIdent, kOptExpr, kLiteral
  };

  void Start() {
    {
      Frame f(this, Bit(kEof), kExpr);
      Expr();
      root_vd_ = shape_.vd;
    }
    if (Match(35, kEof, kEps)) return;
    ErrorExit();
  }

  void Expr() {
    {
      Frame f(this, Of(kQuestion) | kEps, kOrRule);
      ConditionalOr();
    }
    state_ = 43;
    if (LA(1) == kQuestion) {
      Shape shape{Shape::kOther, LT(1).begin};
      int vd = shape_.vd;
      if (!Match(38, kQuestion, kFirstExpr)) return ErrorExit();
      {
        Frame f(this, Of(kColon), kOrRule);
        ConditionalOr();
      }
      shape.vd = 1 + (vd = std::max(vd, shape_.vd));
      shape_ = shape;
      if (!Match(40, kColon, kFirstExpr)) return ErrorExit();
      Frame f(this, kEps, kExpr);
      Expr();
      shape.vd = 1 + std::max(vd, shape_.vd);
      shape_ = shape;
    }
  }

  void ConditionalOr() {
    {
      Frame f(this, Of(kOr) | kEps, kAndRule);
      ConditionalAnd();
    }
    state_ = 50;
    std::vector<size_t> ops;
    int vd = shape_.vd;
    while (LA(1) == kOr) {
      ops.push_back(LT(1).begin);
      if (!Match(46, kOr, kFirstExpr)) return ErrorExit();
      {
        Frame f(this, Of(kOr) | kEps, kAndRule);
        ConditionalAnd();
      }
      vd = std::max(vd, shape_.vd);
      state_ = 52;
    }
    // cel-go balances the chain: the root is the middle operator (not counted by its visitor).
    if (!ops.empty()) shape_ = {Shape::kOther, ops[(ops.size() + 1) / 2 - 1], "", vd};
  }

  void ConditionalAnd() {
    {
      Frame f(this, Of(kAnd) | kEps, kRelation);
      Relation(0);
    }
    state_ = 58;
    std::vector<size_t> ops;
    int vd = shape_.vd;
    while (LA(1) == kAnd) {
      ops.push_back(LT(1).begin);
      if (!Match(54, kAnd, kFirstExpr)) return ErrorExit();
      {
        Frame f(this, Of(kAnd) | kEps, kRelation);
        Relation(0);
      }
      vd = std::max(vd, shape_.vd);
      state_ = 60;
    }
    // cel-go balances the chain: the root is the middle operator (not counted by its visitor).
    if (!ops.empty()) shape_ = {Shape::kOther, ops[(ops.size() + 1) / 2 - 1], "", vd};
  }

  // relation: calc ({precpred 1}? op relation[2])*  (the left-recursive rule as ANTLR rewrites
  // it; the loop is decided by the operator and the precedence).
  void Relation(int prec) {
    {
      Frame f(this, kRelOps | kEps, kCalc);
      Calc(0);
    }
    state_ = 69;
    while ((kRelOps & Bit(LA(1))) && 1 >= prec) {
      state_ = 65;
      Shape shape{Shape::kOther, LT(1).begin, "", shape_.vd};
      MatchOp();
      Frame f(this, kRelOps | kEps, kRelation);
      Relation(2);
      shape.vd = 1 + std::max(shape.vd, shape_.vd);
      shape_ = shape;
      state_ = 71;
    }
  }

  // calc: unary ({precpred 2}? ('*'|'/'|'%') calc[3] | {precpred 1}? ('+'|'-') calc[2])*
  void Calc(int prec) {
    {
      Frame f(this, kMulOps | kAddOps | kEps, kUnary);
      Unary();
    }
    state_ = 83;
    while (((kMulOps & Bit(LA(1))) && 2 >= prec) || ((kAddOps & Bit(LA(1))) && 1 >= prec)) {
      const bool mul = kMulOps & Bit(LA(1));
      state_ = mul ? 76 : 79;
      Shape shape{Shape::kOther, LT(1).begin, "", shape_.vd};
      MatchOp();
      Frame f(this, kMulOps | kAddOps | kEps, kCalc);
      Calc(mul ? 3 : 2);
      shape.vd = 1 + std::max(shape.vd, shape_.vd);
      shape_ = shape;
      state_ = 85;
    }
  }

  // unary: member | '!'+ member | '-'+ member
  void Unary() {
    shape_ = {Shape::kOther, LT(1).begin};
    if (!Sync(99, kFirstExpr, false)) return ErrorExit();
    int alt = 0;
    if (LA(1) == kExclam) {
      alt = 2;
    } else if (LA(1) == kMinus) {
      // '-' then a number is a negative literal (ANTLR's ambiguity goes to the first
      // alternative); '-' before anything else that can start a member is a negation.
      if (LA(2) == kNumInt || LA(2) == kNumFloat) {
        alt = 1;
      } else if (LA(2) == kMinus || (kFirstMember & Bit(LA(2)))) {
        alt = 3;
      } else {
        SetNoViable(p_, p_ + 1);
        return ErrorExit();
      }
    } else if (kFirstMember & Bit(LA(1))) {
      alt = 1;
    } else {
      SetNoViable(p_, p_);
      return ErrorExit();
    }
    const Shape op{Shape::kOther, LT(1).begin};
    int ops = 0;
    if (alt == 2) {
      if (!Sync(88, Of(kExclam), false)) return ErrorExit();
      do {
        ++ops;
        if (!Match(87, kExclam, Of(kExclam) | kFirstMember)) return ErrorExit();
        Sync(90, Of(kExclam) | kFirstMember, true);
      } while (LA(1) == kExclam);
    } else if (alt == 3) {
      if (!Sync(94, Of(kMinus), false)) return ErrorExit();
      while (true) {
        ++ops;
        if (!Match(93, kMinus, Of(kMinus) | kFirstMember)) return ErrorExit();
        Sync(96, Of(kMinus) | kFirstMember, true);
        // Another '-': before a number both readings (negation, negative literal) match and
        // ANTLR takes the first, the loop.
        if (LA(1) == kMinus) {
          if (LA(2) == kMinus || (kFirstMember & Bit(LA(2)))) continue;
          SetNoViable(p_, p_ + 1);
          return ErrorExit();
        }
        if (kFirstMember & Bit(LA(1))) break;
        SetNoViable(p_, p_);
        return ErrorExit();
      }
    }
    Frame f(this, kEps, kMember);
    Member();
    // An even number of ! or - leaves the operand alone (cel-go drops them in pairs).
    if (ops % 2 == 1) shape_ = {op.kind, op.offset, "", shape_.vd};
  }

  // member: primary ('.' '?'? escapeIdent | '.' IDENTIFIER '(' exprList? ')' | '[' '?'? expr ']')*
  void Member() {
    {
      Frame f(this, kMemberFollow, kPrimary);
      Primary();
    }
    state_ = 128;
    while (LA(1) == kDot || LA(1) == kLBracket) {
      int alt;
      if (LA(1) == kLBracket) {
        alt = 3;
      } else if (LA(2) == kQuestion || LA(2) == kEscIdentifier) {
        alt = 1;
      } else if (LA(2) == kIdentifier) {
        alt = LA(3) == kLParen ? 2 : 1;
      } else {
        state_ = 126;
        SetNoViable(p_, p_ + 1);
        return ErrorExit();
      }
      const Shape target = shape_;
      shape_ = {Shape::kOther, LT(1).begin};
      if (alt == 1) {
        if (!Match(105, kDot, Of(kQuestion, kIdentifier, kEscIdentifier))) return ErrorExit();
        if (!Sync(107, Of(kQuestion, kIdentifier, kEscIdentifier), false)) return ErrorExit();
        const bool opt = LA(1) == kQuestion;
        if (opt) {
          if (!Match(106, kQuestion, Of(kIdentifier, kEscIdentifier))) return ErrorExit();
        }
        const size_t at = LT(1).begin;
        const Shape select{opt ? Shape::kOther : Shape::kSelect, shape_.offset, "", target.vd + 1};
        {
          Frame f(this, kMemberFollow, kEscapeIdent);
          if (!EscapeIdent()) {
            visitor_errors_.push_back({static_cast<int64_t>(at), "unsupported ident kind"});
          }
        }
        shape_ = select;
        if (failed()) return ErrorExit();
      } else if (alt == 2) {
        if (!Match(111, kDot, Of(kIdentifier))) return ErrorExit();
        const Token id = LT(1);
        if (!Match(112, kIdentifier, Of(kLParen))) return ErrorExit();
        const Shape call{Shape::kOther, LT(1).begin};
        if (!Match(113, kLParen, Of(kRParen) | kFirstExpr)) return ErrorExit();
        if (!Sync(115, Of(kRParen) | kFirstExpr, false)) return ErrorExit();
        std::vector<Shape> args;
        if (kFirstExpr & Bit(LA(1))) {
          Frame f(this, Of(kRParen), kExprList);
          ExprList(&args);
        }
        if (id.type == kIdentifier) CheckMacro(&target, Text(id), args);
        shape_ = call;
        shape_.vd = 1 + std::max(target.vd, MaxVd(args));
        if (!Match(117, kRParen, kMemberFollow)) return ErrorExit();
      } else {
        if (!Match(119, kLBracket, Of(kQuestion) | kFirstExpr)) return ErrorExit();
        if (!Sync(121, Of(kQuestion) | kFirstExpr, false)) return ErrorExit();
        if (LA(1) == kQuestion) {
          if (!Match(120, kQuestion, kFirstExpr)) return ErrorExit();
        }
        const Shape index = shape_;
        {
          Frame f(this, Of(kRBracket), kExpr);
          Expr();
        }
        const int inner = shape_.vd;
        shape_ = index;
        shape_.vd = 1 + std::max(target.vd, inner);
        if (!Match(124, kRBracket, kMemberFollow)) return ErrorExit();
      }
      state_ = 130;
    }
  }

  // cel-go's visitor rejects reserved words as identifiers (at the primary's first token).
  bool CheckReserved(const Token& first, const Token& id) {
    static constexpr std::string_view kReserved[] = {
        "as", "break", "const", "continue", "else", "for", "function", "if", "import", "let",
        "loop", "package", "namespace", "return", "var", "void", "while"};
    const std::string_view name = Text(id);
    for (std::string_view r : kReserved) {
      if (r == name) {
        visitor_errors_.push_back(
            {static_cast<int64_t>(first.begin), "reserved identifier: " + std::string(name)});
        return true;
      }
    }
    return false;
  }

  void Primary() {
    shape_ = {Shape::kOther, LT(1).begin};
    if (!Sync(184, kFirstMember, false)) return ErrorExit();
    int alt = 0;
    switch (LA(1)) {
      case kLParen: alt = 3; break;
      case kLBracket: alt = 4; break;
      case kLBrace: alt = 5; break;
      case kMinus:
        if (LA(2) != kNumInt && LA(2) != kNumFloat) {
          SetNoViable(p_, p_ + 1);
          return ErrorExit();
        }
        alt = 7;
        break;
      case kNumInt: case kNumUint: case kNumFloat: case kString: case kBytes: case kTrue:
      case kFalse: case kNull:
        alt = 7;
        break;
      case kDot:
      case kIdentifier: {
        size_t k = 1;
        if (LA(1) == kDot) {
          if (LA(2) != kIdentifier) {
            SetNoViable(p_, p_ + 1);
            return ErrorExit();
          }
          k = 2;
        }
        // IDENTIFIER '(' is a call; IDENTIFIER ('.' IDENTIFIER)* '{' a message; else a name.
        size_t j = k + 1;
        if (LA(j) == kLParen) {
          alt = 2;
          break;
        }
        while (LA(j) == kDot && LA(j + 1) == kIdentifier) j += 2;
        alt = LA(j) == kLBrace ? 6 : 1;
        break;
      }
      default:
        SetNoViable(p_, p_);
        return ErrorExit();
    }
    const Token first = LT(1);
    switch (alt) {
      case 1:
      case 2: {
        if (!Sync(alt == 1 ? 132 : 136, Of(kDot, kIdentifier), false)) return ErrorExit();
        if (LA(1) == kDot && !Match(alt == 1 ? 131 : 135, kDot, Of(kIdentifier))) {
          return ErrorExit();
        }
        const Token id = LT(1);
        if (!Match(alt == 1 ? 134 : 138, kIdentifier, alt == 1 ? kEps : Of(kLParen))) {
          return ErrorExit();
        }
        const bool reserved = id.type == kIdentifier && CheckReserved(first, id);
        if (alt == 1) {
          // A leading-dot name is an identifier too (named ".x"); only cel.bind looks at names.
          if (id.type == kIdentifier) {
            shape_ = {Shape::kIdent, id.begin, first.type == kDot ? "" : Text(id)};
          }
          return;
        }
        const Shape call{Shape::kOther, LT(1).begin};
        if (!Match(139, kLParen, Of(kRParen) | kFirstExpr)) return ErrorExit();
        if (!Sync(141, Of(kRParen) | kFirstExpr, false)) return ErrorExit();
        std::vector<Shape> args;
        const size_t before_args = visitor_errors_.size();
        if (kFirstExpr & Bit(LA(1))) {
          Frame f(this, Of(kRParen), kExprList);
          ExprList(&args);
        }
        if (reserved) {
          visitor_errors_.resize(before_args);  // cel-go stops at the name, before the arguments
        } else if (id.type == kIdentifier && first.type != kDot) {
          CheckMacro(nullptr, Text(id), args);
        }
        shape_ = call;
        shape_.vd = MaxVd(args);
        if (!Match(143, kRParen, kEps)) return ErrorExit();
        return;
      }
      case 3: {
        if (!Match(144, kLParen, kFirstExpr)) return ErrorExit();
        {
          Frame f(this, Of(kRParen), kExpr);
          Expr();  // its shape is the nested expression's
        }
        if (!Match(146, kRParen, kEps)) return ErrorExit();
        return;
      }
      case 4:
      case 5: {
        const bool list = alt == 4;
        const int close = list ? kRBracket : kRBrace;
        const Set tail = Of(kComma, close);
        if (!Match(list ? 148 : 156, list ? kLBracket : kLBrace, tail | kFirstOptExpr)) {
          return ErrorExit();
        }
        if (!Sync(list ? 150 : 158, tail | kFirstOptExpr, false)) return ErrorExit();
        int vd = 0;
        if (kFirstOptExpr & Bit(LA(1))) {
          Frame f(this, tail, list ? kListInit : kMapInit);
          if (list) {
            ListInit(&vd);
          } else {
            MapInit(&vd);
          }
        }
        shape_ = {list ? Shape::kOther : Shape::kLiteral, first.begin, "", vd};
        if (!Sync(list ? 153 : 161, tail, false)) return ErrorExit();
        if (LA(1) == kComma && !Match(list ? 152 : 160, kComma, Of(close))) return ErrorExit();
        if (!Match(list ? 155 : 163, close, kEps)) return ErrorExit();
        return;
      }
      case 6: {
        if (!Sync(165, Of(kDot, kIdentifier), false)) return ErrorExit();
        if (LA(1) == kDot && !Match(164, kDot, Of(kIdentifier))) return ErrorExit();
        if (!Match(167, kIdentifier, Of(kDot, kLBrace))) return ErrorExit();
        if (!Sync(172, Of(kDot, kLBrace), false)) return ErrorExit();
        while (LA(1) == kDot) {
          if (!Match(168, kDot, Of(kIdentifier))) return ErrorExit();
          if (!Match(169, kIdentifier, Of(kDot, kLBrace))) return ErrorExit();
          Sync(174, Of(kDot, kLBrace), true);
        }
        const Set tail = Of(kComma, kRBrace);
        const size_t brace = LT(1).begin;
        if (!Match(175, kLBrace, tail | kFirstOptField)) return ErrorExit();
        if (!Sync(177, tail | kFirstOptField, false)) return ErrorExit();
        int vd = 0;
        if (kFirstOptField & Bit(LA(1))) {
          Frame f(this, tail, kFieldInit);
          FieldInit(&vd);
        }
        shape_ = {Shape::kLiteral, brace, "", vd};  // cel-go places a message at its brace
        if (!Sync(180, tail, false)) return ErrorExit();
        if (LA(1) == kComma && !Match(179, kComma, Of(kRBrace))) return ErrorExit();
        if (!Match(182, kRBrace, kEps)) return ErrorExit();
        return;
      }
      default: {
        Frame f(this, kEps, kLiteral);
        Literal();
        shape_ = {Shape::kLiteral, first.begin};
        return;
      }
    }
  }

  void ExprList(std::vector<Shape>* args) {
    {
      Frame f(this, Of(kComma) | kEps, kExpr);
      Expr();
      args->push_back(shape_);
    }
    state_ = 191;
    while (LA(1) == kComma) {
      if (!Match(187, kComma, kFirstExpr)) return ErrorExit();
      {
        Frame f(this, Of(kComma) | kEps, kExpr);
        Expr();
        args->push_back(shape_);
      }
      state_ = 193;
    }
  }

  // listInit: optExpr (',' optExpr)*; a ',' not followed by an element is left to the list's
  // optional trailing comma (ANTLR's prediction keeps the exit, which already left the rule).
  void ListInit(int* vd) {
    {
      Frame f(this, Of(kComma) | kEps, kOptExpr);
      OptExpr();
      *vd = std::max(*vd, shape_.vd);
    }
    state_ = 199;
    while (LA(1) == kComma && (kFirstOptExpr & Bit(LA(2)))) {
      if (!Match(195, kComma, kFirstOptExpr)) return ErrorExit();
      {
        Frame f(this, Of(kComma) | kEps, kOptExpr);
        OptExpr();
        *vd = std::max(*vd, shape_.vd);
      }
      state_ = 201;
    }
  }

  // cel-go's visitor skips an entry of a map or message literal that lost its ':' (and what
  // follows it), so the errors it would have found there are dropped.
  void FieldInit(int* vd) {
    const size_t start = LT(1).begin;
    bool first = true;
    do {
      if (!first && !Match(205, kComma, kFirstOptField)) return ErrorExit();
      const size_t entry = visitor_errors_.size();
      bool named;
      {
        Frame f(this, Of(kColon), kOptField);
        named = OptField();
      }
      if (!Match(first ? 203 : 207, kColon, kFirstExpr)) {
        visitor_errors_.resize(entry);
        return ErrorExit();
      }
      if (!named) {  // cel-go places it at the start of the field list
        visitor_errors_.push_back({static_cast<int64_t>(start), "unsupported ident kind"});
      }
      {
        Frame f(this, Of(kComma) | kEps, kExpr);
        Expr();
        *vd = std::max(*vd, shape_.vd);
      }
      state_ = first ? 212 : 214;
      first = false;
    } while (LA(1) == kComma && (kFirstOptField & Bit(LA(2))));
  }

  // Returns whether the field has a name for cel-go's visitor.
  bool OptField() {
    if (!Sync(216, kFirstOptField, false)) {
      ErrorExit();
      return false;
    }
    if (LA(1) == kQuestion && !Match(215, kQuestion, Of(kIdentifier, kEscIdentifier))) {
      ErrorExit();
      return false;
    }
    Frame f(this, kEps, kEscapeIdent);
    return EscapeIdent();
  }

  void MapInit(int* vd) {
    bool first = true;
    do {
      if (!first && !Match(223, kComma, kFirstOptExpr)) return ErrorExit();
      const size_t entry = visitor_errors_.size();
      {
        Frame f(this, Of(kColon), kOptExpr);
        OptExpr();
      }
      const int key_vd = shape_.vd;
      if (!Match(first ? 221 : 225, kColon, kFirstExpr)) {
        visitor_errors_.resize(entry);
        return ErrorExit();
      }
      *vd = std::max(*vd, key_vd);
      {
        Frame f(this, Of(kComma) | kEps, kExpr);
        Expr();
        *vd = std::max(*vd, shape_.vd);
      }
      state_ = first ? 230 : 232;
      first = false;
    } while (LA(1) == kComma && (kFirstOptExpr & Bit(LA(2))));
  }

  // Returns false when no alternative was entered (cel-go's visitor then has no identifier).
  bool EscapeIdent() {
    if (!Sync(235, Of(kIdentifier, kEscIdentifier), false)) {
      ErrorExit();
      return false;
    }
    if (LA(1) == kIdentifier) {
      if (!Match(233, kIdentifier, kEps)) ErrorExit();
    } else if (LA(1) == kEscIdentifier) {
      if (!Match(234, kEscIdentifier, kEps)) ErrorExit();
    } else {
      SetNoViable(p_, p_);
      ErrorExit();
      return false;
    }
    return true;
  }

  void OptExpr() {
    if (!Sync(238, kFirstOptExpr, false)) return ErrorExit();
    if (LA(1) == kQuestion && !Match(237, kQuestion, kFirstExpr)) return ErrorExit();
    Frame f(this, kEps, kExpr);
    Expr();
  }

  // cel-go's visitor: a literal that does not fit its type is an error at the literal.
  void CheckNumber(const Token& first, const Token& tok, bool negative) {
    std::string text(Text(tok));
    if (tok.type == kNumFloat) {
      if (negative) text.insert(text.begin(), '-');
      char* end = nullptr;
      errno = 0;
      std::strtod(text.c_str(), &end);
      if (errno == ERANGE && std::abs(std::strtod(text.c_str(), nullptr)) > 1) {
        visitor_errors_.push_back({static_cast<int64_t>(first.begin), "invalid double literal"});
      }
      return;
    }
    if (tok.type == kNumUint) text.pop_back();
    const bool hex = text.size() > 2 && text[0] == '0' && text[1] == 'x';
    const std::string_view digits = hex ? std::string_view(text).substr(2) : text;
    uint64_t v = 0;
    const auto [ptr, ec] =
        std::from_chars(digits.data(), digits.data() + digits.size(), v, hex ? 16 : 10);
    bool bad = ec != std::errc() || ptr != digits.data() + digits.size();
    if (tok.type == kNumInt) {
      bad = bad || v > static_cast<uint64_t>(INT64_MAX) + (negative ? 1 : 0);
    }
    if (bad) {
      visitor_errors_.push_back({static_cast<int64_t>(first.begin),
                                 tok.type == kNumUint ? "invalid uint literal"
                                                      : "invalid int literal"});
    }
  }

  void Literal() {
    if (!Sync(256, kFirstLiteral, false)) return ErrorExit();
    const Token first = LT(1);
    int t = LA(1);
    if (t == kMinus) {
      if (LA(2) != kNumInt && LA(2) != kNumFloat) {
        SetNoViable(p_, p_ + 1);
        return ErrorExit();
      }
      t = LA(2);
    }
    if (!(kFirstLiteral & Bit(t))) {
      SetNoViable(p_, p_);
      return ErrorExit();
    }
    if (t == kNumInt || t == kNumFloat) {
      const bool is_int = t == kNumInt;
      if (!Sync(is_int ? 243 : 248, Of(kMinus, t), false)) return ErrorExit();
      const bool negative = LA(1) == kMinus;
      if (negative && !Match(is_int ? 242 : 247, kMinus, Of(t))) return ErrorExit();
      const Token tok = LT(1);
      if (!Match(is_int ? 245 : 250, t, kEps)) return ErrorExit();
      if (tok.type == t) CheckNumber(first, tok, negative);
      return;
    }
    const Token tok = LT(1);
    if (!Match(246 + t, t, kEps)) return ErrorExit();
    if (t == kNumUint && tok.type == t) CheckNumber(first, tok, false);
  }

  std::string_view src_;
  std::vector<Token> all_;
  std::vector<size_t> visible_;  // indexes into all_ of the tokens the parser sees
  std::vector<Report> lexer_errors_;
  size_t next_lexer_error_ = 0;
  std::vector<Report>* errors_;
  std::vector<Report> visitor_errors_;
  size_t p_ = 0;  // index into visible_
  std::vector<Set> stack_;
  int depth_[kLiteral + 1] = {};
  int state_ = 0;
  Error error_;
  bool recovering_ = false;
  int64_t last_error_index_ = -1;
  std::vector<int> last_error_states_;
  int attempts_ = 0;
  int reports_ = 0;
  Shape shape_;  // the shape of the expression the last rule read
  int root_vd_ = 0;
};

}  // namespace

std::string CelGoSyntaxErrors(std::string_view source) {
  std::vector<Report> errors, lexer_errors;
  Lexer lexer(source);
  std::vector<Token> tokens = lexer.Run(&lexer_errors);
  Parser parser(source, std::move(tokens), std::move(lexer_errors), &errors);
  const bool finished = parser.Run();
  if (errors.empty()) return std::string();
  // cel-go's visitor runs over the recovered tree unless the parse was cut short.
  if (finished) {
    if (parser.root_vd() > 250) {
      // Its recursion limit ends the visit (the errors it found on the way are not modelled).
      errors.push_back({-1, "max recursion depth exceeded"});
    } else {
      for (Report& r : parser.visitor_errors()) errors.push_back(std::move(r));
    }
  }
  // cel-go keeps the first 100 errors, sorts them by position (stable) and counts the rest.
  const size_t total = errors.size();
  if (errors.size() > 100) errors.resize(100);
  std::stable_sort(errors.begin(), errors.end(),
                   [](const Report& a, const Report& b) { return a.offset < b.offset; });
  std::string out;
  for (const Report& r : errors) {
    if (!out.empty()) out += '\n';
    if (r.offset < 0) {
      out += "ERROR: <input>:-1:0: " + r.message;
    } else if (source.empty()) {
      // cel-go finds no line in an empty source: column 0 and no snippet.
      out += "ERROR: <input>:1:0: " + r.message;
    } else {
      out += FormatError(source, static_cast<int32_t>(r.offset), r.message);
    }
  }
  if (total > 100) out += "\n" + std::to_string(total - 100) + " more errors were truncated";
  return out;
}

}  // namespace devlet::cel::internal
