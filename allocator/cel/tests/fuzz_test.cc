// Robustness: random bytes and random token soup never crash, hang or blow up memory; whatever
// compiles evaluates within the cost limit. Deterministic seeds, so failures reproduce.
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "devlet/cel/cel.h"
#include "devlet/cel/dra.h"
#include "devlet/common/status.h"
#include "gtest/gtest.h"

namespace devlet::cel {
namespace {

void CompileAndRun(const std::string& expr, const dra::SimpleDevice& device) {
  absl::StatusOr<Program> p = dra::CompileSelector(expr);
  if (!p.ok()) {
    EXPECT_FALSE(p.status().message().empty()) << expr;
    return;
  }
  dra::MatchOptions options;
  options.cost_limit = 100000;
  (void)dra::Match(*p, device, options);
  EnvironmentOptions env_options;
  env_options.type_check = false;
  absl::StatusOr<Program> q = Environment(env_options).Compile(expr);
  if (q.ok()) {
    EvalOptions eval_options;
    eval_options.cost_limit = 100000;
    (void)q->Evaluate(Activation(), eval_options);
  }
}

TEST(FuzzTest, RandomBytes) {
  dra::SimpleDevice device("dra.example.com");
  device.SetString("model", "a100");
  std::mt19937 rng(1);
  for (int i = 0; i < 3000; ++i) {
    std::string s(rng() % 40, ' ');
    for (char& c : s) c = static_cast<char>(rng() % 256);
    CompileAndRun(s, device);
  }
}

TEST(FuzzTest, RandomTokens) {
  static const std::vector<std::string> kTokens = {
      "device", ".", "attributes", "capacity", "driver", "[", "]", "(", ")", "{", "}", "\"dra.example.com\"",
      "model", "==", "!=", "<", ">=", "&&", "||", "!", "-", "+", "*", "/", "%", "?", ":", ",", "1", "0",
      "-9223372036854775808", "2u", "1.5", "'a'", "b'x'", "r'\\d'", "true", "null", "in", "x", "k", "v",
      "all", "exists", "exists_one", "map", "filter", "has", "size", "matches", "'['", "quantity",
      "semver", "'1Gi'", "'1.0.0'", "cel", "bind", "optional", "of", "none", "orValue", ".?", "[?",
      "transformMap", "lists", "range", "sort", "format", "split", "join", "includes", "dyn", "type",
      "int", "string", "isGreaterThan", "add", "sign", "\"\"\"", "`", "#", "\\", "\xff"};
  dra::SimpleDevice device("dra.example.com");
  device.SetString("model", "a100");
  device.SetInts("ints", {1, 2, 3});
  ASSERT_TRUE(device.SetCapacity("memory", "1Gi").ok());
  std::mt19937 rng(2);
  for (int i = 0; i < 6000; ++i) {
    std::string s;
    const int n = 1 + static_cast<int>(rng() % 30);
    for (int t = 0; t < n; ++t) {
      s += kTokens[rng() % kTokens.size()];
      if (rng() % 3 == 0) s += ' ';
    }
    CompileAndRun(s, device);
  }
}

TEST(FuzzTest, HostileButValidExpressions) {
  dra::SimpleDevice device("dra.example.com");
  // Each is bounded by the cost limit or a runtime error, never by the machine.
  for (const char* expr : {
           "lists.range(1000000).map(x, lists.range(1000000)).size() > 0",
           "lists.range(100000).map(x, string(x)).join('').size() > 0",
           "[1,2,3,4,5,6,7,8,9,10].map(a, [1,2,3,4,5,6,7,8,9,10].map(b, [1,2,3,4,5,6,7,8,9,10].map(c, "
           "[1,2,3,4,5,6,7,8,9,10].map(d, [1,2,3,4,5,6,7,8,9,10])))).size() > 0",
           "'a'.replace('', 'aaaaaaaaaa').replace('', 'aaaaaaaaaa').replace('', 'aaaaaaaaaa').size() > 0",
           "'%s'.format([lists.range(10000)]).size() > 0",
           "lists.range(2000).transformMap(i, v, v * 2).size() == 2000",
       }) {
    absl::StatusOr<Program> p = dra::CompileSelector(expr);
    ASSERT_TRUE(p.ok()) << expr << ": " << p.status();
    (void)dra::Match(*p, device);
  }
}

// The format library's validators (and Go net/url parsing behind `uri`) on arbitrary attribute
// strings, invalid UTF-8 included: every format answers none or a non-empty list of messages.
TEST(FuzzTest, FormatValidatorsOnRandomStrings) {
  const char* kFormats[] = {"dns1123Label", "dns1123Subdomain", "dns1035Label", "qualifiedName",
                            "dns1123LabelPrefix", "dns1123SubdomainPrefix", "dns1035LabelPrefix",
                            "labelValue", "uri", "uuid", "byte", "date", "datetime"};
  const std::string kAlphabet = "aZ09-_./:@?#[]%25+=tTzZ \\x80\xc3\xa9";
  std::mt19937 rng(7);
  for (const char* format : kFormats) {
    absl::StatusOr<Program> p = dra::CompileSelector(
        std::string("format.") + format +
        "().validate(device.attributes[\"dra.example.com\"].s).orValue([\"ok\"]).size() > 0");
    ASSERT_TRUE(p.ok()) << p.status();
    for (int i = 0; i < 2000; ++i) {
      std::string s(rng() % 24, ' ');
      for (char& c : s) c = kAlphabet[rng() % kAlphabet.size()];
      dra::SimpleDevice device("dra.example.com");
      device.SetString("s", s);
      absl::StatusOr<bool> matched = dra::Match(*p, device);
      ASSERT_TRUE(matched.ok()) << format << " " << s << ": " << matched.status();
      EXPECT_TRUE(*matched) << format << " " << s;
    }
  }
}

// The URL library on arbitrary attribute strings, invalid UTF-8 included: a string isURL accepts
// converts (unless url.Parse rejects its fragment or authority), and the members hold Go's
// invariants.
TEST(FuzzTest, UrlLibraryOnRandomStrings) {
  absl::StatusOr<Program> p = dra::CompileSelector(
      "cel.bind(s, device.attributes[\"dra.example.com\"].s, !isURL(s) || "
      "cel.bind(u, url(s), u == u && u.getHostname().size() <= u.getHost().size() && "
      "u.getPort().size() < u.getHost().size() + 1 && u.getQuery().size() >= 0 && "
      "u.getScheme().lowerAscii() == u.getScheme() && u.getEscapedPath().size() >= 0))");
  ASSERT_TRUE(p.ok()) << p.status();
  const std::string kAlphabet = "aZ09-_./:@?#[]%25+=&; *\\x80\xc3\xa9";
  std::mt19937 rng(11);
  for (int i = 0; i < 20000; ++i) {
    std::string s(rng() % 24, ' ');
    for (char& c : s) c = kAlphabet[rng() % kAlphabet.size()];
    if (rng() % 2 == 0) s = (rng() % 2 == 0 ? "http://" : "/") + s;
    dra::SimpleDevice device("dra.example.com");
    device.SetString("s", s);
    absl::StatusOr<bool> matched = dra::Match(*p, device);
    if (!matched.ok()) {
      // Only where url.Parse reads more than ParseRequestURI did: a fragment, or an authority
      // after "//" (ParseRequestURI takes "//x" for a path).
      EXPECT_TRUE(s.find('#') != std::string::npos || s.rfind("//", 0) == 0)
          << s << ": " << matched.status();
      EXPECT_NE(matched.status().ToString().find("URL parse error"), std::string::npos) << s;
      continue;
    }
    EXPECT_TRUE(*matched) << s;
  }
}


// ---- Bad and hostile selectors: a clear error, never a crash or an exhausted machine. Each runs
// in a child process whose address space is capped (1 GiB), so unbounded memory use shows up as
// a failed test, not as an out-of-memory kill of the whole run. Covered: deep nesting, enormous
// expressions, invalid UTF-8, unterminated literals, huge integer literals, RE2-rejected
// regexes, evaluations stopped by the cost limit (lists, strings, macros, format, regex).

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kSanitized = true;  // ASan reserves terabytes of address space up front
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif
#else
constexpr bool kSanitized = false;
#endif

constexpr rlim_t kAddressSpaceLimit = rlim_t{1} << 30;

// Runs `body` in a forked child with the address-space limit; `body` returns "" on success or
// what went wrong. A crash, an exception (std::bad_alloc at the cap) or a failure is reported.
::testing::AssertionResult RunBounded(const std::string& what,
                                      const std::function<std::string()>& body) {
  int fds[2];
  if (pipe(fds) != 0) return ::testing::AssertionFailure() << "pipe: " << std::strerror(errno);
  std::fflush(nullptr);
  const pid_t pid = fork();
  if (pid < 0) return ::testing::AssertionFailure() << "fork: " << std::strerror(errno);
  if (pid == 0) {
    close(fds[0]);
    if (!kSanitized) {
      rlimit limit{kAddressSpaceLimit, kAddressSpaceLimit};
      setrlimit(RLIMIT_AS, &limit);
    }
    // Nothing may unwind into gtest here: the child would run the rest of the test program.
    std::string problem;
    try {
      problem = body();
    } catch (const std::exception& e) {
      problem = std::string("exception: ") + e.what();
    } catch (...) {
      problem = "unknown exception";
    }
    if (!problem.empty()) (void)!write(fds[1], problem.data(), problem.size());
    _exit(problem.empty() ? 0 : 1);
  }
  close(fds[1]);
  std::string problem;
  char buf[512];
  for (ssize_t n; (n = read(fds[0], buf, sizeof(buf))) > 0;) problem.append(buf, static_cast<size_t>(n));
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (WIFSIGNALED(status)) {
    return ::testing::AssertionFailure() << what << ": the child died of signal " << WTERMSIG(status)
                                         << " (out of memory under a 1 GiB limit, or a crash)";
  }
  if (WEXITSTATUS(status) != 0) return ::testing::AssertionFailure() << what << ": " << problem;
  return ::testing::AssertionSuccess();
}

// The selector must fail to compile with a message containing `want`.
std::string CompileFails(const std::string& expr, const std::string& want) {
  absl::StatusOr<Program> p = dra::CompileSelector(expr);
  if (p.ok()) return "compiled, want an error containing \"" + want + "\"";
  const std::string message = Message(p.status());
  if (message.find(want) == std::string::npos) return "error \"" + message + "\" lacks \"" + want + "\"";
  return "";
}

// The selector must compile and its evaluation fail with a message containing `want`.
std::string EvaluationFails(const std::string& expr, const std::string& want) {
  absl::StatusOr<Program> p = dra::CompileSelector(expr);
  if (!p.ok()) return "does not compile: " + Message(p.status());
  dra::SimpleDevice device("dra.example.com");
  device.SetString("model", std::string(60, 'a'));
  absl::StatusOr<bool> match = dra::Match(*p, device);
  if (match.ok()) return std::string("evaluated to ") + (*match ? "true" : "false");
  const std::string message = Message(match.status());
  if (message.find(want) == std::string::npos) return "error \"" + message + "\" lacks \"" + want + "\"";
  return "";
}

std::string Repeat(const std::string& s, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out += s;
  return out;
}

// The cap is real: a child that tries to hold 2 GiB fails.
TEST(BadInputTest, TheMemoryCapCatchesUnboundedUse) {
  if (kSanitized) GTEST_SKIP() << "no address-space cap under sanitizers";
  EXPECT_FALSE(RunBounded("2 GiB", [] {
    std::string big(size_t{2} << 30, 'x');
    return big[12345] == 'x' ? std::string() : std::string("?");
  }));
}

// The API server rejects a selector whose estimated cost exceeds 1,000,000; the same selector
// stopped by the runtime limit when evaluated anyway (the case above) must be estimated over it.
TEST(BadInputTest, HostileSelectorIsEstimatedOverTheApiServerLimit) {
  absl::StatusOr<Program> p = dra::CompileSelector(
      "lists.range(100).all(a, lists.range(100).all(b, lists.range(100).all(c, "
      "!device.driver.matches(string(a + b + c) + 'x'))))");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_GT(p->estimated_cost().max, 1000000u);
}

TEST(BadInputTest, CompileTimeRejectionsAreClearAndBounded) {
  struct Case {
    std::string name, expr, want;
  };
  const Case cases[] = {
      {"deep parentheses", Repeat("(", 30000) + "1" + Repeat(")", 30000), "recursion limit exceeded"},
      {"deep lists", Repeat("[", 30000) + "1" + Repeat("]", 30000), "recursion limit exceeded"},
      // cel-go's parser visitor limit (ANTLR's for nesting above): "max recursion depth exceeded".
      {"deep member calls", "device.driver" + Repeat(".size()", 10000) + " == 1", "max recursion depth exceeded"},
      {"long sum", "1" + Repeat(" + 1", 20000) + " == 1", "max recursion depth exceeded"},
      {"enormous expression", "device.driver == '" + std::string(10 << 20, 'a') + "'", "exceeds limit"},
      {"invalid UTF-8", "device.driver == '\xff\xfe'", "invalid UTF-8"},
      {"invalid UTF-8 outside a literal", "device.driver\xc3 == 'a'", "invalid UTF-8"},
      {"unterminated string", "device.driver == \"a100", "Syntax error"},
      {"unterminated raw string", "device.driver == r'a100", "Syntax error"},
      {"unterminated triple-quoted string", "device.driver == '''a100", "Syntax error"},
      {"unterminated bytes", "device.driver == string(b\"a100)", "Syntax error"},
      {"huge int literal", "device.driver.size() == 99999999999999999999999999999999", "invalid int literal"},
      {"huge uint literal", "uint(device.driver.size()) == 18446744073709551616u", "invalid uint literal"},
      {"huge hex literal", "device.driver.size() == 0x1ffffffffffffffff", "invalid int literal"},
      {"RE2: unbalanced", "device.driver.matches('a(b')", "invalid matches argument"},
      {"RE2: unknown class", "device.driver.matches('\\\\p{Foo}')", "invalid matches argument"},
      {"RE2: backreference", "device.driver.matches('(a)\\\\1')", "invalid matches argument"},
      {"RE2: repetition over 1000", "device.driver.matches('a{1001}')", "invalid matches argument"},
      {"RE2: program too large", "device.driver.matches('((a{100}){100}){100}')", "invalid matches argument"},
  };
  for (const Case& c : cases) {
    EXPECT_TRUE(RunBounded(c.name, [&] { return CompileFails(c.expr, c.want); }));
  }
}

TEST(BadInputTest, RuntimeCostLimitStopsHostileEvaluations) {
  struct Case {
    std::string name, expr, want;
  };
  const Case cases[] = {
      {"nested ranges", "lists.range(1000000).map(x, lists.range(1000000)).size() > 0", "cost limit"},
      {"string doubling",
       "cel.bind(s, device.attributes['dra.example.com'].model, "
       "lists.range(60).all(i, (s + s + s + s).size() > 0))",
       ""},
      {"string growth through replace",
       "device.attributes['dra.example.com'].model.replace('a', 'aaaaaaaaaa').replace('a', "
       "'aaaaaaaaaa').replace('a', 'aaaaaaaaaa').replace('a', 'aaaaaaaaaa').replace('a', "
       "'aaaaaaaaaa').replace('a', 'aaaaaaaaaa').size() > 0",
       "cost limit"},
      {"nested macros",
       "[1,2,3,4,5,6,7,8,9,10].map(a, [1,2,3,4,5,6,7,8,9,10].map(b, [1,2,3,4,5,6,7,8,9,10].map(c, "
       "[1,2,3,4,5,6,7,8,9,10].map(d, [1,2,3,4,5,6,7,8,9,10].map(e, [1,2,3,4,5,6,7,8,9,10]))))).size() > 0",
       ""},
      {"estimated over the API server's limit",
       "lists.range(100).all(a, lists.range(100).all(b, lists.range(100).all(c, "
       "!device.driver.matches(string(a + b + c) + 'x'))))",
       "cost limit"},
      {"format of a large list", "'%s'.format([lists.range(1000000)]).size() > 0", "cost limit"},
      {"regex over a long built string",
       "lists.range(100000).map(i, device.attributes['dra.example.com'].model).join('')"
       ".matches('(a|aa)*b')",
       "cost limit"},
  };
  for (const Case& c : cases) {
    if (c.want.empty()) {
      // Bounded by its own size: it must simply finish (true) under the memory cap.
      EXPECT_TRUE(RunBounded(c.name, [&] {
        absl::StatusOr<Program> p = dra::CompileSelector(c.expr);
        if (!p.ok()) return "does not compile: " + Message(p.status());
        dra::SimpleDevice device("dra.example.com");
        device.SetString("model", std::string(60, 'a'));
        absl::StatusOr<bool> match = dra::Match(*p, device);
        return match.ok() ? std::string() : "failed: " + Message(match.status());
      }));
      continue;
    }
    EXPECT_TRUE(RunBounded(c.name, [&] { return EvaluationFails(c.expr, c.want); }));
  }
}

}  // namespace
}  // namespace devlet::cel
