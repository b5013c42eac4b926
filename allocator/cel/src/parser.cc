// CEL lexer, recursive-descent parser and macro expansion.
//
// Grammar (google/cel-spec langdef.md), lowest precedence first:
//   expr     = or ['?' or ':' expr]
//   or       = and {'||' and}            and = relation {'&&' relation}
//   relation = add {('<'|'<='|'>='|'>'|'=='|'!='|'in') add}
//   add      = mul {('+'|'-') mul}       mul = unary {('*'|'/'|'%') unary}
//   unary    = member | '!'{'!'} member | '-'{'-'} member
//   member   = primary {'.' ['?'] ident ['(' args ')'] | '[' ['?'] expr ']' | '{' fields '}'}
//   primary  = ['.'] ident ['(' args ')'] | '(' expr ')' | '[' list ']' | '{' map '}' | literal
// Recursion is bounded (ParseOptions::max_recursion_depth), as is the height of the tree, so no
// later pass can overflow the stack. && and || chains are balanced like cel-go does.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <string>
#include <utility>

#include "ast.h"
#include "syntax_errors.h"
#include "utf8.h"

namespace devlet::cel::internal {
namespace {

enum class Tok : unsigned char {
  kEof, kIdent, kInt, kUint, kDouble, kString, kBytes, kTrue, kFalse, kNull, kIn,
  kLParen, kRParen, kLBracket, kRBracket, kLBrace, kRBrace, kDot, kComma, kColon, kQuestion,
  kPlus, kMinus, kStar, kSlash, kPercent, kBang, kEq, kNe, kLt, kLe, kGt, kGe, kAnd, kOr,
  kQuotedIdent, kError,
};

struct Token {
  Tok kind = Tok::kEof;
  int32_t offset = 0;
  std::string_view text;  // source text of the token
  std::string value;      // decoded string/bytes literal, or quoted identifier
};

bool IsIdentStart(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsHex(char c) { return IsDigit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }
int HexVal(char c) {
  if (IsDigit(c)) return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return c - 'A' + 10;
}

bool IsReserved(std::string_view s) {
  static constexpr std::string_view kReserved[] = {
      "as",     "break",     "const",   "continue", "else", "for",  "function", "if",
      "import", "let",       "loop",    "package",  "namespace", "return", "var", "void",
      "while"};
  for (std::string_view r : kReserved) {
    if (r == s) return true;
  }
  return false;
}

class Lexer {
 public:
  explicit Lexer(std::string_view src) : src_(src) {}

  // Next returns the next token; on a lexical error, kind is kError and `error` is set.
  Token Next() {
    SkipSpace();
    Token t;
    t.offset = static_cast<int32_t>(pos_);
    if (pos_ >= src_.size()) {
      t.kind = Tok::kEof;
      return t;
    }
    const size_t start = pos_;
    const char c = src_[pos_];
    auto single = [&](Tok k, size_t n = 1) {
      pos_ += n;
      t.kind = k;
      t.text = src_.substr(start, n);
      return t;
    };
    auto peek = [&](size_t k) { return pos_ + k < src_.size() ? src_[pos_ + k] : '\0'; };
    // String and bytes literals with prefixes.
    {
      size_t p = pos_;
      // CEL's prefixes: b or B, then r or R (rb"..." is the identifier rb and a string).
      bool raw = false, bytes = false;
      if (p < src_.size() && (src_[p] == 'b' || src_[p] == 'B')) {
        bytes = true;
        ++p;
      }
      if (p < src_.size() && (src_[p] == 'r' || src_[p] == 'R')) {
        raw = true;
        ++p;
      }
      if (p < src_.size() && (src_[p] == '"' || src_[p] == '\'')) {
        pos_ = p;
        return LexString(start, raw, bytes);
      }
    }
    if (IsIdentStart(c)) {
      while (pos_ < src_.size() && (IsIdentStart(src_[pos_]) || IsDigit(src_[pos_]))) ++pos_;
      t.text = src_.substr(start, pos_ - start);
      if (t.text == "true") {
        t.kind = Tok::kTrue;
      } else if (t.text == "false") {
        t.kind = Tok::kFalse;
      } else if (t.text == "null") {
        t.kind = Tok::kNull;
      } else if (t.text == "in") {
        t.kind = Tok::kIn;
      } else {
        t.kind = Tok::kIdent;
      }
      return t;
    }
    if (IsDigit(c) || (c == '.' && IsDigit(peek(1)))) return LexNumber(start);
    switch (c) {
      case '(': return single(Tok::kLParen);
      case ')': return single(Tok::kRParen);
      case '[': return single(Tok::kLBracket);
      case ']': return single(Tok::kRBracket);
      case '{': return single(Tok::kLBrace);
      case '}': return single(Tok::kRBrace);
      case '.': return single(Tok::kDot);
      case ',': return single(Tok::kComma);
      case ':': return single(Tok::kColon);
      case '?': return single(Tok::kQuestion);
      case '+': return single(Tok::kPlus);
      case '-': return single(Tok::kMinus);
      case '*': return single(Tok::kStar);
      case '/': return single(Tok::kSlash);
      case '%': return single(Tok::kPercent);
      case '!': return peek(1) == '=' ? single(Tok::kNe, 2) : single(Tok::kBang);
      case '=':
        if (peek(1) == '=') return single(Tok::kEq, 2);
        break;
      case '<': return peek(1) == '=' ? single(Tok::kLe, 2) : single(Tok::kLt);
      case '>': return peek(1) == '=' ? single(Tok::kGe, 2) : single(Tok::kGt);
      case '&':
        if (peek(1) == '&') return single(Tok::kAnd, 2);
        break;
      case '|':
        if (peek(1) == '|') return single(Tok::kOr, 2);
        break;
      case '`': {
        ++pos_;
        // Letters, digits and _ . - / and space, at least one.
        while (pos_ < src_.size() && (IsIdentStart(src_[pos_]) || IsDigit(src_[pos_]) ||
                                      src_[pos_] == '.' || src_[pos_] == '-' ||
                                      src_[pos_] == '/' || src_[pos_] == ' ')) {
          ++pos_;
        }
        if (pos_ >= src_.size() || src_[pos_] != '`' || pos_ == start + 1) {
          return Error(start, "unterminated quoted identifier");
        }
        ++pos_;
        t.kind = Tok::kQuotedIdent;
        t.text = src_.substr(start, pos_ - start);
        t.value = std::string(src_.substr(start + 1, pos_ - start - 2));
        return t;
      }
      default:
        break;
    }
    const size_t n = std::max<size_t>(1, Utf8SequenceLength(src_, pos_));
    return Error(start, "token recognition error at: '" + std::string(src_.substr(start, n)) + "'");
  }

  const std::string& error() const { return error_; }

 private:
  void SkipSpace() {
    while (pos_ < src_.size()) {
      const char c = src_[pos_];
      if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f') {
        ++pos_;
      } else if (c == '/' && pos_ + 1 < src_.size() && src_[pos_ + 1] == '/') {
        while (pos_ < src_.size() && src_[pos_] != '\n') ++pos_;
      } else {
        break;
      }
    }
  }

  Token Error(size_t start, std::string message) {
    Token t;
    t.kind = Tok::kError;
    t.offset = static_cast<int32_t>(start);
    error_ = std::move(message);
    pos_ = src_.size();
    return t;
  }

  Token LexNumber(size_t start) {
    Token t;
    t.offset = static_cast<int32_t>(start);
    bool is_double = false;
    if (src_[pos_] == '0' && pos_ + 2 < src_.size() && src_[pos_ + 1] == 'x' &&
        IsHex(src_[pos_ + 2])) {  // only a lowercase 0x with a digit: 0X1 is 0 then X1
      pos_ += 2;
      const size_t digits = pos_;
      while (pos_ < src_.size() && IsHex(src_[pos_])) ++pos_;
      if (pos_ == digits) return Error(start, "invalid hexadecimal literal");
    } else {
      while (pos_ < src_.size() && IsDigit(src_[pos_])) ++pos_;
      if (pos_ + 1 < src_.size() && src_[pos_] == '.' && IsDigit(src_[pos_ + 1])) {
        is_double = true;
        ++pos_;
        while (pos_ < src_.size() && IsDigit(src_[pos_])) ++pos_;
      }
      if (pos_ < src_.size() && (src_[pos_] == 'e' || src_[pos_] == 'E')) {
        size_t p = pos_ + 1;
        if (p < src_.size() && (src_[p] == '+' || src_[p] == '-')) ++p;
        if (p < src_.size() && IsDigit(src_[p])) {
          is_double = true;
          pos_ = p;
          while (pos_ < src_.size() && IsDigit(src_[pos_])) ++pos_;
        }
      }
    }
    if (!is_double && pos_ < src_.size() && (src_[pos_] == 'u' || src_[pos_] == 'U')) {
      t.kind = Tok::kUint;
      t.text = src_.substr(start, pos_ - start);
      ++pos_;
    } else {
      t.kind = is_double ? Tok::kDouble : Tok::kInt;
      t.text = src_.substr(start, pos_ - start);
    }
    return t;
  }

  Token LexString(size_t start, bool raw, bool bytes) {
    Token t;
    t.offset = static_cast<int32_t>(start);
    const char q = src_[pos_];
    const bool triple = pos_ + 2 < src_.size() && src_[pos_ + 1] == q && src_[pos_ + 2] == q;
    pos_ += triple ? 3 : 1;
    std::string out;
    while (true) {
      if (pos_ >= src_.size()) return Error(start, "unterminated string literal");
      const char c = src_[pos_];
      if (triple) {
        if (c == q && pos_ + 2 < src_.size() && src_[pos_ + 1] == q && src_[pos_ + 2] == q) {
          pos_ += 3;
          break;
        }
      } else {
        if (c == q) {
          ++pos_;
          break;
        }
        if (c == '\n' || c == '\r') return Error(start, "unterminated string literal");
      }
      if (c == '\\' && !raw) {
        if (pos_ + 1 >= src_.size()) return Error(start, "unterminated string literal");
        const char e = src_[pos_ + 1];
        pos_ += 2;
        switch (e) {
          case 'a': out += '\a'; break;
          case 'b': out += '\b'; break;
          case 'f': out += '\f'; break;
          case 'n': out += '\n'; break;
          case 'r': out += '\r'; break;
          case 't': out += '\t'; break;
          case 'v': out += '\v'; break;
          case '\\': out += '\\'; break;
          case '\'': out += '\''; break;
          case '"': out += '"'; break;
          case '`': out += '`'; break;
          case '?': out += '?'; break;
          case 'x': case 'X': {
            if (pos_ + 1 >= src_.size() || !IsHex(src_[pos_]) || !IsHex(src_[pos_ + 1])) {
              return Error(pos_ - 2, "invalid escape sequence in string literal");
            }
            const int v = HexVal(src_[pos_]) * 16 + HexVal(src_[pos_ + 1]);
            pos_ += 2;
            if (bytes) {
              out += static_cast<char>(v);
            } else {
              AppendUtf8(out, static_cast<char32_t>(v));
            }
            break;
          }
          case 'u': case 'U': {
            const int n = e == 'u' ? 4 : 8;
            char32_t v = 0;
            for (int i = 0; i < n; ++i) {
              if (pos_ >= src_.size() || !IsHex(src_[pos_])) {
                return Error(start, "invalid escape sequence in string literal");
              }
              v = v * 16 + static_cast<char32_t>(HexVal(src_[pos_++]));
            }
            if (v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) {
              return Error(start, "invalid unicode code point in escape sequence");
            }
            AppendUtf8(out, v);
            break;
          }
          default:
            if (e >= '0' && e <= '3') {
              if (pos_ + 1 >= src_.size() || src_[pos_] < '0' || src_[pos_] > '7' ||
                  src_[pos_ + 1] < '0' || src_[pos_ + 1] > '7') {
                return Error(start, "invalid octal escape sequence in string literal");
              }
              const int v = (e - '0') * 64 + (src_[pos_] - '0') * 8 + (src_[pos_ + 1] - '0');
              pos_ += 2;
              if (bytes) {
                out += static_cast<char>(v);
              } else {
                AppendUtf8(out, static_cast<char32_t>(v));
              }
              break;
            }
            return Error(pos_ - 2, "invalid escape sequence in string literal");
        }
        continue;
      }
      out += c;
      ++pos_;
    }
    t.kind = bytes ? Tok::kBytes : Tok::kString;
    t.text = src_.substr(start, pos_ - start);
    t.value = std::move(out);
    return t;
  }

  std::string_view src_;
  size_t pos_ = 0;
  std::string error_;
};

class Parser {
 public:
  Parser(std::string_view src, const ParseOptions& options)
      : src_(src), options_(options), lexer_(src) {
    Advance();
  }

