// Private: the CEL syntax tree after parsing and macro expansion.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace devlet::cel::internal {

struct Constant {
  enum class Kind : unsigned char { kNull, kBool, kInt, kUint, kDouble, kString, kBytes };
  Kind kind = Kind::kNull;
  bool b = false;
  int64_t i = 0;
  uint64_t u = 0;
  double d = 0;
  std::string s;  // string (UTF-8) or bytes
};

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

// Operators use cel-go's function names: _+_ _-_ _*_ _/_ _%_ -_ !_ _==_ _!=_ _<_ _<=_ _>_ _>=_
// @in _&&_ _||_ _?_:_ _[_] _[?_] _?._ (optional select; args: operand, field name constant).
struct Expr {
  enum class Kind : unsigned char { kConst, kIdent, kSelect, kCall, kList, kMap, kStruct, kComprehension };
  Kind kind = Kind::kConst;
  int64_t id = 0;
  int32_t offset = 0;  // byte offset into the source, for error positions
  int32_t depth = 1;   // height of this subtree
  // The most nested nodes on one path of this subtree that cel-go's parser visitor counts towards
  // its recursion limit (conditional, relation and arithmetic operators, select, member call,
  // index), so the parser can fail where cel-go does.
  int32_t visit_depth = 0;

  Constant constant;     // kConst
  std::string name;      // kIdent name, kSelect field, kCall function, kStruct type name
  ExprPtr operand;       // kSelect operand; kCall receiver (null for global calls)
  bool test_only = false;  // kSelect from has()
  std::vector<ExprPtr> args;  // kCall arguments; kList elements; kMap keys and values
                              // interleaved (k0, v0, k1, v1, ...); kStruct field values
  std::vector<bool> optional_entries;  // kList / kMap / kStruct: entry is optional (?x / ?k: v)
  std::vector<std::string> field_names;  // kStruct

  // kComprehension (iter_var2 empty for one-variable comprehensions).
  std::string iter_var, iter_var2, accu_var;
  ExprPtr iter_range, accu_init, loop_cond, loop_step, result;
};

// The accumulator variable name used by macro expansions.
inline constexpr std::string_view kAccuVar = "@result";

struct ParseOptions {
  bool enable_macros = true;
  bool two_var_comprehensions = true;
  bool bindings = true;   // cel.bind
  bool optionals = true;  // .?x, [?k], optMap / optFlatMap
  bool lists_ext = true;  // sortBy macro
  int max_recursion_depth = 250;
  size_t max_expression_bytes = 100 * 1024;
};

// A parsed expression, or the formatted errors ("ERROR: <input>:1:2: ..." lines).
struct ParseResult {
  ExprPtr expr;
  std::string errors;
  int64_t next_id = 0;
};

ParseResult Parse(std::string_view source, const ParseOptions& options);

// FormatError renders one cel-go style error with the source line and a caret.
std::string FormatError(std::string_view source, int32_t offset, std::string_view message);

}  // namespace devlet::cel::internal
