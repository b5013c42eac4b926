// Compile errors and bad input: positions, limits, never a crash.
#include <string>

#include "devlet/cel/cel.h"
#include "devlet/cel/dra.h"
#include "devlet/common/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace devlet::cel {
namespace {

using ::testing::Eq;
using ::testing::HasSubstr;
using ::testing::StartsWith;

std::string CompileError(std::string_view expr, EnvironmentOptions options = {}) {
  absl::StatusOr<Program> p = Environment(std::move(options)).Compile(expr);
  if (p.ok()) return "<ok>";
  EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
  return devlet::Message(p.status());
}

TEST(ParserTest, SyntaxErrorHasCelGoShape) {
  EXPECT_EQ(CompileError("1 + "),
            "ERROR: <input>:1:5: Syntax error: mismatched input '<EOF>' expecting {'[', '{', '(', '.', "
            "'-', '!', 'true', 'false', 'null', NUM_FLOAT, NUM_INT, NUM_UINT, STRING, BYTES, IDENTIFIER}\n"
            " | 1 + \n"
            " | ....^");
  EXPECT_THAT(CompileError("?!"), StartsWith("ERROR: <input>:1:1: Syntax error:"));
  EXPECT_THAT(CompileError("a.b(\n  c d)", {.type_check = false}), StartsWith("ERROR: <input>:2:5: Syntax error"));
}

TEST(ParserTest, ColumnsCountCodePoints) {
  EXPECT_THAT(CompileError("'héllo' + "), StartsWith("ERROR: <input>:1:11:"));
}

// The expected texts below are cel-go's (v0.29.2, the Kubernetes v0.37.2 environment), taken
// from integration/celdiff's oracle: ANTLR's lexer drops what it cannot read and goes on, so one
// mistake can leave several errors.
constexpr char kExpectingExpr[] =
    "expecting {'[', '{', '(', '.', '-', '!', 'true', 'false', 'null', NUM_FLOAT, NUM_INT, "
    "NUM_UINT, STRING, BYTES, IDENTIFIER}";

TEST(ParserTest, UnterminatedLiterals) {
  EXPECT_EQ(CompileError("'abc"),
            "ERROR: <input>:1:1: Syntax error: token recognition error at: ''abc'\n | 'abc\n | ^\n"
            "ERROR: <input>:1:5: Syntax error: mismatched input '<EOF>' " +
                std::string(kExpectingExpr) + "\n | 'abc\n | ....^");
  // '""' is a whole (empty) string before '"""' can open a long one.
  EXPECT_EQ(CompileError(R"("""abc"")"),
            "ERROR: <input>:1:3: Syntax error: extraneous input '\"abc\"' expecting <EOF>\n"
            " | \"\"\"abc\"\"\n | ..^\n"
            "ERROR: <input>:1:8: Syntax error: token recognition error at: '\"'\n"
            " | \"\"\"abc\"\"\n | .......^");
  // b is an identifier when no string follows it.
  EXPECT_EQ(CompileError("b'abc", {.type_check = false}),
            "ERROR: <input>:1:2: Syntax error: token recognition error at: ''abc'\n"
            " | b'abc\n | .^");
  EXPECT_THAT(CompileError("'a\nb'"),
              StartsWith("ERROR: <input>:1:1: Syntax error: token recognition error at: ''a\n'"));
  EXPECT_EQ(CompileError("`abc"),
            "ERROR: <input>:1:1: Syntax error: token recognition error at: '`abc'\n | `abc\n | ^\n"
            "ERROR: <input>:1:5: Syntax error: mismatched input '<EOF>' " +
                std::string(kExpectingExpr) + "\n | `abc\n | ....^");
}

TEST(ParserTest, BadEscapes) {
  EXPECT_EQ(CompileError(R"('\q')"),
            R"(ERROR: <input>:1:1: Syntax error: token recognition error at: ''\q')" "\n"
            R"( | '\q')" "\n | ^\n"
            R"(ERROR: <input>:1:4: Syntax error: token recognition error at: ''')" "\n"
            R"( | '\q')" "\n | ...^\n"
            "ERROR: <input>:1:5: Syntax error: mismatched input '<EOF>' " +
                std::string(kExpectingExpr) + "\n" R"( | '\q')" "\n | ....^");
  EXPECT_THAT(CompileError(R"('\x4')"),
              StartsWith(R"(ERROR: <input>:1:1: Syntax error: token recognition error at: )"
                         R"(''\x4'')"));
  EXPECT_THAT(CompileError(R"('\uD800')"), HasSubstr("invalid unicode code point"));
  // The lexer skips the 4 and reads 00 as a number: only the last quote is left over.
  EXPECT_EQ(CompileError(R"('\400')"),
            R"(ERROR: <input>:1:1: Syntax error: token recognition error at: ''\4')" "\n"
            R"( | '\400')" "\n | ^\n"
            R"(ERROR: <input>:1:6: Syntax error: token recognition error at: ''')" "\n"
            R"( | '\400')" "\n | .....^");
}

// ANTLR's messages and recovery, as cel-go reports them (texts from integration/celdiff's oracle;
// the celdiff syntax run compares thousands more).
TEST(ParserTest, SyntaxErrorsAsCelGoReportsThem) {
  const EnvironmentOptions no_check = {.type_check = false};
  // Single-token deletion at the start, then the missing operand.
  EXPECT_EQ(CompileError("?!"),
            "ERROR: <input>:1:1: Syntax error: extraneous input '?' " +
                std::string(kExpectingExpr) +
                "\n | ?!\n | ^\n"
                "ERROR: <input>:1:3: Syntax error: extraneous input '<EOF>' " +
                std::string(kExpectingExpr) + "\n | ?!\n | ..^");
  // No viable alternative after a dot; cel-go's rewrite of a keyword after a dot.
  EXPECT_EQ(CompileError("a.)", no_check),
            "ERROR: <input>:1:3: Syntax error: no viable alternative at input '.)'\n"
            " | a.)\n | ..^");
  EXPECT_EQ(CompileError(".true", no_check),
            "ERROR: <input>:1:2: Syntax error: mismatched input 'true' expecting IDENTIFIER\n"
            " | .true\n | .^");
  // Single-token insertion.
  EXPECT_EQ(CompileError("(a", no_check),
            "ERROR: <input>:1:3: Syntax error: missing ')' at '<EOF>'\n | (a\n | ..^");
  EXPECT_EQ(CompileError("{1 2}", no_check),
            "ERROR: <input>:1:4: Syntax error: missing ':' at '2'\n | {1 2}\n | ...^");
  // The lexer drops "= " (it tried "==") and the parser goes on.
  EXPECT_EQ(CompileError("a = 1", no_check),
            "ERROR: <input>:1:3: Syntax error: token recognition error at: '= '\n | a = 1\n | ..^\n"
            "ERROR: <input>:1:5: Syntax error: extraneous input '1' expecting <EOF>\n"
            " | a = 1\n | ....^");
  // Two errors at one position, in report order.
  EXPECT_EQ(CompileError("-"),
            "ERROR: <input>:1:2: Syntax error: no viable alternative at input '-'\n | -\n | .^\n"
            "ERROR: <input>:1:2: Syntax error: mismatched input '<EOF>' " +
                std::string(kExpectingExpr) + "\n | -\n | .^");
  // The visitor's errors on the recovered tree, sorted with the syntax errors.
  EXPECT_EQ(CompileError("if a", no_check),
            "ERROR: <input>:1:1: reserved identifier: if\n | if a\n | ^\n"
            "ERROR: <input>:1:4: Syntax error: extraneous input 'a' expecting <EOF>\n"
            " | if a\n | ...^");
  EXPECT_EQ(CompileError("[1].map(x [x, \"b\"]).size() == 1"),
            "ERROR: <input>:1:11: argument is not an identifier\n"
            " | [1].map(x [x, \"b\"]).size() == 1\n | ..........^\n"
            "ERROR: <input>:1:13: Syntax error: missing ']' at ','\n"
            " | [1].map(x [x, \"b\"]).size() == 1\n | ............^\n"
            "ERROR: <input>:1:18: Syntax error: extraneous input ']' expecting ')'\n"
            " | [1].map(x [x, \"b\"]).size() == 1\n | .................^");
  // The empty selector: no line, so column 0 and no snippet.
  EXPECT_EQ(CompileError(""),
            "ERROR: <input>:1:0: Syntax error: mismatched input '<EOF>' " +
                std::string(kExpectingExpr));
}

TEST(ParserTest, HugeIntegerLiterals) {
  EXPECT_THAT(CompileError("9223372036854775808"), HasSubstr("invalid int literal"));
  EXPECT_THAT(CompileError("-9223372036854775809"), HasSubstr("invalid int literal"));
  EXPECT_THAT(CompileError("18446744073709551616u"), HasSubstr("invalid uint literal"));
  EXPECT_THAT(CompileError("99999999999999999999999999999999999999"), HasSubstr("invalid int literal"));
  EXPECT_EQ(CompileError("-9223372036854775808 < 0"), "<ok>");
  // Go's ParseFloat fails on overflow (cel-go: invalid double literal), not on underflow.
  EXPECT_EQ(CompileError("1e999 > 0.0"),
            "ERROR: <input>:1:1: invalid double literal\n | 1e999 > 0.0\n | ^");
  EXPECT_EQ(CompileError("1e-999 == 0.0"), "<ok>");
}

TEST(ParserTest, InvalidUtf8) {
  EXPECT_THAT(CompileError(std::string("'a\xff'")), HasSubstr("invalid UTF-8"));
  EXPECT_THAT(CompileError(std::string("\xc3")), HasSubstr("invalid UTF-8"));
  EXPECT_THAT(CompileError(std::string("x\xed\xa0\x80")), HasSubstr("invalid UTF-8"));  // surrogate
}

TEST(ParserTest, ReservedWordsAndUnknownTokens) {
  EXPECT_THAT(CompileError("if"), HasSubstr("reserved identifier: if"));
  EXPECT_THAT(CompileError("1 # 2"), HasSubstr("token recognition error at: '#'"));
  EXPECT_THAT(CompileError("a = b"), HasSubstr("token recognition error"));
  EXPECT_THAT(CompileError("1 2"), HasSubstr("expecting <EOF>"));
}

TEST(ParserTest, DeepNestingIsBoundedNotACrash) {
  for (std::string open : {"(", "[", "{1:", "f("}) {
    std::string expr;
    for (int i = 0; i < 30000; ++i) expr += open;
    expr += "1";
    EXPECT_THAT(CompileError(expr), HasSubstr("recursion limit exceeded")) << open;
  }
  std::string nested = "1";
  for (int i = 0; i < 5000; ++i) nested = "[" + nested + "]";
  EXPECT_THAT(CompileError(nested), HasSubstr("recursion limit exceeded"));
  // Runs of ! and - are loops in cel-go's grammar, not nesting, and cancel in pairs.
  EXPECT_EQ(CompileError(std::string(30000, '!') + "true"), "<ok>");
  EXPECT_EQ(CompileError(std::string(30001, '-') + "1 == -1"), "<ok>");
  // Within the limit it works.
  std::string ok = "1";
  for (int i = 0; i < 100; ++i) ok = "(" + ok + ")";
  EXPECT_EQ(CompileError(ok + " == 1"), "<ok>");
}

TEST(ParserTest, LongOperatorChainsAreBoundedOrBalanced) {
  std::string sum = "1";
  for (int i = 0; i < 20000; ++i) sum += " + 1";
  // cel-go's visitor limit: 250 nested operators, selects, calls or indexes; no location.
  EXPECT_EQ(CompileError(sum), "ERROR: <input>:-1:0: max recursion depth exceeded");
  std::string sum250 = "1";
  for (int i = 0; i < 250; ++i) sum250 += " + 1";
  EXPECT_EQ(CompileError(sum250 + " > 0"), "ERROR: <input>:-1:0: max recursion depth exceeded");
  EXPECT_EQ(CompileError(sum250), "<ok>");
  // && and || chains are balanced, so long conjunctions compile and evaluate.
  std::string conj = "true";
  for (int i = 0; i < 5000; ++i) conj += " && true";
  absl::StatusOr<Program> p = Environment().Compile(conj);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_TRUE(p->Evaluate(Activation()).value.bool_value());
}

TEST(ParserTest, HugeExpressionIsRejected) {
  std::string big(200 * 1024, ' ');
  big += "1";
  EXPECT_THAT(CompileError(big), HasSubstr("exceeds limit"));
}

TEST(ParserTest, MacroErrors) {
  EXPECT_EQ(CompileError("[1].map(1, 2)"),
            "ERROR: <input>:1:9: argument is not an identifier\n | [1].map(1, 2)\n | ........^");
  EXPECT_THAT(CompileError("[1].all(1, true)"), HasSubstr("argument must be a simple name"));
  EXPECT_THAT(CompileError("has(1)"), HasSubstr("invalid argument to has() macro"));
  EXPECT_THAT(CompileError("[1].all(i, i, true)"), HasSubstr("duplicate variable name"));
}

TEST(ParserTest, CommentsAndWhitespace) {
  absl::StatusOr<Program> p = Environment().Compile("1 + // one\n\t2 // two\r\n == 3");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_TRUE(p->Evaluate(Activation()).value.bool_value());
}

TEST(ParserTest, DraCompileErrorsCarryKubernetesPrefix) {
  absl::StatusOr<Program> p = dra::CompileSelector("device.driver");
  ASSERT_FALSE(p.ok());
  EXPECT_THAT(devlet::Message(p.status()),
              Eq("must evaluate to bool or the unknown type, not string"));
  p = dra::CompileSelector("device.nope == 1");
  ASSERT_FALSE(p.ok());
  EXPECT_THAT(devlet::Message(p.status()), HasSubstr("undefined field 'nope'"));
  p = dra::CompileSelector("foo == 1");
  ASSERT_FALSE(p.ok());
  EXPECT_THAT(devlet::Message(p.status()), HasSubstr("undeclared reference to 'foo' (in container '')"));
}

}  // namespace
}  // namespace devlet::cel