  ParseResult Run() {
    ParseResult result;
    ExprPtr e = ParseExpr();
    if (!failed_ && tok_.kind != Tok::kEof) {
      SyntaxError(tok_.offset, "mismatched input '" + TokText(tok_) + "' expecting <EOF>");
    }
    if (failed_) {
      // The first error is enough to reject the input; the text Kubernetes shows for a syntax
      // error (ANTLR's messages, recovery and follow-up errors) comes from a second reading.
      // With syntax errors, that reading also decides what cel-go's visitor reports on the
      // recovered tree (its recursion limit included).
      std::string antlr = CelGoSyntaxErrors(src_);
      result.errors = antlr.empty() ? std::move(errors_) : std::move(antlr);
      return result;
    }
    result.expr = std::move(e);
    result.next_id = next_id_;
    return result;
  }

 private:
  // ---- Tokens --------------------------------------------------------------
  void Advance() {
    if (tok_.kind == Tok::kError) return;
    tok_ = lexer_.Next();
    if (tok_.kind == Tok::kError) SyntaxError(tok_.offset, lexer_.error());
  }
  bool Accept(Tok k) {
    if (tok_.kind != k) return false;
    Advance();
    return true;
  }
  static std::string TokText(const Token& t) {
    if (t.kind == Tok::kEof) return "<EOF>";
    return std::string(t.text);
  }
  void Expect(Tok k, std::string_view what) {
    if (failed_) return;
    if (tok_.kind != k) {
      SyntaxError(tok_.offset, "mismatched input '" + TokText(tok_) + "' expecting " + std::string(what));
      return;
    }
    Advance();
  }

