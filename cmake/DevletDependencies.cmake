# Third-party dependencies, all from Debian 12 packages (scripts/install-deps.sh).
find_package(Threads REQUIRED)
find_package(absl CONFIG REQUIRED)

# DEVLET_STATIC_GRPC links abseil, gRPC and protobuf from Debian's static archives instead of
# their shared libraries. Why: devlet-node mapped ~65 of those shared libraries, and the dynamic
# loader relocated and touched ~8.6 MB of them at start-up (libgrpc alone 4.9 MB resident) for a
# process whose idle target is 20 MB; linked statically, with --gc-sections, only the code used
# is in the binary (dra-kubelet/README.md, "Idle RSS"). All or nothing per build: the rewrite
# changes the imported targets themselves, so no binary of a build can get one of these
# libraries both as a .so and from an archive (two copies of abseil's or protobuf's globals in
# one process). Nothing else we load links them: re2, c-ares, OpenSSL, zlib stay shared.
option(DEVLET_STATIC_GRPC "Link abseil, gRPC and protobuf from their static archives" ON)

# devlet_use_static_archives(<target>...): points each imported shared library at the static
# archive beside it (libfoo.so.1.2.3 -> libfoo.a). Header-only (INTERFACE) targets are skipped.
# A missing archive is a configure error naming it, not a silent fallback to the .so.
function(devlet_use_static_archives)
  foreach(_target IN LISTS ARGN)
    get_target_property(_type ${_target} TYPE)
    if(NOT _type MATCHES "^(SHARED|UNKNOWN)_LIBRARY$")
      continue()
    endif()
    get_target_property(_configs ${_target} IMPORTED_CONFIGURATIONS)
    set(_props IMPORTED_LOCATION)
    if(_configs)
      foreach(_config IN LISTS _configs)
        string(TOUPPER "${_config}" _config)
        list(APPEND _props IMPORTED_LOCATION_${_config})
      endforeach()
    endif()
    foreach(_prop IN LISTS _props)
      get_target_property(_location ${_target} ${_prop})
      if(NOT _location OR _location MATCHES "\\.a$")
        continue()
      endif()
      string(REGEX REPLACE "\\.so(\\.[0-9]+)*$" ".a" _archive "${_location}")
      if(_archive STREQUAL _location OR NOT EXISTS "${_archive}")
        message(FATAL_ERROR "DEVLET_STATIC_GRPC: no static archive for ${_target} "
                            "(${_location}); install it or configure with -DDEVLET_STATIC_GRPC=OFF")
      endif()
      set_property(TARGET ${_target} PROPERTY ${_prop} "${_archive}")
    endforeach()
    # An archive has no soname; CMake would otherwise treat the path as a shared library's.
    foreach(_config IN LISTS _configs)
      string(TOUPPER "${_config}" _config)
      set_property(TARGET ${_target} PROPERTY IMPORTED_SONAME_${_config})
    endforeach()
    set_property(TARGET ${_target} PROPERTY IMPORTED_SONAME)
  endforeach()
endfunction()

# devlet_static_imported_targets(<regex>): the imported targets of the current directory whose
# names match <regex> go static (see DEVLET_STATIC_GRPC).
function(devlet_static_imported_targets regex)
  get_property(_imported DIRECTORY PROPERTY IMPORTED_TARGETS)
  list(FILTER _imported INCLUDE REGEX "${regex}")
  devlet_use_static_archives(${_imported})
endfunction()

if(DEVLET_STATIC_GRPC)
  devlet_static_imported_targets("^absl::")
endif()
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
    if(DEVLET_STATIC_GRPC)
      # Only the libraries: the code generators (protoc, grpc_cpp_plugin) are executables.
      devlet_static_imported_targets(
        "^(gRPC::(grpc|grpc\\+\\+|gpr|upb|address_sorting)|protobuf::libprotobuf)$")
    endif()
  endif()
endmacro()

if(DEVLET_BUILD_TESTS)
  find_package(GTest CONFIG REQUIRED)
  include(GoogleTest)
endif()
if(DEVLET_BUILD_BENCHMARKS)
  find_package(benchmark CONFIG REQUIRED)
endif()
