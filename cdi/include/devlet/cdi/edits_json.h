// File: devlet/cdi/edits_json.h
//
// One CDI containerEdits block as a JSON tree, for records that keep resolved edits (state/'s
// prepared devices): the same keys and strict decoding as a spec file's containerEdits.
//
//   nlohmann::json j = cdi::EncodeContainerEditsJson(edits);
//   DEVLET_ASSIGN_OR_RETURN(cdi::ContainerEdits back, cdi::DecodeContainerEditsJson(j, "edits"));
#pragma once

#include <string_view>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "devlet/cdi/spec.h"

namespace devlet::cdi {

// EncodeContainerEditsJson returns `edits` as a containerEdits object (empty fields omitted).
nlohmann::json EncodeContainerEditsJson(const ContainerEdits& edits);

// DecodeContainerEditsJson is its inverse; unknown keys and wrong types are InvalidArgument
// naming the field below `path`.
absl::StatusOr<ContainerEdits> DecodeContainerEditsJson(const nlohmann::json& j,
                                                        std::string_view path);

}  // namespace devlet::cdi