  // ---- Errors --------------------------------------------------------------
  void Error(int32_t offset, std::string_view message) {
    if (failed_) return;  // report the first error only; later ones are usually consequences
    failed_ = true;
    errors_ = FormatError(src_, offset, message);
  }
  void SyntaxError(int32_t offset, std::string_view message) {
    Error(offset, "Syntax error: " + std::string(message));
  }
  void ErrorNoLocation(const std::string& message) {
    if (failed_) return;
    failed_ = true;
    errors_ = "ERROR: <input>:-1:0: " + message;
  }
  // A node cel-go's visitor counts towards its recursion limit (it fails without a location).
  ExprPtr Counted(ExprPtr e) {
    if (!e) return e;
    if (++e->visit_depth > options_.max_recursion_depth && !failed_) {
      ErrorNoLocation("max recursion depth exceeded");
    }
    return e;
  }

  // ---- Node construction -----------------------------------------------------
  ExprPtr New(Expr::Kind kind, int32_t offset) {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->id = ++next_id_;
    e->offset = offset;
    return e;
  }
  // Seal computes the subtree height and enforces the height limit.
  ExprPtr Seal(ExprPtr e) {
    int32_t d = 0, v = 0;
    auto see = [&d, &v](const ExprPtr& c) {
      if (c) {
        d = std::max(d, c->depth);
        v = std::max(v, c->visit_depth);
      }
    };
    see(e->operand);
    for (const ExprPtr& a : e->args) see(a);
    see(e->iter_range);
    see(e->accu_init);
    see(e->loop_cond);
    see(e->loop_step);
    see(e->result);
    e->depth = d + 1;
    e->visit_depth = v;
    if (e->depth > options_.max_recursion_depth + 16) {
      Error(e->offset, "expression recursion limit exceeded: " +
                           std::to_string(options_.max_recursion_depth));
    }
    return e;
  }
  ExprPtr Const(Constant c, int32_t offset) {
    ExprPtr e = New(Expr::Kind::kConst, offset);
    e->constant = std::move(c);
    return Seal(std::move(e));
  }
  ExprPtr Ident(std::string name, int32_t offset) {
    ExprPtr e = New(Expr::Kind::kIdent, offset);
    e->name = std::move(name);
    return Seal(std::move(e));
  }
  ExprPtr Call(std::string fn, std::vector<ExprPtr> args, int32_t offset, ExprPtr target = nullptr) {
    ExprPtr e = New(Expr::Kind::kCall, offset);
    e->name = std::move(fn);
    e->args = std::move(args);
    e->operand = std::move(target);
    return Seal(std::move(e));
  }
  ExprPtr Call2(std::string fn, ExprPtr a, ExprPtr b, int32_t offset) {
    std::vector<ExprPtr> args;
    args.push_back(std::move(a));
    args.push_back(std::move(b));
    return Call(std::move(fn), std::move(args), offset);
  }
  ExprPtr Call1(std::string fn, ExprPtr a, int32_t offset) {
    std::vector<ExprPtr> args;
    args.push_back(std::move(a));
    return Call(std::move(fn), std::move(args), offset);
  }
  ExprPtr Dummy() { return Const(Constant{}, tok_.offset); }

  // Deep copy, for macros that use an argument twice (sortBy).
  ExprPtr Copy(const Expr& e) {
    ExprPtr c = New(e.kind, e.offset);
    c->constant = e.constant;
    c->name = e.name;
    c->test_only = e.test_only;
    c->optional_entries = e.optional_entries;
    c->field_names = e.field_names;
    c->iter_var = e.iter_var;
    c->iter_var2 = e.iter_var2;
    c->accu_var = e.accu_var;
    auto cp = [this](const ExprPtr& p) { return p ? Copy(*p) : nullptr; };
    c->operand = cp(e.operand);
    for (const ExprPtr& a : e.args) c->args.push_back(Copy(*a));
    c->iter_range = cp(e.iter_range);
    c->accu_init = cp(e.accu_init);
    c->loop_cond = cp(e.loop_cond);
    c->loop_step = cp(e.loop_step);
    c->result = cp(e.result);
    c->depth = e.depth;
    c->visit_depth = e.visit_depth;
    return c;
  }

  // ---- Grammar ---------------------------------------------------------------
  struct DepthGuard {
    explicit DepthGuard(Parser* p) : parser(p) { ++parser->depth_; }
    ~DepthGuard() { --parser->depth_; }
    Parser* parser;
  };

