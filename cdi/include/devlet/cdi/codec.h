// File: devlet/cdi/codec.h
//
// Encoding and decoding of CDI spec files. Output is JSON with exactly the reference library's
// keys (empty optional fields omitted, `containerEdits` an object, `fileMode` a decimal number);
// input is JSON or YAML, decoded strictly (an unknown key is an error, as in the reference
// library's KnownFields decoder):
//
//   std::string text = devlet::cdi::EncodeSpecJson(spec);
//   DEVLET_ASSIGN_OR_RETURN(devlet::cdi::Spec back, devlet::cdi::DecodeSpec(text));
#pragma once

#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "devlet/cdi/spec.h"

namespace devlet::cdi {

// EncodeSpecJson returns `spec` as compact JSON followed by a newline. It does not validate.
std::string EncodeSpecJson(const Spec& spec);

// DecodeSpec parses a spec file's contents, JSON or YAML (detected from the first non-blank
// character: '{' means JSON). Unknown keys, wrong types and out-of-range numbers are errors whose
// message names the field (e.g. `devices[1].containerEdits.deviceNodes[0].major`). It does not
// validate beyond the types; call ValidateSpec.
absl::StatusOr<Spec> DecodeSpec(std::string_view data);

}  // namespace devlet::cdi
