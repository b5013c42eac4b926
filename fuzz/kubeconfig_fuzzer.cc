// Kubeconfig parsing (kube/kubeconfig.h ParseKubeconfig): clusters, users, contexts, exec
// sections, inline certificate data. File references resolve against a directory that does not
// exist; exec plugins are parsed, never run.
#include <cstddef>
#include <cstdint>
#include <string>

#include "devlet/kube/kubeconfig.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  if (size > (256u << 10)) {
    return -1;
  }
  const std::string input(reinterpret_cast<const char*>(data), size);
  (void)devlet::kube::ParseKubeconfig(input, "/nonexistent/devlet-fuzz");
  (void)devlet::kube::ParseKubeconfig(input, "/nonexistent/devlet-fuzz", {.context = "other"});
  return 0;
}