  ExprPtr ParseExpr() {
    DepthGuard guard(this);
    if (depth_ > options_.max_recursion_depth) {
      // cel-go's parse listener: nested expressions beyond the limit end the parse, reported
      // without a location.
      ErrorNoLocation("expression recursion limit exceeded: " +
                      std::to_string(options_.max_recursion_depth));
    }
    if (failed_) return Dummy();
    ExprPtr cond = ParseOr();
    if (failed_ || tok_.kind != Tok::kQuestion) return cond;
    const int32_t offset = tok_.offset;
    Advance();
    ExprPtr then = ParseOr();
    Expect(Tok::kColon, "':'");
    if (failed_) return Dummy();
    ExprPtr otherwise = ParseExpr();
    std::vector<ExprPtr> args;
    args.push_back(std::move(cond));
    args.push_back(std::move(then));
    args.push_back(std::move(otherwise));
    return Counted(Call("_?_:_", std::move(args), offset));
  }

  // Balanced tree over a chain of the same logical operator (as cel-go's balancer).
  ExprPtr Balance(const std::string& fn, std::vector<ExprPtr>& terms, std::vector<int32_t>& ops,
                  size_t lo, size_t hi) {
    if (lo == hi) return std::move(terms[lo]);
    const size_t mid = (lo + hi + 1) / 2;
    ExprPtr l = Balance(fn, terms, ops, lo, mid - 1);
    ExprPtr r = Balance(fn, terms, ops, mid, hi);
    return Call2(fn, std::move(l), std::move(r), ops[mid - 1]);
  }

  ExprPtr ParseOr() {
    std::vector<ExprPtr> terms;
    std::vector<int32_t> ops;
    terms.push_back(ParseAnd());
    while (!failed_ && tok_.kind == Tok::kOr) {
      ops.push_back(tok_.offset);
      Advance();
      terms.push_back(ParseAnd());
    }
    if (failed_) return Dummy();
    return Balance("_||_", terms, ops, 0, terms.size() - 1);
  }

  ExprPtr ParseAnd() {
    std::vector<ExprPtr> terms;
    std::vector<int32_t> ops;
    terms.push_back(ParseRelation());
    while (!failed_ && tok_.kind == Tok::kAnd) {
      ops.push_back(tok_.offset);
      Advance();
      terms.push_back(ParseRelation());
    }
    if (failed_) return Dummy();
    return Balance("_&&_", terms, ops, 0, terms.size() - 1);
  }

  ExprPtr ParseRelation() {
    ExprPtr left = ParseAdd();
    while (!failed_) {
      const char* fn = nullptr;
      switch (tok_.kind) {
        case Tok::kLt: fn = "_<_"; break;
        case Tok::kLe: fn = "_<=_"; break;
        case Tok::kGt: fn = "_>_"; break;
        case Tok::kGe: fn = "_>=_"; break;
        case Tok::kEq: fn = "_==_"; break;
        case Tok::kNe: fn = "_!=_"; break;
        case Tok::kIn: fn = "@in"; break;
        default: break;
      }
      if (fn == nullptr) break;
      const int32_t offset = tok_.offset;
      Advance();
      ExprPtr right = ParseAdd();
      left = Counted(Call2(fn, std::move(left), std::move(right), offset));
    }
    return left;
  }

  ExprPtr ParseAdd() {
    ExprPtr left = ParseMul();
    while (!failed_ && (tok_.kind == Tok::kPlus || tok_.kind == Tok::kMinus)) {
      const char* fn = tok_.kind == Tok::kPlus ? "_+_" : "_-_";
      const int32_t offset = tok_.offset;
      Advance();
      ExprPtr right = ParseMul();
      left = Counted(Call2(fn, std::move(left), std::move(right), offset));
    }
    return left;
  }

  ExprPtr ParseMul() {
    ExprPtr left = ParseUnary();
    while (!failed_ &&
           (tok_.kind == Tok::kStar || tok_.kind == Tok::kSlash || tok_.kind == Tok::kPercent)) {
      const char* fn = tok_.kind == Tok::kStar ? "_*_" : tok_.kind == Tok::kSlash ? "_/_" : "_%_";
      const int32_t offset = tok_.offset;
      Advance();
      ExprPtr right = ParseUnary();
      left = Counted(Call2(fn, std::move(left), std::move(right), offset));
    }
    return left;
  }

  // A run of ! or - applies once when its length is odd and not at all when it is even, at the
  // first operator: cel-go's visitor drops them in pairs (!!x is x, --x is x, for cost too).
  ExprPtr ParseUnary() {
    if (tok_.kind == Tok::kBang) {
      const int32_t first = tok_.offset;
      size_t n = 0;
      while (tok_.kind == Tok::kBang) {
        ++n;
        Advance();
      }
      ExprPtr e = ParseMember();
      if (n % 2 == 1 && !failed_) e = Call1("!_", std::move(e), first);
      return e;
    }
    if (tok_.kind == Tok::kMinus) {
      const int32_t first = tok_.offset;
      size_t n = 0;
      while (tok_.kind == Tok::kMinus) {
        ++n;
        Advance();
      }
      if ((tok_.kind == Tok::kInt || tok_.kind == Tok::kDouble) && n == 1) {
        // A lone minus belongs to the literal: -9223372036854775808 is an int. After two or more
        // (--1) every minus is a negation, as cel-go's grammar resolves that ambiguity.
        return ParseMemberFrom(ParseNumber(/*negative=*/true, first));
      }
      ExprPtr e = ParseMember();
      if (n % 2 == 1 && !failed_) e = Call1("-_", std::move(e), first);
      return e;
    }
    return ParseMember();
  }

  ExprPtr ParseNumber(bool negative, int32_t offset) {
    Constant c;
    const std::string_view text = tok_.text;
    const Tok kind = tok_.kind;
    Advance();
    if (kind == Tok::kDouble) {
      std::string s(text);
      if (negative) s.insert(s.begin(), '-');
      c.kind = Constant::Kind::kDouble;
      c.d = std::strtod(s.c_str(), nullptr);
      // Go's ParseFloat fails on overflow (not on underflow), and cel-go rejects the literal.
      if (std::isinf(c.d)) {
        Error(offset, "invalid double literal");
        return Dummy();
      }
      return Const(std::move(c), offset);
    }
    const bool hex = text.size() > 2 && text[0] == '0' && (text[1] == 'x' || text[1] == 'X');
    const std::string_view digits = hex ? text.substr(2) : text;
    uint64_t v = 0;
    const auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v, hex ? 16 : 10);
    const bool overflow = ec != std::errc() || ptr != digits.data() + digits.size();
    if (kind == Tok::kUint) {
      if (overflow) {
        Error(offset, "invalid uint literal");
        return Dummy();
      }
      c.kind = Constant::Kind::kUint;
      c.u = v;
      return Const(std::move(c), offset);
    }
    c.kind = Constant::Kind::kInt;
    if (overflow || (!negative && v > static_cast<uint64_t>(INT64_MAX)) ||
        (negative && v > static_cast<uint64_t>(INT64_MAX) + 1)) {
      Error(offset, "invalid int literal");
      return Dummy();
    }
    c.i = negative ? static_cast<int64_t>(0 - v) : static_cast<int64_t>(v);
    return Const(std::move(c), offset);
  }

