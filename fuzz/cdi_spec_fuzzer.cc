// CDI spec files (cdi/codec.h): decode (JSON or YAML), validate, and encode what decodes; the
// spec files devlet reads back from its CDI directory at start and those other tools leave there.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "devlet/cdi/codec.h"
#include "devlet/cdi/spec.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  if (size > (1u << 20)) {
    return -1;
  }
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<devlet::cdi::Spec> spec = devlet::cdi::DecodeSpec(input);
  if (!spec.ok()) {
    return 0;
  }
  (void)devlet::cdi::ValidateSpec(*spec);
  const std::string json = devlet::cdi::EncodeSpecJson(*spec);
  absl::StatusOr<devlet::cdi::Spec> again = devlet::cdi::DecodeSpec(json);
  if (!again.ok()) {
    devlet::fuzz::Fail("an encoded spec does not decode", again.status().ToString());
  }
  return 0;
}
