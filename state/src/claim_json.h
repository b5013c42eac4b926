// The JSON encoding of one PreparedClaim, shared by checkpoint.json and the journal.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "devlet/state/checkpoint.h"

namespace devlet::state::internal {

// Dump is the compact serialization the checksums cover (invalid UTF-8 replaced, not thrown).
std::string Dump(const nlohmann::json& j);
// Hex32 is `v` as 8 lower-case hex digits.
std::string Hex32(std::uint32_t v);
// EncodeClaim is a claim as stored in data.claims.
nlohmann::json EncodeClaim(const PreparedClaim& c);
// DecodeClaim is its inverse; it throws (nlohmann or std::runtime_error) on a wrong shape.
PreparedClaim DecodeClaim(const nlohmann::json& j);

}  // namespace devlet::state::internal