  ExprPtr ParseMember() { return ParseMemberFrom(ParsePrimary()); }

  static bool IsQualifiedName(const Expr& e) {
    if (e.kind == Expr::Kind::kIdent) return true;
    return e.kind == Expr::Kind::kSelect && !e.test_only && e.operand && IsQualifiedName(*e.operand);
  }
  static std::string QualifiedName(const Expr& e) {
    if (e.kind == Expr::Kind::kIdent) return e.name;
    return QualifiedName(*e.operand) + "." + e.name;
  }

  ExprPtr ParseMemberFrom(ExprPtr e) {
    while (!failed_) {
      if (tok_.kind == Tok::kDot) {
        const int32_t offset = tok_.offset;
        Advance();
        const bool opt = tok_.kind == Tok::kQuestion;
        if (opt) {
          if (!options_.optionals) {
            SyntaxError(tok_.offset, "unsupported syntax '.?'");
            break;
          }
          Advance();
        }
        std::string field;
        if (tok_.kind == Tok::kIdent || tok_.kind == Tok::kQuotedIdent || tok_.kind == Tok::kIn ||
            tok_.kind == Tok::kTrue || tok_.kind == Tok::kFalse || tok_.kind == Tok::kNull) {
          field = tok_.kind == Tok::kQuotedIdent ? tok_.value : std::string(tok_.text);
          if (tok_.kind != Tok::kIdent && tok_.kind != Tok::kQuotedIdent) {
            SyntaxError(tok_.offset, "mismatched input '" + TokText(tok_) + "' expecting IDENTIFIER");
            break;
          }
        } else {
          SyntaxError(tok_.offset, "mismatched input '" + TokText(tok_) + "' expecting IDENTIFIER");
          break;
        }
        const bool quoted = tok_.kind == Tok::kQuotedIdent;
        Advance();
        if (tok_.kind == Tok::kLParen && !opt && !quoted) {
          const int32_t open = tok_.offset;  // cel-go locates a call at its '('
          Advance();
          std::vector<ExprPtr> args = ParseArgs();
          e = Counted(MakeCall(std::move(field), std::move(args), open, std::move(e)));
          continue;
        }
        if (opt) {
          Constant c;
          c.kind = Constant::Kind::kString;
          c.s = field;
          e = Counted(Call2("_?._", std::move(e), Const(std::move(c), offset), offset));
        } else {
          ExprPtr s = New(Expr::Kind::kSelect, offset);
          s->name = std::move(field);
          s->operand = std::move(e);
          e = Counted(Seal(std::move(s)));
        }
        continue;
      }
      if (tok_.kind == Tok::kLBracket) {
        const int32_t offset = tok_.offset;
        Advance();
        const bool opt = tok_.kind == Tok::kQuestion;
        if (opt) {
          if (!options_.optionals) {
            SyntaxError(tok_.offset, "unsupported syntax '[?'");
            break;
          }
          Advance();
        }
        ExprPtr index = ParseExpr();
        Expect(Tok::kRBracket, "']'");
        if (failed_) break;
        e = Counted(Call2(opt ? "_[?_]" : "_[_]", std::move(e), std::move(index), offset));
        continue;
      }
      if (tok_.kind == Tok::kLBrace && IsQualifiedName(*e)) {
        e = ParseStruct(QualifiedName(*e), tok_.offset);  // cel-go places a message at its brace
        continue;
      }
      break;
    }
    return e;
  }

  ExprPtr ParseStruct(std::string type_name, int32_t offset) {
    Advance();  // '{'
    ExprPtr s = New(Expr::Kind::kStruct, offset);
    s->name = std::move(type_name);
    const bool lone_comma = Accept(Tok::kComma);  // T{,} is T{}
    while (!failed_ && !lone_comma && tok_.kind != Tok::kRBrace) {
      const bool opt = Accept(Tok::kQuestion);
      if (tok_.kind != Tok::kIdent && tok_.kind != Tok::kQuotedIdent) {
        SyntaxError(tok_.offset, "mismatched input '" + TokText(tok_) + "' expecting IDENTIFIER");
        break;
      }
      s->field_names.push_back(tok_.kind == Tok::kQuotedIdent ? tok_.value : std::string(tok_.text));
      Advance();
      Expect(Tok::kColon, "':'");
      s->args.push_back(ParseExpr());
      s->optional_entries.push_back(opt);
      if (!Accept(Tok::kComma)) break;
    }
    Expect(Tok::kRBrace, "'}'");
    if (failed_) return Dummy();
    return Seal(std::move(s));
  }

  std::vector<ExprPtr> ParseArgs() {  // after '('
    std::vector<ExprPtr> args;
    if (Accept(Tok::kRParen)) return args;
    while (!failed_) {
      args.push_back(ParseExpr());
      if (Accept(Tok::kComma)) continue;
      Expect(Tok::kRParen, "')'");
      break;
    }
    return args;
  }

