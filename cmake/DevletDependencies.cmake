# Third-party dependencies, all from Debian 12 packages (scripts/install-deps.sh).
find_package(Threads REQUIRED)
find_package(absl CONFIG REQUIRED)
find_package(nlohmann_json 3.11 CONFIG REQUIRED)
find_package(yaml-cpp CONFIG REQUIRED)
find_package(CLI11 CONFIG REQUIRED)
find_package(PkgConfig REQUIRED)
pkg_check_modules(RE2 REQUIRED IMPORTED_TARGET re2)

# Heavier dependencies are looked up lazily by the modules that need them
# (devlet_require_grpc() etc.) so that a module that has not landed costs nothing.
macro(devlet_require_grpc)
  if(NOT TARGET gRPC::grpc++)
    find_package(gRPC CONFIG REQUIRED)
    find_package(Protobuf REQUIRED)
  endif()
endmacro()

if(DEVLET_BUILD_TESTS)
  find_package(GTest CONFIG REQUIRED)
  include(GoogleTest)
endif()
if(DEVLET_BUILD_BENCHMARKS)
  find_package(benchmark CONFIG REQUIRED)
endif()
