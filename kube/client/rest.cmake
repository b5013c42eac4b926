# kube/client REST transport (kube-apiserver client over libcurl): included from
# kube/client/CMakeLists.txt. Adds the REST client, the kubeconfig / in-cluster config and
# ApiServerStore to devlet::kube_client, and their tests against a local fake API server
# (cpp-httplib, plain HTTP and TLS with certificates made by openssl at test time).
include_guard(GLOBAL)
pkg_check_modules(CURL REQUIRED IMPORTED_TARGET libcurl)
# libcrypto checks an exec plugin's client certificate and key before libcurl is handed them.
pkg_check_modules(LIBCRYPTO REQUIRED IMPORTED_TARGET libcrypto)

target_sources(devlet_kube_client PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/src/rest_client.cc
  ${CMAKE_CURRENT_LIST_DIR}/src/rest_store.cc
  ${CMAKE_CURRENT_LIST_DIR}/src/kubeconfig.cc
  ${CMAKE_CURRENT_LIST_DIR}/src/curl_loader.cc)
# libcurl is opened with dlopen on first use (src/curl_loader.cc): only its headers at build time,
# so binaries that never talk to an API server do not load it and its ~25 dependencies.
target_include_directories(devlet_kube_client PRIVATE ${CURL_INCLUDE_DIRS})
target_link_libraries(devlet_kube_client PRIVATE
  ${CMAKE_DL_LIBS} PkgConfig::LIBCRYPTO nlohmann_json::nlohmann_json yaml-cpp)

if(DEVLET_BUILD_TESTS)
  pkg_check_modules(HTTPLIB REQUIRED IMPORTED_TARGET cpp-httplib)
  # The fake API server reads the client certificate of each request.
  pkg_check_modules(LIBSSL REQUIRED IMPORTED_TARGET libssl)
  devlet_cc_test(
    NAME kube_rest_test
    SRCS ${CMAKE_CURRENT_LIST_DIR}/tests/rest_client_test.cc
         ${CMAKE_CURRENT_LIST_DIR}/tests/kubeconfig_test.cc
    DEPS devlet::kube_client devlet::common_testing PkgConfig::HTTPLIB PkgConfig::LIBSSL
         PkgConfig::LIBCRYPTO
         nlohmann_json::nlohmann_json
  )
endif()