  ExprPtr ParsePrimary() {
    if (failed_) return Dummy();
    const int32_t offset = tok_.offset;
    switch (tok_.kind) {
      case Tok::kInt:
      case Tok::kUint:
      case Tok::kDouble:
        return ParseNumber(false, offset);
      case Tok::kString:
      case Tok::kBytes: {
        Constant c;
        c.kind = tok_.kind == Tok::kString ? Constant::Kind::kString : Constant::Kind::kBytes;
        c.s = std::move(tok_.value);
        Advance();
        return Const(std::move(c), offset);
      }
      case Tok::kTrue:
      case Tok::kFalse: {
        Constant c;
        c.kind = Constant::Kind::kBool;
        c.b = tok_.kind == Tok::kTrue;
        Advance();
        return Const(std::move(c), offset);
      }
      case Tok::kNull:
        Advance();
        return Const(Constant{}, offset);
      case Tok::kLParen: {
        Advance();
        ExprPtr e = ParseExpr();
        Expect(Tok::kRParen, "')'");
        return e;
      }
      case Tok::kLBracket: {
        Advance();
        ExprPtr list = New(Expr::Kind::kList, offset);
        // The grammar's optional trailing comma also follows no element at all: [,] is [].
        if (tok_.kind == Tok::kComma) {
          Advance();
          Expect(Tok::kRBracket, "']'");
          if (failed_) return Dummy();
          return Seal(std::move(list));
        }
        while (!failed_ && tok_.kind != Tok::kRBracket) {
          const bool opt = tok_.kind == Tok::kQuestion;
          if (opt) {
            if (!options_.optionals) {
              SyntaxError(tok_.offset, "unsupported syntax '?'");
              break;
            }
            Advance();
          }
          list->args.push_back(ParseExpr());
          list->optional_entries.push_back(opt);
          if (!Accept(Tok::kComma)) break;
        }
        Expect(Tok::kRBracket, "']'");
        if (failed_) return Dummy();
        return Seal(std::move(list));
      }
      case Tok::kLBrace: {
        Advance();
        ExprPtr map = New(Expr::Kind::kMap, offset);
        if (tok_.kind == Tok::kComma) {  // {,} is {}
          Advance();
          Expect(Tok::kRBrace, "'}'");
          if (failed_) return Dummy();
          return Seal(std::move(map));
        }
        while (!failed_ && tok_.kind != Tok::kRBrace) {
          const bool opt = tok_.kind == Tok::kQuestion;
          if (opt) {
            if (!options_.optionals) {
              SyntaxError(tok_.offset, "unsupported syntax '?'");
              break;
            }
            Advance();
          }
          map->args.push_back(ParseExpr());
          Expect(Tok::kColon, "':'");
          map->args.push_back(ParseExpr());
          map->optional_entries.push_back(opt);
          if (!Accept(Tok::kComma)) break;
        }
        Expect(Tok::kRBrace, "'}'");
        if (failed_) return Dummy();
        return Seal(std::move(map));
      }
      case Tok::kDot:
      case Tok::kIdent: {
        const bool root = Accept(Tok::kDot);
        if (tok_.kind != Tok::kIdent) {
          SyntaxError(tok_.offset, "mismatched input '" + TokText(tok_) + "' expecting IDENTIFIER");
          return Dummy();
        }
        std::string name(tok_.text);
        if (IsReserved(name)) {  // cel-go's visitor reports it at the name (its dot included)
          Error(offset, "reserved identifier: " + name);
          return Dummy();
        }
        // cel-go locates a leading-dot name at the name itself, after its dot.
        const int32_t name_offset = tok_.offset;
        Advance();
        if (root) name = "." + name;
        if (tok_.kind == Tok::kLParen) {
          const int32_t open = tok_.offset;  // cel-go locates a call at its '('
          Advance();
          std::vector<ExprPtr> args = ParseArgs();
          if (failed_) return Dummy();
          return MakeCall(std::move(name), std::move(args), open, nullptr);
        }
        return Ident(std::move(name), name_offset);
      }
      case Tok::kEof:
        SyntaxError(offset, "mismatched input '<EOF>' expecting {'[', '{', '(', '.', '-', '!', "
                            "'true', 'false', 'null', NUM_FLOAT, NUM_INT, NUM_UINT, STRING, BYTES, "
                            "IDENTIFIER}");
        return Dummy();
      default:
        SyntaxError(offset, "extraneous input '" + TokText(tok_) + "'");
        return Dummy();
    }
  }

  // ---- Macros ----------------------------------------------------------------
  ExprPtr MakeCall(std::string fn, std::vector<ExprPtr> args, int32_t offset, ExprPtr target) {
    if (failed_) return Dummy();
    if (options_.enable_macros) {
      if (ExprPtr m = ExpandMacro(fn, args, offset, target); m || failed_) {
        return m ? std::move(m) : Dummy();
      }
    }
    return Call(std::move(fn), std::move(args), offset, std::move(target));
  }

  // The variable of a macro; `message` is cel-go's text for that macro when it is not a name.
  bool VarName(const ExprPtr& e, std::string* out,
               std::string_view message = "argument must be a simple name") {
    if (e->kind != Expr::Kind::kIdent || e->name.empty() || e->name[0] == '.') {
      Error(e->offset, message);
      return false;
    }
    *out = e->name;
    return true;
  }

  ExprPtr Comprehension(int32_t offset, std::string iter_var, std::string iter_var2, ExprPtr range,
                        ExprPtr init, ExprPtr cond, ExprPtr step, ExprPtr result,
                        std::string accu = std::string(kAccuVar)) {
    ExprPtr c = New(Expr::Kind::kComprehension, offset);
    c->iter_var = std::move(iter_var);
    c->iter_var2 = std::move(iter_var2);
    c->accu_var = std::move(accu);
    c->iter_range = std::move(range);
    c->accu_init = std::move(init);
    c->loop_cond = std::move(cond);
    c->loop_step = std::move(step);
    c->result = std::move(result);
    return Seal(std::move(c));
  }
  ExprPtr Accu(int32_t offset) { return Ident(std::string(kAccuVar), offset); }
  ExprPtr BoolC(bool b, int32_t offset) {
    Constant c;
    c.kind = Constant::Kind::kBool;
    c.b = b;
    return Const(std::move(c), offset);
  }
  ExprPtr IntC(int64_t i, int32_t offset) {
    Constant c;
    c.kind = Constant::Kind::kInt;
    c.i = i;
    return Const(std::move(c), offset);
  }
  ExprPtr ListOf(ExprPtr e, int32_t offset) {
    ExprPtr l = New(Expr::Kind::kList, offset);
    if (e) {
      l->args.push_back(std::move(e));
      l->optional_entries.push_back(false);
    }
    return Seal(std::move(l));
  }
  ExprPtr Ternary(ExprPtr c, ExprPtr a, ExprPtr b, int32_t offset) {
    std::vector<ExprPtr> args;
    args.push_back(std::move(c));
    args.push_back(std::move(a));
    args.push_back(std::move(b));
    return Call("_?_:_", std::move(args), offset);
  }

