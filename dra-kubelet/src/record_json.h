// JSON forms of ClaimRecord and friends, shared by FileClaimRecordStore and the state/ adapter.
#pragma once

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "devlet/dra_kubelet/interfaces.h"

namespace devlet::dra_kubelet::internal {

nlohmann::ordered_json AttributeToJson(const AttributeValue& value);
AttributeValue AttributeFromJson(const nlohmann::json& value);
nlohmann::ordered_json EditsToJson(const ContainerEdits& edits);
ContainerEdits EditsFromJson(const nlohmann::json& in);
// RecordToJson encodes `record`; without `with_container_edits` the resolved container edits
// are left out (the state/ adapter keeps them in state's own device fields).
nlohmann::ordered_json RecordToJson(const ClaimRecord& record, bool with_container_edits = true);
absl::StatusOr<ClaimRecord> RecordFromJson(const nlohmann::json& in);

}  // namespace devlet::dra_kubelet::internal
