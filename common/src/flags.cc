#include "devlet/common/flags.h"

#include <cctype>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_split.h"
#include "devlet/common/status.h"

namespace devlet::flags {

std::string EnvName(std::string_view flag) {
  while (!flag.empty() && flag.front() == '-') {
    flag.remove_prefix(1);
  }
  std::string env;
  env.reserve(flag.size());
  for (const char c : flag) {
    env += c == '-' ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  }
  return env;
}

void AddLoggingFlags(CLI::App& app, log::Options& options) {
  app.add_option("-v,--v", options.verbosity, "Log verbosity (0 = least)")
      ->envname("V")
      ->capture_default_str();
  app.add_option_function<std::string>(
         "--logging-format",
         [&options](const std::string& format) {
           options.format = format == "json" ? log::Format::kJson : log::Format::kText;
         },
         "Log format: text (klog) or json")
      ->envname("LOGGING_FORMAT")
      ->check(CLI::IsMember({"text", "json"}));
}

void Parse(CLI::App& app, int argc, const char* const* argv) {
  std::vector<std::string> args;
  args.reserve(static_cast<size_t>(argc > 0 ? argc - 1 : 0));
  for (int i = argc - 1; i >= 1; --i) {  // CLI11 wants the arguments in reverse order.
    std::string arg = argv[i];
    // "-name", "-name=value" and "-v=4" become "--..."; "-v 4", "-1" and "--x" stay as they are.
    const bool single_dash_long = arg.size() > 2 && arg[0] == '-' && arg[1] != '-' &&
                                  std::isdigit(static_cast<unsigned char>(arg[1])) == 0;
    if (single_dash_long) {
      arg.insert(0, "-");
    }
    args.push_back(std::move(arg));
  }
  app.parse(args);
}

std::optional<int> ParseCommandLine(CLI::App& app, int argc, const char* const* argv) {
  log::Options log_options;
  AddLoggingFlags(app, log_options);
  try {
    Parse(app, argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  log::Configure(log_options);
  return std::nullopt;
}

absl::StatusOr<std::map<std::string, bool>> ParseFeatureGates(std::string_view text) {
  std::map<std::string, bool> gates;
  for (absl::string_view entry : absl::StrSplit(absl::string_view(text.data(), text.size()), ',',
                                                absl::SkipWhitespace())) {
    entry = absl::StripAsciiWhitespace(entry);
    const auto eq = entry.find('=');
    if (eq == absl::string_view::npos) {
      return InvalidArgument("invalid feature gate \"" + std::string(entry) +
                             "\": expected NAME=true|false");
    }
    const std::string name(absl::StripAsciiWhitespace(entry.substr(0, eq)));
    const std::string value = absl::AsciiStrToLower(absl::StripAsciiWhitespace(entry.substr(eq + 1)));
    if (name.empty()) {
      return InvalidArgument("invalid feature gate \"" + std::string(entry) + "\": empty name");
    }
    if (value == "true") {
      gates[name] = true;
    } else if (value == "false") {
      gates[name] = false;
    } else {
      return InvalidArgument("invalid value of feature gate " + name + ": \"" + value +
                             "\" (must be true or false)");
    }
  }
  return gates;
}

}  // namespace devlet::flags
