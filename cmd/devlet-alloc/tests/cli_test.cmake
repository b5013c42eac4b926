# Runs devlet-alloc on the example cluster and checks exit codes and output (DESIGN.md §5).
# Invoked by ctest: cmake -DALLOC=<binary> -DEXAMPLES=<examples dir> -P cli_test.cmake
set(C ${EXAMPLES}/cluster.yaml)
set(failures 0)

# expect(<name> <exit code> <stdout regex> <stderr regex> [INPUT file] ARGS ...)
function(expect name code out_re err_re)
  cmake_parse_arguments(E "" "INPUT" "ARGS" ${ARGN})
  if(E_INPUT)
    execute_process(COMMAND ${ALLOC} ${E_ARGS} INPUT_FILE ${E_INPUT} TIMEOUT 30
                    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  else()
    execute_process(COMMAND ${ALLOC} ${E_ARGS} TIMEOUT 30
                    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  endif()
  set(ok TRUE)
  if(NOT rc STREQUAL "${code}")
    set(ok FALSE)
    message(SEND_ERROR "${name}: exit ${rc}, want ${code}")
  endif()
  if(NOT out MATCHES "${out_re}")
    set(ok FALSE)
    message(SEND_ERROR "${name}: stdout does not match '${out_re}'")
  endif()
  if(NOT err MATCHES "${err_re}")
    set(ok FALSE)
    message(SEND_ERROR "${name}: stderr does not match '${err_re}'")
  endif()
  if(ok)
    message(STATUS "ok   ${name}")
  else()
    message(STATUS "FAIL ${name}\n--- stdout\n${out}\n--- stderr\n${err}")
  endif()
endfunction()

# Allocated: a JSON List of the claims with status.allocation.
expect(one-gpu 0 "\"kind\": \"List\".*\"allocation\".*\"pool\": \"node-a\",[ \n]*\"device\": \"gpu-0\"" ""
       ARGS -f ${C} -f ${EXAMPLES}/claims/one-gpu.yaml --node node-a)
expect(class-config 0 "\"source\": \"FromClass\".*TimeSlicing" ""
       ARGS -f ${C} -f ${EXAMPLES}/claims/one-gpu.yaml --node node-a)
expect(taint-rule-skips-gpu-0 0 "\"device\": \"gpu-1\"" ""
       ARGS -f ${C} -f ${EXAMPLES}/claims/one-gpu.yaml --node node-b)
expect(allocated-claims-count 0 "\"device\": \"gpu-3\"" ""
       ARGS -f ${C} -f ${EXAMPLES}/claims/one-gpu.yaml --node node-c)
expect(numa 0 "\"device\": \"gpu-2\".*\"device\": \"gpu-3\"" ""
       ARGS -f ${C} -f ${EXAMPLES}/claims/two-gpus-same-numa.yaml --node node-b)
expect(gpu-nic 0 "\"device\": \"gpu-2\".*\"device\": \"nic-1\"" ""
       ARGS -f ${C} -f ${EXAMPLES}/claims/gpu-and-nic.yaml --node node-b)
expect(prioritized-h100 0 "\"request\": \"gpu/h100\"" ""
       ARGS -f ${C} -f ${EXAMPLES}/claims/h100-or-any.yaml --node node-b)
expect(prioritized-fallback 0 "\"request\": \"gpu/any\"" ""
       ARGS -f ${C} -f ${EXAMPLES}/claims/h100-or-any.yaml --node node-a)
# A Pod's extended resources (DRAExtendedResource) become one synthesized claim.
expect(extended-resource-pod 0 "\"name\": \"trainer-extended-resources\".*\"request\": \"container-0-request-0\".*\"device\": \"gpu-1\"" ""
       ARGS -f ${C} -f ${EXAMPLES}/claims/extended-resource-pod.yaml --node node-a)
expect(extended-resource-pod-all-nodes 0 "node-a +yes +container-0-request-0=gpu.example.com/node-a/gpu-0, container-0-request-0=gpu.example.com/node-a/gpu-1" ""
       ARGS -f ${C} -f ${EXAMPLES}/claims/extended-resource-pod.yaml --all-nodes)
expect(extended-resource-gate-off 0 "\"items\": \\[\\]" ""
       ARGS -f ${C} -f ${EXAMPLES}/claims/extended-resource-pod.yaml --node node-a
            --feature-gates DRAExtendedResource=false)
expect(pod-from-template 2 "^$" "Pod \"templated\": spec.resourceClaims\\[gpu\\]: only resourceClaimName"
       ARGS -f ${C} -f ${CASES}/pod-from-template.yaml --node node-a)
# stdin
expect(stdin 0 "\"allocation\"" "" INPUT ${EXAMPLES}/claims/one-gpu.yaml
       ARGS -f ${C} -f - --node node-a)
# Not on this node: exit 1, the reason on stderr.
expect(unschedulable 1 "^$" "node node-a: cannot allocate all claims"
       ARGS -f ${C} -f ${EXAMPLES}/claims/four-80gi-gpus.yaml --node node-a)
expect(unknown-node 1 "^$" "no ResourceSlices for this node"
       ARGS -f ${C} -f ${EXAMPLES}/claims/one-gpu.yaml --node node-z)
# Errors: exit 2, naming the object and field.
expect(cel-runtime-error 2 "^$" "claim default/bad: selector #0 on device gpu.example.com/node-a/gpu-0: CEL runtime error.*no such key: modle"
       ARGS -f ${C} -f ${EXAMPLES}/claims/bad-selector.yaml --node node-a)
expect(bad-gate 2 "^$" "unrecognized feature gate: NoSuchGate"
       ARGS -f ${C} -f ${EXAMPLES}/claims/one-gpu.yaml --node node-a --feature-gates NoSuchGate=true)
expect(disabled-feature 2 "^$" "has capacity requests, but the DRAConsumableCapacity feature is disabled"
       INPUT ${CASES}/capacity-claim.yaml
       ARGS -f ${C} -f - --node node-a --feature-gates DRAConsumableCapacity=false)
expect(missing-file 2 "^$" "no-such-file.yaml: cannot open file"
       ARGS -f ${EXAMPLES}/no-such-file.yaml --node node-a)
expect(garbage 2 "^$" "garbage.yaml"
       ARGS -f ${CASES}/garbage.yaml --node node-a)
expect(invalid-object 2 "^$" "ResourceClaim.*\"invalid\" is invalid: spec.devices.requests\\[0\\].exactly.count"
       ARGS -f ${C} -f ${CASES}/invalid-claim.yaml --node node-a)
expect(no-node 2 "^$" "exactly one of --node"
       ARGS -f ${C} -f ${EXAMPLES}/claims/one-gpu.yaml)
# --all-nodes: a table of nodes, exit 0 when any fits, 1 when none does.
expect(all-nodes 0 "NODE +FITS +DETAILS.*node-a +yes +gpu=gpu.example.com/node-a/gpu-0.*node-c +yes" ""
       ARGS -f ${C} -f ${EXAMPLES}/claims/one-gpu.yaml --all-nodes)
expect(all-nodes-none 1 "node-a +no +cannot allocate all claims.*request gpus: .*selectors do not match.*node-b +no .*taint.*node-c +no .*in use" ""
       ARGS -f ${C} -f ${EXAMPLES}/claims/four-80gi-gpus.yaml --all-nodes)
# --explain: what the search considered, on stderr.
expect(explain 0 "\"allocation\"" "pool gpu.example.com/node-b: complete.*request gpu:.*gpu.example.com/node-b/gpu-0: has a taint"
       ARGS -f ${C} -f ${EXAMPLES}/claims/one-gpu.yaml --node node-b --explain)
# Bad input of every kind: exit 2, never a crash.
expect(unknown-kind 2 "^$" "unsupported object kind \"ConfigMap\""
       ARGS -f ${CASES}/unknown-kind.yaml --node node-a)
expect(over-limit 2 "^$" "claim default/big, request gpu: adding 33 devices exceeds the claim limit of 32"
       ARGS -f ${C} -f ${CASES}/too-many-devices.yaml --node node-a)
expect(missing-class 2 "^$" "could not retrieve device class missing-class"
       ARGS -f ${C} -f ${CASES}/missing-class.yaml --node node-a)
expect(duplicate-device 2 "^$" "ResourceSlice.*\"dup\" is invalid: spec.devices\\[1\\]: Duplicate value"
       ARGS -f ${C} -f ${CASES}/duplicate-device.yaml -f ${EXAMPLES}/claims/one-gpu.yaml --node node-a)
expect(duplicate-counter-set 2 "^$" "ResourceSlice.*\"dup-counters\" is invalid: spec.sharedCounters\\[1\\]: Duplicate value: \"gpu-0\""
       ARGS -f ${C} -f ${CASES}/duplicate-counter.yaml -f ${EXAMPLES}/claims/one-gpu.yaml --node node-a)
expect(invalid-name 2 "^$" "ResourceClaim.*\"Bad_Name\" is invalid: metadata.name: Invalid value"
       ARGS -f ${C} -f ${CASES}/invalid-name.yaml --node node-a)
expect(selector-syntax-error 2 "^$" "claim default/broken: selector #0: CEL compile error.*Syntax error"
       ARGS -f ${C} -f ${CASES}/selector-syntax-error.yaml --node node-a)
# Nothing to allocate: upstream has nothing to do; an empty List, exit 0.
expect(no-pending-claims 0 "\"kind\": \"List\",[ \n]*\"items\": \\[\\]" "^$"
       ARGS -f ${C} --node node-a)
expect(help 0 "^devlet-alloc: allocate.*Usage: devlet-alloc \\[OPTIONS\\].*--timeout" "^$"
       ARGS --help)
# A live cluster (issue 16 §2; against a real kube-apiserver: integration/apiserver, ctest
# devlet_alloc_apiserver). Without a server: no input at all, and kubeconfigs that cannot be used.
expect(no-input 2 "^$" "give -f FILE, or read a live cluster \\(--kubeconfig"
       ARGS --node node-a)
expect(kubeconfig-missing 2 "^$" "^devlet-alloc: kubeconfig: cannot read ${CASES}/no-such-kubeconfig\n$"
       ARGS --kubeconfig ${CASES}/no-such-kubeconfig --claim c --all-nodes)
expect(kubeconfig-garbage 2 "^$" "^devlet-alloc: ${CASES}/garbage.yaml: "
       ARGS --kubeconfig ${CASES}/garbage.yaml --claim c --all-nodes)
# The kubectl plugin is devlet-alloc under the name kubectl-devlet (a symlink next to it).
get_filename_component(_dir ${ALLOC} DIRECTORY)
execute_process(COMMAND ${_dir}/kubectl-devlet --help TIMEOUT 30
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(rc STREQUAL "0" AND out MATCHES "^kubectl devlet: allocate.*Usage: kubectl devlet \\[OPTIONS\\].*--kubeconfig")
  message(STATUS "ok   kubectl-devlet-help")
else()
  message(SEND_ERROR "kubectl-devlet-help: exit ${rc}\n${out}\n${err}")
endif()
# --timeout (issue 16): a search of C(60,8) combinations with no solution stops at its budget,
# names the node, the budget and the claim, and exits 1 (the input is fine; a larger --timeout
# may answer). execute_process's TIMEOUT fails a hang.
expect(timeout 1 "^$" "^devlet-alloc: node node-s: timed out after 1s while allocating claim default/exhaustive\n$"
       ARGS -f ${CASES}/exhaustive-search.yaml --node node-s --timeout 1s)
expect(timeout-ms 1 "^$" "timed out after 300ms while allocating claim default/exhaustive"
       ARGS -f ${CASES}/exhaustive-search.yaml --node node-s --timeout 300ms)
expect(timeout-all-nodes 1 "node-s +no +node node-s: timed out after 200ms while allocating claim default/exhaustive" ""
       ARGS -f ${CASES}/exhaustive-search.yaml --all-nodes --timeout 200ms)
expect(timeout-invalid 2 "^$" "--timeout: invalid duration \"ten\""
       ARGS -f ${C} -f ${EXAMPLES}/claims/one-gpu.yaml --node node-a --timeout ten)
# CEL cost limits as the API server applies them at creation (estimated worst case > 1,000,000).
expect(too-complex-selector 2 "^$" "ResourceClaim.resource.k8s.io \"costly\" is invalid: spec.devices.requests\\[0\\].exactly.selectors\\[0\\].cel.expression: Forbidden: too complex, exceeds cost limit"
       ARGS -f ${C} -f ${CASES}/too-complex-selector.yaml --node node-a)
expect(too-complex-derived 2 "^$" "\"costly-derived\" is invalid: \\[spec.devices.requests\\[0\\].exactly.derivedAttributes\\[0\\].expression: Forbidden: too complex, exceeds cost limit, spec.devices: Forbidden: too complex, total cost of derived attribute CEL expressions in the claim exceeds cost limit\\]"
       ARGS -f ${C} -f ${CASES}/too-complex-derived.yaml --node node-a --feature-gates DRADerivedAttributes=true)
expect(too-complex-derived-total 2 "^$" "\"costly-total\" is invalid: spec.devices: Forbidden: too complex, total cost of derived attribute CEL expressions in the claim exceeds cost limit"
       ARGS -f ${C} -f ${CASES}/too-complex-derived-total.yaml --node node-a --feature-gates DRADerivedAttributes=true)
# Derived attributes (DRADerivedAttributes): allocated with the gate, an error without it.
expect(derived-attributes 0 "\"device\": \"gpu-0\".*\"device\": \"gpu-2\"" ""
       ARGS -f ${C} -f ${CASES}/derived-numa.yaml --node node-a --feature-gates DRADerivedAttributes=true)
expect(derived-attributes-disabled 2 "^$" "request gpus: cannot handle request with derived attributes, the feature is disabled"
       ARGS -f ${C} -f ${CASES}/derived-numa.yaml --node node-a)

# Input over the 64 MiB limit is refused without being read first (issue 14 §0.3: 1 GB on stdin
# took 987 MB of RSS before the limit refused it). 1 GiB piped in under a 600 MB address-space
# limit: the old read-everything-first would die of bad_alloc; now it must be refused by name.
# Where /usr/bin/time exists the peak RSS is checked too (the 64 MiB read so far + the program).
find_program(TIME_BIN time PATHS /usr/bin NO_DEFAULT_PATH)
find_program(BASH bash REQUIRED)
set(timer "")
if(TIME_BIN)
  set(timer "${TIME_BIN} -f maxrss_kb=%M")
endif()
set(address_limit "ulimit -v 600000; ")
if(SANITIZE MATCHES "address")
  # ASan reserves terabytes of shadow address space (it cannot start under ulimit -v), and its
  # RSS is no measure of devlet-alloc's: under it only the refusal itself is checked.
  set(address_limit "")
  set(timer "")
endif()
function(expect_refused name command rss_max)
  execute_process(COMMAND ${BASH} -c "${address_limit}${command}"
                  TIMEOUT 60 RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  string(REGEX MATCH "maxrss_kb=([0-9]+)" _ "${err}")
  set(rss "${CMAKE_MATCH_1}")
  if(NOT err MATCHES "input is more than the limit of 67108864 bytes \\(64 MiB\\)")
    message(SEND_ERROR "${name}: exit ${rc}, stderr does not name the limit:\n${err}")
  elseif(rss AND rss GREATER ${rss_max})
    message(SEND_ERROR "${name}: peak RSS ${rss} KB, want under ${rss_max} KB")
  else()
    message(STATUS "ok   ${name} (refused, peak RSS ${rss} KB)")
  endif()
endfunction()
expect_refused(stdin-1g "head -c 1073741824 /dev/zero | ${timer} ${ALLOC} -f - --node node-a" 150000)
# A regular file over the limit is refused by its size, before a byte is read.
set(big ${CMAKE_CURRENT_BINARY_DIR}/devlet-alloc-big-input.yaml)
expect_refused(file-100m "truncate -s 100M '${big}' && ${timer} ${ALLOC} -f '${big}' --node node-a" 30000)
file(REMOVE ${big})
