// devlet-cel: evaluate CEL expressions from the command line (a debugging aid).
//
//   devlet-cel 'size([1, 2]) * 2'              -> 4 (cost 11)
//   devlet-cel --var 'x=[1, 2]' 'x.map(v, v * 2)'
//   devlet-cel --nocheck 'y || true'
//
// Variables are given as name=<CEL expression>, evaluated first in a plain environment.
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "devlet/cel/cel.h"
#include "devlet/common/status.h"

int main(int argc, char** argv) {
  using devlet::cel::Activation;
  using devlet::cel::Environment;
  using devlet::cel::EnvironmentOptions;
  using devlet::cel::Type;
  EnvironmentOptions options;
  Activation activation;
  std::vector<std::string> exprs;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--nocheck") == 0) {
      options.type_check = false;
    } else if (std::strcmp(argv[i], "--nomacros") == 0) {
      options.enable_macros = false;
    } else if (std::strcmp(argv[i], "--homogeneous") == 0) {
      options.homogeneous_aggregate_literals = true;
    } else if (std::strcmp(argv[i], "--var") == 0 && i + 1 < argc) {
      const std::string spec = argv[++i];
      const size_t eq = spec.find('=');
      if (eq == std::string::npos) {
        std::fprintf(stderr, "--var wants name=<expression>\n");
        return 2;
      }
      auto value = Environment().Compile(spec.substr(eq + 1));
      if (!value.ok()) {
        std::fprintf(stderr, "%s\n", devlet::Message(value.status()).c_str());
        return 2;
      }
      activation.Bind(spec.substr(0, eq), value->Evaluate(Activation()).value);
      options.variables.emplace_back(spec.substr(0, eq), Type::Dyn());
    } else {
      exprs.emplace_back(argv[i]);
    }
  }
  int rc = 0;
  Environment env(options);
  for (const std::string& expr : exprs) {
    auto program = env.Compile(expr);
    if (!program.ok()) {
      std::printf("%s\n", devlet::Message(program.status()).c_str());
      rc = 1;
      continue;
    }
    auto result = program->Evaluate(activation);
    std::printf("%s (type %s, cost %llu, estimate %llu)\n", result.value.DebugString().c_str(),
                program->result_type().DebugString().c_str(),
                static_cast<unsigned long long>(result.cost),
                static_cast<unsigned long long>(program->estimated_cost().max));
  }
  return rc;
}
