// Kubernetes JSON/YAML decoding, then validation and encoding of whatever decodes (kube/codec.h,
// kube/validation.h): the path every manifest, watch event and extender request body takes.
// Besides crashes, it checks what issue 14 §0.8 promised of errors: InvalidArgument, not empty,
// no raw control bytes, and not megabytes long.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "devlet/kube/codec.h"
#include "devlet/kube/validation.h"
#include "fuzz_util.h"

using devlet::kube::DecodeOptions;
using devlet::kube::Object;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  if (size > (1u << 20)) {
    return -1;  // the decoder refuses more itself; do not spend time there
  }
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  // The options come from the input's length, so that seed files (plain manifests) need no
  // header: every variant sees every shape.
  const DecodeOptions options{
      .strict = (size & 1) != 0, .apply_defaults = (size & 2) == 0, .max_bytes = 1u << 20};
  absl::StatusOr<std::vector<Object>> objects = devlet::kube::Decode(input, options);
  if (!objects.ok()) {
    devlet::fuzz::CheckErrorMessage(objects.status(), 8192);
    return 0;
  }
  const std::string json = devlet::kube::EncodeJsonList(*objects);
  absl::StatusOr<std::vector<Object>> again =
      devlet::kube::Decode(json, {.apply_defaults = false, .max_bytes = 1u << 30});
  if (!again.ok()) {
    devlet::fuzz::CheckErrorMessage(again.status(), 8192);
  }
  for (const Object& object : *objects) {
    (void)devlet::kube::ValidateObject(object);
    (void)devlet::kube::Validate(object);
    (void)devlet::kube::EncodeJson(object, {.indent = 1});
  }
  return 0;
}
