// The compiled program's evaluation (ProgramImpl::Run, the per-thread scratch arena) and the
// public Environment / Program API. Planning is planner.cc's, the nodes are nodes.h's.
#include "program.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <unordered_map>

#include "ast.h"
#include "estimate.h"
#include "utf8.h"
#include "devlet/cel/dra.h"
#include "devlet/common/status.h"

namespace devlet::cel::internal {
namespace {

// Per-thread scratch arena for evaluations.
struct ThreadScratch {
  Arena arena;
  bool busy = false;
};
thread_local ThreadScratch t_scratch;

}  // namespace

ScratchArena::ScratchArena() {
  if (t_scratch.busy) {
    owned_ = std::make_unique<Arena>();
    arena_ = owned_.get();
  } else {
    t_scratch.busy = true;
    arena_ = &t_scratch.arena;
  }
}

ScratchArena::~ScratchArena() {
  if (!owned_) {
    t_scratch.arena.Reset();
    t_scratch.busy = false;
  }
}

Val ProgramImpl::Run(Ctx& ctx) const {
  const size_t nvars = var_names.size();
  ctx.vars = nvars ? ctx.arena.NewArray<Val>(nvars) : nullptr;
  ctx.var_loaded = nvars ? ctx.arena.NewArray<uint8_t>(nvars) : nullptr;
  if (nvars) std::memset(ctx.var_loaded, 0, nvars);
  ctx.slots = num_slots ? ctx.arena.NewArray<Val>(num_slots) : nullptr;
  ctx.strict_format = strict_format;
  ctx.nan_ordering_errors = nan_ordering_errors;
  ctx.go_map_keys = go_map_keys;
  ctx.go_durations = go_durations;
  Val v = root->Eval(ctx);
  switch (ctx.abort) {
    case EvalResult::Abort::kNone:
      if (require_bool && v.kind != VK::kBool && !v.is_error()) {
        // cel-go's ConvertToNative(bool): an optional converts its value (optional.of(true) is
        // a match); otherwise Kubernetes appends the conversion error.
        const Val* inner = &v;
        while (inner->kind == VK::kOptional && inner->opt != nullptr) inner = inner->opt;
        if (inner->kind == VK::kBool) return *inner;
        std::string why;
        switch (inner->kind) {
          case VK::kString: why = ": unsupported native conversion from string to 'bool'"; break;
          case VK::kList: why = ": type conversion error from list to 'bool'"; break;
          case VK::kSemver: why = ": type conversion error from 'Semver' to 'bool'"; break;
          case VK::kIP: why = ": type conversion error from 'IP' to 'bool'"; break;
          case VK::kCIDR: why = ": type conversion error from 'CIDR' to 'bool'"; break;
          case VK::kFormat: why = ": type conversion error from 'Format' to 'bool'"; break;
          case VK::kURL: why = ": type conversion error from 'URL' to 'bool'"; break;
          case VK::kDouble: why = ": type conversion error from Double to 'bool'"; break;
          case VK::kBytes: why = ": type conversion error from Bytes to 'bool'"; break;
          case VK::kUint: why = ": unsupported type conversion from 'uint' to bool"; break;
          case VK::kInt: why = ": unsupported type conversion from 'int' to bool"; break;
          case VK::kMap:
          case VK::kDevice:
          case VK::kDeviceMap:
          case VK::kDomainMap: why = ": type conversion error from map to 'bool'"; break;
          case VK::kNull: why = ": type conversion error from 'null_type' to 'bool'"; break;
          case VK::kQuantity: why = ": type conversion error from 'Quantity' to 'bool'"; break;
          case VK::kType: why = ": type conversion not supported for 'type'"; break;
          case VK::kOptional: why = ": optional.none() dereference"; break;
          case VK::kTimestamp: why = ": type conversion error from 'Timestamp' to 'bool'"; break;
          case VK::kDuration: why = ": type conversion error from 'Duration' to 'bool'"; break;
          default: break;
        }
        // The device object is a map at runtime in Kubernetes.
        const std::string type = v.kind == VK::kDevice ? "map" : std::string(TypeNameOf(v));
        return ctx.Error("CEL result of type " + type + " could not be converted to bool" + why);
      }
      return v;
    case EvalResult::Abort::kCostLimit: return ctx.Error("operation cancelled: actual cost limit exceeded");
    case EvalResult::Abort::kDeadline: return ctx.Error("operation interrupted: deadline exceeded");
    case EvalResult::Abort::kCancelled: return ctx.Error("operation interrupted: cancelled");
    case EvalResult::Abort::kInternal: return ctx.Error(ctx.panic_message);
  }
  return v;
}

}  // namespace devlet::cel::internal

namespace devlet::cel {

void Activation::Bind(std::string name, Value value) {
  for (auto& [n, v] : bindings_) {
    if (n == name) {
      v = std::move(value);
      return;
    }
  }
  bindings_.emplace_back(std::move(name), std::move(value));
}

const Value* Activation::Find(std::string_view name) const {
  for (const auto& [n, v] : bindings_) {
    if (n == name) return &v;
  }
  return nullptr;
}

Environment::Environment(EnvironmentOptions options) : options_(std::move(options)) {}

absl::StatusOr<Program> Environment::Compile(std::string_view expression) const {
  DEVLET_ASSIGN_OR_RETURN(std::shared_ptr<const internal::ProgramImpl> impl,
                          internal::CompileImpl(expression, options_));
  return Program(std::move(impl));
}

EvalResult Program::Evaluate(const Activation& activation, const EvalOptions& options) const {
  // As dra::Match: a device whose attributes Kubernetes cannot convert fails every selector.
  if (activation.device() != nullptr) {
    if (absl::Status s = activation.device()->AttributeConversionError(); !s.ok()) {
      EvalResult result;
      result.value = Value::Error(devlet::Message(s));
      return result;
    }
  }
  internal::ScratchArena scratch;
  internal::Ctx ctx(scratch.arena());
  ctx.activation = &activation;
  ctx.device = activation.device();
  if (options.cost_limit) ctx.limit = options.cost_limit;
  ctx.deadline = options.deadline;
  ctx.cancelled = options.cancelled;
  const internal::Val v = impl_->Run(ctx);
  EvalResult result;
  result.value = internal::ToValue(v);
  result.cost = ctx.abort == EvalResult::Abort::kCostLimit || ctx.abort == EvalResult::Abort::kInternal
                    ? ctx.cost_at_abort
                    : ctx.cost;
  result.abort = ctx.abort;
  return result;
}

const Type& Program::result_type() const { return impl_->result_type; }
CostEstimate Program::estimated_cost() const { return impl_->cost; }
const std::string& Program::expression() const { return impl_->expression; }

}  // namespace devlet::cel
