// libcurl, loaded on first use instead of at process start.
//
// The REST client is the only user of libcurl, and devlet-node in standalone mode (--manifests)
// never creates one. Linked normally, libcurl still comes with about 25 libraries (gnutls via
// libldap, krb5, ssh2, nghttp2, ...) that are mapped, relocated and partly initialised (gnutls and
// p11-kit run constructors) at start-up: 3.8 MB of devlet-node's idle RSS, measured. These
// definitions of the libcurl functions the REST client calls forward to libcurl.so.4 opened with
// dlopen the first time one of them runs; the executable does not depend on libcurl.
//
// If libcurl cannot be loaded, curl_easy_init returns nullptr and CurlLoadError() says why (the
// REST client puts it in its error).
#define CURL_DISABLE_TYPECHECK 1
#include "curl_loader.h"

#include <curl/curl.h>
#include <dlfcn.h>

#include <cstdarg>
#include <cstring>
#include <string>

namespace devlet::kube::internal {
namespace {

constexpr char kLibrary[] = "libcurl.so.4";  // libcurl's ABI since 7.16 (2006)

struct Api {
  void* handle = nullptr;
  std::string error;
  CURLcode (*global_init)(long) = nullptr;
  CURL* (*easy_init)() = nullptr;
  CURLcode (*easy_setopt)(CURL*, CURLoption, ...) = nullptr;
  CURLcode (*easy_perform)(CURL*) = nullptr;
  void (*easy_cleanup)(CURL*) = nullptr;
  void (*easy_reset)(CURL*) = nullptr;
  CURLcode (*easy_getinfo)(CURL*, CURLINFO, ...) = nullptr;
  const char* (*easy_strerror)(CURLcode) = nullptr;
  char* (*easy_escape)(CURL*, const char*, int) = nullptr;
  void (*free)(void*) = nullptr;
  curl_slist* (*slist_append)(curl_slist*, const char*) = nullptr;
  void (*slist_free_all)(curl_slist*) = nullptr;
};

template <typename F>
bool Resolve(Api& api, const char* name, F& out) {
  void* symbol = ::dlsym(api.handle, name);
  if (symbol == nullptr) {
    api.error = std::string(kLibrary) + " has no " + name;
    return false;
  }
  static_assert(sizeof(out) == sizeof(symbol));
  std::memcpy(&out, &symbol, sizeof(out));  // POSIX: dlsym's object pointer is the function
  return true;
}

Api LoadApi() {
  Api api;
  api.handle = ::dlopen(kLibrary, RTLD_NOW | RTLD_LOCAL);
  if (api.handle == nullptr) {
    const char* why = ::dlerror();
    api.error = std::string("cannot load ") + kLibrary + " (needed to talk to the API server): " +
                (why != nullptr ? why : "unknown error");
    return api;
  }
  const bool ok = Resolve(api, "curl_global_init", api.global_init) &&
                  Resolve(api, "curl_easy_init", api.easy_init) &&
                  Resolve(api, "curl_easy_setopt", api.easy_setopt) &&
                  Resolve(api, "curl_easy_perform", api.easy_perform) &&
                  Resolve(api, "curl_easy_cleanup", api.easy_cleanup) &&
                  Resolve(api, "curl_easy_reset", api.easy_reset) &&
                  Resolve(api, "curl_easy_getinfo", api.easy_getinfo) &&
                  Resolve(api, "curl_easy_strerror", api.easy_strerror) &&
                  Resolve(api, "curl_easy_escape", api.easy_escape) &&
                  Resolve(api, "curl_free", api.free) &&
                  Resolve(api, "curl_slist_append", api.slist_append) &&
                  Resolve(api, "curl_slist_free_all", api.slist_free_all);
  if (!ok) {
    ::dlclose(api.handle);
    api.handle = nullptr;
  }
  return api;
}

const Api& Curl() {
  static const Api api = LoadApi();  // thread-safe, once
  return api;
}

}  // namespace

std::string CurlLoadError() { return Curl().error; }

}  // namespace devlet::kube::internal

using devlet::kube::internal::Curl;

extern "C" {

CURLcode curl_global_init(long flags) {
  return Curl().handle != nullptr ? Curl().global_init(flags) : CURLE_FAILED_INIT;
}

CURL* curl_easy_init(void) {
  return Curl().handle != nullptr ? Curl().easy_init() : nullptr;
}

// Every option takes one argument whose type the option's number range tells (curl.h's
// CURLOPTTYPE_*): read it as that type and pass it on.
CURLcode curl_easy_setopt(CURL* curl, CURLoption option, ...) {
  if (Curl().handle == nullptr) return CURLE_FAILED_INIT;
  va_list args;
  va_start(args, option);
  CURLcode rc;
  const int type = static_cast<int>(option) / 10000 * 10000;
  if (type == CURLOPTTYPE_LONG) {
    rc = Curl().easy_setopt(curl, option, va_arg(args, long));
  } else if (type == CURLOPTTYPE_OFF_T) {
    rc = Curl().easy_setopt(curl, option, va_arg(args, curl_off_t));
  } else if (type == CURLOPTTYPE_FUNCTIONPOINT) {
    rc = Curl().easy_setopt(curl, option, va_arg(args, void (*)()));
  } else {  // OBJECTPOINT (strings, lists, data pointers) and BLOB
    rc = Curl().easy_setopt(curl, option, va_arg(args, void*));
  }
  va_end(args);
  return rc;
}

CURLcode curl_easy_perform(CURL* curl) {
  return Curl().handle != nullptr ? Curl().easy_perform(curl) : CURLE_FAILED_INIT;
}

void curl_easy_cleanup(CURL* curl) {
  if (Curl().handle != nullptr) Curl().easy_cleanup(curl);
}

void curl_easy_reset(CURL* curl) {
  if (Curl().handle != nullptr) Curl().easy_reset(curl);
}

// Every CURLINFO takes one pointer to the result.
CURLcode curl_easy_getinfo(CURL* curl, CURLINFO info, ...) {
  if (Curl().handle == nullptr) return CURLE_FAILED_INIT;
  va_list args;
  va_start(args, info);
  void* out = va_arg(args, void*);
  va_end(args);
  return Curl().easy_getinfo(curl, info, out);
}

const char* curl_easy_strerror(CURLcode code) {
  return Curl().handle != nullptr ? Curl().easy_strerror(code) : "libcurl is not loaded";
}

char* curl_easy_escape(CURL* curl, const char* string, int length) {
  return Curl().handle != nullptr ? Curl().easy_escape(curl, string, length) : nullptr;
}

void curl_free(void* p) {
  if (Curl().handle != nullptr) Curl().free(p);
}

curl_slist* curl_slist_append(curl_slist* list, const char* data) {
  return Curl().handle != nullptr ? Curl().slist_append(list, data) : nullptr;
}

void curl_slist_free_all(curl_slist* list) {
  if (Curl().handle != nullptr) Curl().slist_free_all(list);
}

}  // extern "C"
