# devlet_module_enabled(<out> <path>): whether DEVLET_ONLY_MODULES lets <path> build.
function(devlet_module_enabled out path)
  if(NOT DEVLET_ONLY_MODULES OR "${path}" IN_LIST DEVLET_ONLY_MODULES)
    set(${out} TRUE PARENT_SCOPE)
  else()
    set(${out} FALSE PARENT_SCOPE)
  endif()
endfunction()

# devlet_add_children(): adds every child folder of the current one that has a CMakeLists.txt
# (used by cmd/ and integration/, where each binary or harness owns a folder).
function(devlet_add_children)
  file(GLOB _children RELATIVE ${CMAKE_CURRENT_SOURCE_DIR} ${CMAKE_CURRENT_SOURCE_DIR}/*/CMakeLists.txt)
  file(RELATIVE_PATH _self ${PROJECT_SOURCE_DIR} ${CMAKE_CURRENT_SOURCE_DIR})
  list(SORT _children)
  foreach(_child IN LISTS _children)
    get_filename_component(_dir ${_child} DIRECTORY)
    if(NOT DEVLET_ONLY_MODULES OR "${_self}/${_dir}" IN_LIST DEVLET_ONLY_MODULES
       OR "${_self}" IN_LIST DEVLET_ONLY_MODULES)
      add_subdirectory(${_dir})
    endif()
  endforeach()
endfunction()

# devlet_cc_library / devlet_cc_test / devlet_cc_binary / devlet_cc_benchmark / devlet_proto_library:
# one place that applies the warning set, sanitizers, include layout and the devlet:: alias.

set(DEVLET_WARNINGS
  -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor -Woverloaded-virtual
  -Wimplicit-fallthrough -Wno-missing-field-initializers)

function(devlet_apply_common_options target)
  target_compile_options(${target} PRIVATE ${DEVLET_WARNINGS})
  if(DEVLET_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
  devlet_apply_sanitizers(${target})
endfunction()

# Sanitizers apply to every target we compile, generated code included: mixing instrumented and
# uninstrumented code breaks TSan.
function(devlet_apply_sanitizers target)
  if(DEVLET_SANITIZE)
    list(JOIN DEVLET_SANITIZE "," _san)
    target_compile_options(${target} PRIVATE -fsanitize=${_san} -fno-omit-frame-pointer
                                             -fno-sanitize-recover=undefined)
    target_link_options(${target} PRIVATE -fsanitize=${_san})
  endif()
endfunction()

# devlet_cc_library(NAME foo SRCS ... DEPS ... PUBLIC_DEPS ... [TESTONLY] [INCLUDE_DIR dir])
# Creates devlet_foo with alias devlet::foo; public headers live in <dir>/include.
function(devlet_cc_library)
  cmake_parse_arguments(ARG "TESTONLY;HEADER_ONLY" "NAME;INCLUDE_DIR" "SRCS;DEPS;PUBLIC_DEPS" ${ARGN})
  set(_target devlet_${ARG_NAME})
  if(NOT ARG_INCLUDE_DIR)
    set(ARG_INCLUDE_DIR ${CMAKE_CURRENT_SOURCE_DIR}/include)
  endif()
  if(ARG_HEADER_ONLY)
    add_library(${_target} INTERFACE)
    target_include_directories(${_target} INTERFACE ${ARG_INCLUDE_DIR})
    target_link_libraries(${_target} INTERFACE ${ARG_PUBLIC_DEPS} ${ARG_DEPS})
  else()
    add_library(${_target} STATIC ${ARG_SRCS})
    target_include_directories(${_target} PUBLIC ${ARG_INCLUDE_DIR}
                                          PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/src)
    target_link_libraries(${_target} PUBLIC ${ARG_PUBLIC_DEPS} PRIVATE ${ARG_DEPS})
    devlet_apply_common_options(${_target})
  endif()
  add_library(devlet::${ARG_NAME} ALIAS ${_target})
endfunction()

# devlet_cc_test(NAME foo_test SRCS ... DEPS ... [LABELS unit] [ARGS ...] [DEFINES NAME="value" ...]
#                [CONCURRENCY "Suite.Test:Suite.Other*"])
# (no target without DEVLET_BUILD_TESTS: what a test needs goes in here, not in if(TARGET ...)).
# Tests are labelled 'unit' unless told otherwise; CI runs the unit label under ASan+UBSan too.
# CONCURRENCY is a gtest filter (positive patterns only) naming the tests that exercise threads:
# they get the label 'concurrency' as well, which CI runs under ThreadSanitizer, and the test
# binary joins the target 'concurrency_tests' (what that phase builds).
function(devlet_cc_test)
  if(NOT DEVLET_BUILD_TESTS)
    return()
  endif()
  cmake_parse_arguments(ARG "" "NAME;TIMEOUT;CONCURRENCY" "SRCS;DEPS;LABELS;ARGS;DEFINES" ${ARGN})
  if(NOT ARG_LABELS)
    set(ARG_LABELS unit)
  endif()
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 300)
  endif()
  add_executable(${ARG_NAME} ${ARG_SRCS})
  target_link_libraries(${ARG_NAME} PRIVATE ${ARG_DEPS} GTest::gmock GTest::gtest_main)
  target_compile_definitions(${ARG_NAME} PRIVATE ${ARG_DEFINES})
  devlet_apply_common_options(${ARG_NAME})
  if(NOT ARG_CONCURRENCY)
    gtest_discover_tests(${ARG_NAME}
      EXTRA_ARGS ${ARG_ARGS}
      WORKING_DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR}
      PROPERTIES LABELS "${ARG_LABELS}" TIMEOUT ${ARG_TIMEOUT}
      DISCOVERY_TIMEOUT 60)
    return()
  endif()
  # Two discoveries over one binary: every test is registered once. The named ones get the extra
  # label from an include file of our own, run after the discovered tests are defined (a list
  # passed through gtest_discover_tests' PROPERTIES comes out split into separate properties).
  gtest_discover_tests(${ARG_NAME}
    EXTRA_ARGS ${ARG_ARGS}
    WORKING_DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR}
    TEST_FILTER "-${ARG_CONCURRENCY}"
    PROPERTIES LABELS "${ARG_LABELS}" TIMEOUT ${ARG_TIMEOUT}
    DISCOVERY_TIMEOUT 60)
  gtest_discover_tests(${ARG_NAME}
    EXTRA_ARGS ${ARG_ARGS}
    WORKING_DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR}
    TEST_FILTER "${ARG_CONCURRENCY}"
    TEST_LIST ${ARG_NAME}_CONCURRENCY_TESTS
    PROPERTIES TIMEOUT ${ARG_TIMEOUT}
    DISCOVERY_TIMEOUT 60)
  set(_labels_file "${CMAKE_CURRENT_BINARY_DIR}/${ARG_NAME}_concurrency_labels.cmake")
  file(WRITE "${_labels_file}"
    "foreach(_test IN LISTS ${ARG_NAME}_CONCURRENCY_TESTS)\n"
    "  set_tests_properties(\"\${_test}\" PROPERTIES LABELS \"${ARG_LABELS};concurrency\")\n"
    "endforeach()\n")
  set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES "${_labels_file}")
  if(NOT TARGET concurrency_tests)
    add_custom_target(concurrency_tests)
  endif()
  add_dependencies(concurrency_tests ${ARG_NAME})
endfunction()

# devlet_cc_binary(NAME devlet-foo SRCS main.cc DEPS ...)
function(devlet_cc_binary)
  cmake_parse_arguments(ARG "" "NAME" "SRCS;DEPS" ${ARGN})
  add_executable(${ARG_NAME} ${ARG_SRCS})
  target_link_libraries(${ARG_NAME} PRIVATE ${ARG_DEPS})
  devlet_apply_common_options(${ARG_NAME})
endfunction()

# devlet_cc_benchmark(NAME foo_benchmark SRCS ... DEPS ... [DEFINES ...]): built, never run by ctest.
function(devlet_cc_benchmark)
  if(NOT DEVLET_BUILD_BENCHMARKS)
    return()
  endif()
  cmake_parse_arguments(ARG "" "NAME" "SRCS;DEPS;DEFINES" ${ARGN})
  add_executable(${ARG_NAME} ${ARG_SRCS})
  target_link_libraries(${ARG_NAME} PRIVATE ${ARG_DEPS} benchmark::benchmark)
  target_compile_definitions(${ARG_NAME} PRIVATE ${ARG_DEFINES})
  devlet_apply_common_options(${ARG_NAME})
endfunction()

# devlet_proto_library(NAME foo_proto PROTOS a.proto b.proto [GRPC] [IMPORT_DIR dir])
# One generated-code target per proto set; generated code is compiled without our warning set.
function(devlet_proto_library)
  cmake_parse_arguments(ARG "GRPC" "NAME;IMPORT_DIR" "PROTOS" ${ARGN})
  devlet_require_grpc()
  if(NOT ARG_IMPORT_DIR)
    set(ARG_IMPORT_DIR ${CMAKE_CURRENT_SOURCE_DIR})
  endif()
  set(_target devlet_${ARG_NAME})
  set(_out ${CMAKE_CURRENT_BINARY_DIR}/${ARG_NAME}_gen)
  file(MAKE_DIRECTORY ${_out})
  add_library(${_target} STATIC ${ARG_PROTOS})
  devlet_apply_sanitizers(${_target})
  target_link_libraries(${_target} PUBLIC protobuf::libprotobuf)
  target_include_directories(${_target} PUBLIC ${_out})
  protobuf_generate(TARGET ${_target} LANGUAGE cpp IMPORT_DIRS ${ARG_IMPORT_DIR}
                    PROTOC_OUT_DIR ${_out})
  if(ARG_GRPC)
    target_link_libraries(${_target} PUBLIC gRPC::grpc++)
    protobuf_generate(TARGET ${_target} LANGUAGE grpc IMPORT_DIRS ${ARG_IMPORT_DIR}
                      PROTOC_OUT_DIR ${_out}
                      GENERATE_EXTENSIONS .grpc.pb.h .grpc.pb.cc
                      PLUGIN protoc-gen-grpc=$<TARGET_FILE:gRPC::grpc_cpp_plugin>)
  endif()
  add_library(devlet::${ARG_NAME} ALIAS ${_target})
endfunction()

# devlet_go_binary(NAME peer [DIR dir] [CACHED] [LDFLAGS flags]): builds the Go program in DIR
# (default: this folder, a Go module of its own with a committed go.sum) into
# ${CMAKE_CURRENT_BINARY_DIR}/NAME. Upstream peers come from the Go module proxy; nothing upstream
# is committed. CACHED (for the harnesses that compile kube-apiserver): built once per content of
# the module (and LDFLAGS) and cached under ~/.cache/devlet by go_cached_build.sh. LDFLAGS: go
# build -ldflags (e.g. -X for component-base/version). Sets DEVLET_GO_<NAME> to the path.
find_program(DEVLET_GO go PATHS /usr/local/go/bin /usr/lib/go/bin)
function(devlet_go_binary)
  cmake_parse_arguments(ARG "CACHED" "NAME;DIR;LDFLAGS" "" ${ARGN})
  if(NOT DEVLET_GO)
    message(FATAL_ERROR "go is required for ${ARG_NAME}")
  endif()
  if(NOT ARG_DIR)
    set(ARG_DIR ${CMAKE_CURRENT_SOURCE_DIR})
  endif()
  file(GLOB_RECURSE _go_sources CONFIGURE_DEPENDS ${ARG_DIR}/*.go ${ARG_DIR}/go.mod ${ARG_DIR}/go.sum)
  set(_out ${CMAKE_CURRENT_BINARY_DIR}/${ARG_NAME})
  if(ARG_CACHED)
    set(_script ${PROJECT_SOURCE_DIR}/cmake/go_cached_build.sh)
    add_custom_command(
      OUTPUT ${_out}
      COMMAND ${CMAKE_COMMAND} -E env GO=${DEVLET_GO} "GO_LDFLAGS=${ARG_LDFLAGS}"
              sh ${_script} ${ARG_DIR} ${ARG_NAME} ${_out}
      DEPENDS ${_go_sources} ${_script}
      COMMENT "${ARG_NAME} (cached under ~/.cache/devlet)"
      VERBATIM)
  else()
    add_custom_command(
      OUTPUT ${_out}
      COMMAND ${CMAKE_COMMAND} -E env GOFLAGS=-mod=mod ${DEVLET_GO} build "-ldflags=${ARG_LDFLAGS}"
              -o ${_out} .
      WORKING_DIRECTORY ${ARG_DIR}
      DEPENDS ${_go_sources}
      COMMENT "go build ${ARG_NAME}"
      VERBATIM)
  endif()
  add_custom_target(${ARG_NAME}_go ALL DEPENDS ${_out})
  string(TOUPPER ${ARG_NAME} _upper)
  string(REPLACE "-" "_" _upper ${_upper})
  set(DEVLET_GO_${_upper} ${_out} PARENT_SCOPE)
endfunction()
