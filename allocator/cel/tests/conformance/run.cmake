# ctest driver for cel_conformance: finds the cel-spec data in the Go module cache
# (`go mod download -json MODULE`, which fetches it from the module proxy when missing) and runs
# the runner on it. Inputs: GO, MODULE, RUNNER, KNOWN.
execute_process(
  COMMAND ${GO} mod download -json ${MODULE}
  WORKING_DIRECTORY ${CMAKE_CURRENT_LIST_DIR}
  OUTPUT_VARIABLE _json
  ERROR_VARIABLE _err
  RESULT_VARIABLE _rc)
if(NOT _rc EQUAL 0)
  message(FATAL_ERROR "go mod download ${MODULE} failed (${_rc}): ${_err}${_json}")
endif()
string(JSON _dir ERROR_VARIABLE _jerr GET "${_json}" Dir)
if(_jerr OR NOT EXISTS "${_dir}/tests/simple/testdata")
  message(FATAL_ERROR "no tests/simple/testdata in ${MODULE} (${_jerr}): ${_json}")
endif()
execute_process(
  COMMAND ${RUNNER} --testdata ${_dir}/tests/simple/testdata --known ${KNOWN}
  RESULT_VARIABLE _rc)
if(NOT _rc EQUAL 0)
  message(FATAL_ERROR "cel_conformance reported unexpected failures (exit ${_rc})")
endif()
