// File: devlet/state/checkpoint.h
//
// The node's prepared-claim state: what devlet prepared for which ResourceClaim, recorded before
// and after the work so that a crash at any point can be converged from. The DRA kubelet plugin
// writes it; the NRI plugin reads it ("what did pod X get"). See store.h for the file on disk.
//
// On-disk encoding (one JSON object, one line):
//   {"kind":"DevletCheckpoint","version":2,"checksum":"crc32:<8 hex>",
//    "data":{"claims":{...},"journalSeq":N}}
// The checksum covers the compact serialization of "data". A file that is truncated, does not
// parse, or whose checksum does not match is reported as kDataLoss, never silently dropped.
// journalSeq is the last journal record folded into the file (journal.h); changes after it are
// in checkpoint.journal. Version 1 (no journal) is still read; a devlet that only knows version 1
// refuses version 2 instead of ignoring the journal.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "devlet/cdi/spec.h"

namespace devlet::state {

// kCheckpointVersion is the format version this build writes (it reads 1 and 2).
inline constexpr int kCheckpointVersion = 2;

// ClaimState is how far preparing a claim got.
enum class ClaimState {
  kPrepareStarted,    // recorded before any side effect: the work may be partly done
  kPrepareCompleted,  // every device, CDI spec and file is in place
};

// ClaimStateName returns "PrepareStarted" or "PrepareCompleted" (the names used on disk).
std::string_view ClaimStateName(ClaimState state);

// PreparedDevice is one allocated device as prepared for a claim.
struct PreparedDevice {
  std::string driver;
  std::string pool;
  std::string device;
  std::vector<std::string> requests;        // request names served ("req" or "req/sub")
  std::vector<std::string> cdi_device_ids;  // "vendor/class=name", as returned to the kubelet
  std::string share_id;                     // empty unless allocated with a share ID
  // Generic facts about the device, e.g. "numaNode" -> "0",
  // "resource.kubernetes.io/pciBusID" -> "0000:3b:00.0", "cpus" -> "0-7".
  std::map<std::string, std::string> attributes;
  // What a container that gets the device receives: the merged edits of every CDI device in
  // `cdi_device_ids` (devlet's own, its device-metadata mount, a vendor's), resolved when the
  // claim was prepared, so that the container path reads nothing else. Unset: not recorded (a
  // record from a devlet before this field, not yet upgraded by the kubelet plugin's start).
  std::optional<cdi::ContainerEdits> edits;
  // CPU (millicpus) and memory (bytes) the allocation consumed from the device
  // (status.allocation.devices.results[].consumedCapacity "cpus" / "memory"); unset: none.
  std::optional<std::int64_t> cpu_millis;
  std::optional<std::int64_t> memory_bytes;

  bool operator==(const PreparedDevice&) const = default;
};

// PreparedClaim is everything recorded about one claim.
struct PreparedClaim {
  std::string uid;        // ResourceClaim metadata.uid: the key
  std::string namespace_name;
  std::string name;
  ClaimState state = ClaimState::kPrepareStarted;
  std::vector<std::string> pod_uids;        // pods the claim is reserved for (status.reservedFor)
  // PodGroups it is reserved for (KEP-5729): a container of any pod may name it (the kubelet
  // checked the pod's group before it prepared the claim for the pod).
  std::vector<std::string> pod_group_uids;
  std::vector<PreparedDevice> devices;
  std::vector<std::string> files;           // host files written for the claim (CDI specs,
                                            // metadata files): removed on unprepare
  std::string applied_config;               // the opaque configuration applied (JSON text)
  std::map<std::string, std::string> annotations;  // anything else a plugin needs to keep

  bool operator==(const PreparedClaim&) const = default;
};

// Checkpoint is the whole prepared-claim state of the node.
struct Checkpoint {
  std::map<std::string, PreparedClaim> claims;  // by claim UID

  bool operator==(const Checkpoint&) const = default;
};

// EncodeCheckpoint serializes `checkpoint` with its version, checksum and the sequence number of
// the last journal record it includes.
std::string EncodeCheckpoint(const Checkpoint& checkpoint, std::uint64_t journal_seq = 0);

// DecodeCheckpoint parses and verifies a checkpoint file's contents. Truncated, unparsable or
// checksum-mismatched data is kDataLoss; a version from a newer devlet is kFailedPrecondition.
// `source` (a path) is used in messages; `journal_seq`, if given, receives journalSeq (0 for
// version 1).
absl::StatusOr<Checkpoint> DecodeCheckpoint(std::string_view data, std::string_view source = "",
                                            std::uint64_t* journal_seq = nullptr);

// Crc32 is the IEEE CRC-32 (as zlib's crc32) of `data`.
std::uint32_t Crc32(std::string_view data);

}  // namespace devlet::state
