# kube/client REST transport (kube-apiserver client, HTTP/1.1 over TCP or mbed TLS): included from
# kube/client/CMakeLists.txt. Adds the REST client, the kubeconfig / in-cluster config and
# ApiServerStore to devlet::kube_client, and their tests against a local fake API server
# (cpp-httplib, plain HTTP and TLS with certificates made by openssl at test time).
include_guard(GLOBAL)
# mbed TLS 2.28 (Debian libmbedtls-dev) for the API server's TLS: 0.8 MB resident where OpenSSL's
# handshakes cost 3 MB and libcurl's libraries 4.5 MB more (dra-kubelet/README.md, "Idle RSS").
# Its static archives are preferred: --gc-sections then drops what the client does not use.
find_path(MBEDTLS_INCLUDE_DIR mbedtls/ssl.h REQUIRED)
foreach(lib mbedtls mbedx509 mbedcrypto)
  find_library(MBEDTLS_${lib}_LIBRARY NAMES lib${lib}.a ${lib} REQUIRED)
endforeach()
# libcrypto checks an exec plugin's client certificate and key before the transport uses them.
pkg_check_modules(LIBCRYPTO REQUIRED IMPORTED_TARGET libcrypto)

target_sources(devlet_kube_client PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/src/rest_client.cc
  ${CMAKE_CURRENT_LIST_DIR}/src/rest_store.cc
  ${CMAKE_CURRENT_LIST_DIR}/src/kubeconfig.cc
  ${CMAKE_CURRENT_LIST_DIR}/src/http_transport.cc)
target_include_directories(devlet_kube_client SYSTEM PRIVATE ${MBEDTLS_INCLUDE_DIR})
target_link_libraries(devlet_kube_client PRIVATE
  ${MBEDTLS_mbedtls_LIBRARY} ${MBEDTLS_mbedx509_LIBRARY} ${MBEDTLS_mbedcrypto_LIBRARY}
  Threads::Threads PkgConfig::LIBCRYPTO nlohmann_json::nlohmann_json yaml-cpp)

if(DEVLET_BUILD_TESTS)
  pkg_check_modules(HTTPLIB REQUIRED IMPORTED_TARGET cpp-httplib)
  # The fake API server reads the client certificate of each request.
  pkg_check_modules(LIBSSL REQUIRED IMPORTED_TARGET libssl)
  devlet_cc_test(
    NAME kube_rest_test
    SRCS ${CMAKE_CURRENT_LIST_DIR}/tests/rest_client_test.cc
         ${CMAKE_CURRENT_LIST_DIR}/tests/kubeconfig_test.cc
         ${CMAKE_CURRENT_LIST_DIR}/tests/http_transport_test.cc
         ${CMAKE_CURRENT_LIST_DIR}/tests/rest_faults_test.cc
    DEPS devlet::kube_client devlet::common_testing PkgConfig::HTTPLIB PkgConfig::LIBSSL
         PkgConfig::LIBCRYPTO
         nlohmann_json::nlohmann_json
    # Watches (their thread, reconnects, relists) and cancelling a stalled exchange.
    CONCURRENCY "ApiServerStoreTest.Watch*:ApiServerFaultTest.Watch*:HttpTransportTest.StalledResponseTimesOutOrIsCancelled"
  )
endif()