  // Returns the expansion, or null if `fn` with these arguments is not a macro. One step per
  // macro family, as cel-go's parser dispatches them.
  ExprPtr ExpandMacro(const std::string& fn, std::vector<ExprPtr>& args, int32_t offset,
                      ExprPtr& target) {
    const size_t n = args.size();
    if (!target) return fn == "has" && n == 1 ? ExpandHas(args, offset) : nullptr;
    if (fn == "bind" && n == 3 && options_.bindings && target->kind == Expr::Kind::kIdent &&
        target->name == "cel") {
      return ExpandBind(args, offset);
    }
    if ((fn == "optMap" || fn == "optFlatMap") && n == 2 && options_.optionals) {
      return ExpandOptMap(fn, args, offset, target);
    }
    if (fn == "sortBy" && n == 2 && options_.lists_ext) return ExpandSortBy(args, offset, target);
    const bool one_var = n == 2 || (n == 3 && (fn == "map" || fn == "filter"));
    if (one_var && (fn == "all" || fn == "exists" || fn == "exists_one" || fn == "map" ||
                    fn == "filter")) {
      return ExpandOneVariable(fn, args, offset, target);
    }
    if (!options_.two_var_comprehensions) return nullptr;
    if (n == 3 && (fn == "all" || fn == "exists" || fn == "existsOne" || fn == "exists_one")) {
      return ExpandTwoVariable(fn, args, offset, target);
    }
    if ((n == 3 || n == 4) &&
        (fn == "transformList" || fn == "transformMap" || fn == "transformMapEntry")) {
      return ExpandTransform(fn, args, offset, target);
    }
    return nullptr;
  }

  // has(a.f): the select marked as a presence test.
  ExprPtr ExpandHas(std::vector<ExprPtr>& args, int32_t offset) {
    if (args[0]->kind != Expr::Kind::kSelect || args[0]->test_only) {
      Error(args[0]->offset, "invalid argument to has() macro");
      return nullptr;
    }
    args[0]->test_only = true;
    args[0]->offset = offset;  // cel-go locates the presence test at has's '('
    return std::move(args[0]);
  }

  // cel.bind(name, init, expr)
  ExprPtr ExpandBind(std::vector<ExprPtr>& args, int32_t offset) {
    std::string var;
    if (!VarName(args[0], &var, "cel.bind() variable names must be simple identifiers")) {
      return nullptr;
    }
    return Comprehension(offset, "#unused", "", ListOf(nullptr, offset), std::move(args[1]),
                         BoolC(false, offset), Ident(var, offset), std::move(args[2]), var);
  }

  // t.optMap(x, f) / t.optFlatMap(x, f)
  ExprPtr ExpandOptMap(const std::string& fn, std::vector<ExprPtr>& args, int32_t offset,
                       ExprPtr& target) {
    std::string var;
    if (!VarName(args[0], &var, fn + "() variable name must be a simple identifier")) {
      return nullptr;
    }
    // target.hasValue() ? [optional.of](cel.bind(var, target.value(), f)) : optional.none()
    ExprPtr t2 = Copy(*target);
    ExprPtr has = Call("hasValue", {}, offset, std::move(target));
    ExprPtr value = Call("value", {}, offset, std::move(t2));
    ExprPtr bound = Comprehension(offset, "#unused", "", ListOf(nullptr, offset), std::move(value),
                                  BoolC(false, offset), Ident(var, offset), std::move(args[1]), var);
    if (fn == "optMap") bound = Call1("optional.of", std::move(bound), offset);
    return Ternary(std::move(has), std::move(bound), Call("optional.none", {}, offset), offset);
  }

  // l.sortBy(x, key)
  ExprPtr ExpandSortBy(std::vector<ExprPtr>& args, int32_t offset, ExprPtr& target) {
    // As cel-go's ext.Lists: l.sortBy(x, key) ->
    //   cel.bind(@__sortBy_input__, l, @__sortBy_input__.@sortByAssociatedKeys(
    //       @__sortBy_input__.map(x, key)))
    // (l is evaluated once; the binding and its reads are priced like any cel.bind).
    // The target first, then the variable (as cel-go's map macro words it).
    std::string var;
    const Expr::Kind k = target->kind;
    if (k != Expr::Kind::kList && k != Expr::Kind::kSelect && k != Expr::Kind::kIdent &&
        k != Expr::Kind::kComprehension && k != Expr::Kind::kCall) {
      Error(target->offset,
            "sortBy can only be applied to a list, identifier, comprehension, call or select "
            "expression");
      return nullptr;
    }
    if (!VarName(args[0], &var, "argument is not an identifier")) return nullptr;
    const std::string input = "@__sortBy_input__";
    ExprPtr keys = Comprehension(
        offset, var, "", Ident(input, offset), ListOf(nullptr, offset), BoolC(true, offset),
        Call2("_+_", Accu(offset), ListOf(std::move(args[1]), offset), offset), Accu(offset));
    std::vector<ExprPtr> call_args;
    call_args.push_back(std::move(keys));
    ExprPtr sorted = Call("@sortByAssociatedKeys", std::move(call_args), offset, Ident(input, offset));
    return Comprehension(offset, "#unused", "", ListOf(nullptr, offset), std::move(target),
                         BoolC(false, offset), Ident(input, offset), std::move(sorted), input);
  }

  // all, exists, exists_one, map (2 or 3 arguments) and filter over one variable.
  ExprPtr ExpandOneVariable(const std::string& fn, std::vector<ExprPtr>& args, int32_t offset,
                            ExprPtr& target) {
    const size_t n = args.size();
    std::string v;
    if (!VarName(args[0], &v,
                 fn == "map" || fn == "filter" ? "argument is not an identifier"
                                               : "argument must be a simple name")) {
      return nullptr;
    }
    if (fn == "all") {
      return Comprehension(offset, v, "", std::move(target), BoolC(true, offset),
                           Call1("@not_strictly_false", Accu(offset), offset),
                           Call2("_&&_", Accu(offset), std::move(args[1]), offset), Accu(offset));
    }
    if (fn == "exists") {
      return Comprehension(offset, v, "", std::move(target), BoolC(false, offset),
                           Call1("@not_strictly_false", Call1("!_", Accu(offset), offset), offset),
                           Call2("_||_", Accu(offset), std::move(args[1]), offset), Accu(offset));
    }
    if (fn == "exists_one") {
      return Comprehension(
          offset, v, "", std::move(target), IntC(0, offset), BoolC(true, offset),
          Ternary(std::move(args[1]), Call2("_+_", Accu(offset), IntC(1, offset), offset),
                  Accu(offset), offset),
          Call2("_==_", Accu(offset), IntC(1, offset), offset));
    }
    if (fn == "map") {
      ExprPtr step;
      if (n == 2) {
        step = Call2("_+_", Accu(offset), ListOf(std::move(args[1]), offset), offset);
      } else {
        step = Ternary(std::move(args[1]),
                       Call2("_+_", Accu(offset), ListOf(std::move(args[2]), offset), offset),
                       Accu(offset), offset);
      }
      return Comprehension(offset, v, "", std::move(target), ListOf(nullptr, offset),
                           BoolC(true, offset), std::move(step), Accu(offset));
    }
    // filter
    ExprPtr step = Ternary(std::move(args[1]),
                           Call2("_+_", Accu(offset), ListOf(Ident(v, offset), offset), offset),
                           Accu(offset), offset);
    return Comprehension(offset, v, "", std::move(target), ListOf(nullptr, offset),
                         BoolC(true, offset), std::move(step), Accu(offset));
  }

