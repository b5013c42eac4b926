// Private: the compiled program.
#pragma once

#include <memory>
#include <string_view>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "devlet/cel/cel.h"
#include "eval.h"

namespace devlet::cel::internal {

struct ProgramImpl {
  std::string expression;
  Type result_type;
  CostEstimate cost;
  NodePtr root;
  // External variables referenced by the program (index = VarNode index).
  std::vector<std::string> var_names;
  uint32_t num_slots = 0;
  bool require_bool = false;
  bool strict_format = false;
  bool nan_ordering_errors = false;
  bool go_map_keys = false;
  bool go_durations = false;
  // Storage for folded constants; read-only after compilation.
  std::unique_ptr<Arena> constants = std::make_unique<Arena>();
  // Regexes and other shared compile-time objects kept alive with the program.
  std::vector<std::shared_ptr<const void>> keep_alive;

  // Evaluates into `ctx` (which owns the arena); the result may point into the arena.
  Val Run(Ctx& ctx) const;
};

// Parses, checks and plans `expression` (planner.cc); errors in cel-go's (or, with
// kubernetes_messages, Kubernetes') words.
absl::StatusOr<std::shared_ptr<const ProgramImpl>> CompileImpl(std::string_view expression,
                                                              const EnvironmentOptions& options);

// ScratchArena lends the calling thread's reusable evaluation arena (or a fresh one when the
// thread is already evaluating) and resets it when destroyed.
class ScratchArena {
 public:
  ScratchArena();
  ~ScratchArena();
  ScratchArena(const ScratchArena&) = delete;
  ScratchArena& operator=(const ScratchArena&) = delete;
  Arena& arena() { return *arena_; }

 private:
  Arena* arena_;
  std::unique_ptr<Arena> owned_;
};

}  // namespace devlet::cel::internal