  // all, exists, existsOne / exists_one over two variables.
  ExprPtr ExpandTwoVariable(const std::string& fn, std::vector<ExprPtr>& args, int32_t offset,
                            ExprPtr& target) {
    std::string k, v;
    if (!VarName(args[0], &k) || !VarName(args[1], &v)) return nullptr;
    if (k == v) {
      Error(args[1]->offset, "duplicate variable name '" + v + "'");
      return nullptr;
    }
    if (fn == "all") {
      return Comprehension(offset, k, v, std::move(target), BoolC(true, offset),
                           Call1("@not_strictly_false", Accu(offset), offset),
                           Call2("_&&_", Accu(offset), std::move(args[2]), offset), Accu(offset));
    }
    if (fn == "exists") {
      return Comprehension(offset, k, v, std::move(target), BoolC(false, offset),
                           Call1("@not_strictly_false", Call1("!_", Accu(offset), offset), offset),
                           Call2("_||_", Accu(offset), std::move(args[2]), offset), Accu(offset));
    }
    return Comprehension(
        offset, k, v, std::move(target), IntC(0, offset), BoolC(true, offset),
        Ternary(std::move(args[2]), Call2("_+_", Accu(offset), IntC(1, offset), offset),
                Accu(offset), offset),
        Call2("_==_", Accu(offset), IntC(1, offset), offset));
  }

  // transformList, transformMap, transformMapEntry (with an optional filter).
  ExprPtr ExpandTransform(const std::string& fn, std::vector<ExprPtr>& args, int32_t offset,
                          ExprPtr& target) {
    const bool two4 = args.size() == 4;
    std::string k, v;
    if (!VarName(args[0], &k) || !VarName(args[1], &v)) return nullptr;
    if (k == v) {
      Error(args[1]->offset, "duplicate variable name '" + v + "'");
      return nullptr;
    }
    ExprPtr filter = two4 ? std::move(args[2]) : nullptr;
    ExprPtr xform = std::move(args[two4 ? 3 : 2]);
    ExprPtr init, step;
    if (fn == "transformList") {
      init = ListOf(nullptr, offset);
      step = Call2("_+_", Accu(offset), ListOf(std::move(xform), offset), offset);
    } else {
      init = Seal(New(Expr::Kind::kMap, offset));
      std::vector<ExprPtr> a;
      a.push_back(Accu(offset));
      if (fn == "transformMap") a.push_back(Ident(k, offset));
      a.push_back(std::move(xform));
      step = Call("cel.@mapInsert", std::move(a), offset);
    }
    if (filter) step = Ternary(std::move(filter), std::move(step), Accu(offset), offset);
    return Comprehension(offset, k, v, std::move(target), std::move(init), BoolC(true, offset),
                         std::move(step), Accu(offset));
  }

  std::string_view src_;
  const ParseOptions& options_;
  Lexer lexer_;
  Token tok_;
  bool failed_ = false;
  std::string errors_;
  int depth_ = 0;
  int64_t next_id_ = 0;
};

}  // namespace

std::string FormatError(std::string_view source, int32_t offset, std::string_view message) {
  if (offset < 0) offset = 0;
  if (static_cast<size_t>(offset) > source.size()) offset = static_cast<int32_t>(source.size());
  int line = 1;
  size_t line_start = 0;
  for (size_t i = 0; i < static_cast<size_t>(offset); ++i) {
    if (source[i] == '\n') {
      ++line;
      line_start = i + 1;
    }
  }
  const std::string_view before = source.substr(line_start, static_cast<size_t>(offset) - line_start);
  const size_t column = Utf8CountCodePoints(before);  // invalid bytes count as one each
  std::string out = "ERROR: <input>:" + std::to_string(line) + ":" + std::to_string(column + 1) + ": ";
  out.append(message);
  // Source line and caret as cel-go's Error.ToDisplayString prints them: lines up to 16384 bytes,
  // tabs as spaces, a full-width dot (U+FF0E) under each multi-byte character and a full-width
  // caret (U+FF3E) when the error is at one (valid UTF-8 only; the parser rejects the rest).
  size_t line_end = source.find('\n', line_start);
  if (line_end == std::string_view::npos) line_end = source.size();
  const std::string_view text = source.substr(line_start, line_end - line_start);
  if (text.size() <= 16384 && Utf8Valid(text)) {
    out += "\n | ";
    for (char c : text) out += c == '\t' ? ' ' : c;
    out += "\n | ";
    size_t pos = 0;
    for (size_t i = 0; i < column && pos < text.size(); ++i) {
      const size_t n = std::max<size_t>(1, Utf8SequenceLength(text, pos));
      out += n > 1 ? "\xEF\xBC\x8E" : ".";
      pos += n;
    }
    out += pos < text.size() && Utf8SequenceLength(text, pos) > 1 ? "\xEF\xBC\xBE" : "^";
  }
  return out;
}

ParseResult Parse(std::string_view source, const ParseOptions& options) {
  ParseResult result;
  if (source.size() > options.max_expression_bytes) {
    result.errors = "ERROR: <input>:-1:0: expression code point size exceeds limit: size: " +
                    std::to_string(Utf8CountCodePoints(source)) +
                    ", limit " + std::to_string(options.max_expression_bytes);
    return result;
  }
  if (size_t bad = Utf8FirstInvalid(source); bad != std::string_view::npos) {
    result.errors = FormatError(source, static_cast<int32_t>(bad), "Syntax error: invalid UTF-8 in expression");
    return result;
  }
  Parser parser(source, options);
  return parser.Run();
}

}  // namespace devlet::cel::internal
