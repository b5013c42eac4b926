#include "devlet/state/checkpoint.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "devlet/common/testing/status_matchers.h"

namespace devlet::state {
namespace {

using ::devlet::testing::IsOkAndHolds;
using ::devlet::testing::StatusIs;
using ::testing::HasSubstr;

Checkpoint Sample() {
  Checkpoint c;
  PreparedClaim claim{.uid = "6f1c2a9e-0b7d-4c1e-9a35-1d2e3f4a5b6c",
                      .namespace_name = "vms",
                      .name = "vm1-gpu",
                      .state = ClaimState::kPrepareCompleted,
                      .pod_uids = {"pod-1"},
                      .files = {"/var/run/cdi/k8s.devlet.dev-claim_6f1c.json"},
                      .applied_config = R"({"sharing":"none"})",
                      .annotations = {{"podClaimName", "gpu"}}};
  claim.devices.push_back({.driver = "devlet.dev",
                           .pool = "node-a",
                           .device = "gpu-0",
                           .requests = {"gpu"},
                           .cdi_device_ids = {"k8s.devlet.dev/claim=6f1c-gpu-0"},
                           .attributes = {{"numaNode", "0"},
                                          {"resource.kubernetes.io/pciBusID", "0000:3b:00.0"}}});
  // Resolved edits and allocated CPU/memory round-trip with the rest of the device.
  cdi::ContainerEdits edits;
  edits.env = {"DEVLET_DEVICE_GPU_0=node-a/gpu-0"};
  edits.device_nodes.push_back({.path = "/dev/vfio/12"});
  edits.hooks.push_back({.hook_name = "createContainer", .path = "/usr/bin/nvidia-ctk"});
  claim.devices[0].edits = edits;
  claim.devices.push_back({.driver = "devlet.dev",
                           .pool = "node-a",
                           .device = "cpu-0",
                           .requests = {"cpu"},
                           .edits = cdi::ContainerEdits{},
                           .cpu_millis = 1500,
                           .memory_bytes = std::int64_t{1} << 40});
  c.claims[claim.uid] = claim;
  PreparedClaim started{.uid = "u2", .namespace_name = "ns", .name = "c2"};
  c.claims[started.uid] = started;
  return c;
}

TEST(CheckpointTest, RoundTrip) {
  const std::string text = EncodeCheckpoint(Sample(), 42);
  EXPECT_THAT(text, HasSubstr("\"kind\":\"DevletCheckpoint\",\"version\":2,\"checksum\":\"crc32:"));
  EXPECT_THAT(text, HasSubstr("\"journalSeq\":42"));
  std::uint64_t seq = 0;
  EXPECT_THAT(DecodeCheckpoint(text, "", &seq), IsOkAndHolds(Sample()));
  EXPECT_EQ(seq, 42u);
  EXPECT_THAT(DecodeCheckpoint(EncodeCheckpoint({})), IsOkAndHolds(Checkpoint{}));
}

// A version 1 file (before the journal) is still read, with journal sequence 0.
TEST(CheckpointTest, ReadsVersionOne) {
  const std::string payload =
      R"({"claims":{"u1":{"devices":[],"files":[],"name":"c1","namespace":"ns","podUIDs":[],)"
      R"("state":"PrepareCompleted","uid":"u1"}}})";
  char crc[9];
  std::snprintf(crc, sizeof(crc), "%08x", Crc32(payload));
  const std::string text = R"({"kind":"DevletCheckpoint","version":1,"checksum":"crc32:)" +
                           std::string(crc) + R"(","data":)" + payload + "}\n";
  std::uint64_t seq = 7;
  ASSERT_OK_AND_ASSIGN(Checkpoint checkpoint, DecodeCheckpoint(text, "", &seq));
  EXPECT_EQ(seq, 0u);
  ASSERT_TRUE(checkpoint.claims.contains("u1"));
  EXPECT_EQ(checkpoint.claims["u1"].state, ClaimState::kPrepareCompleted);
}

// Recorded edits of the wrong shape are kDataLoss naming the claim and device, like any other
// checksum-valid entry devlet did not write.
TEST(CheckpointTest, BadRecordedEditsAreDataLoss) {
  Checkpoint c = Sample();
  std::string text = EncodeCheckpoint(c, 1);
  const std::string good = "\"edits\":{}";
  ASSERT_NE(text.find(good), std::string::npos);
  // Re-encode with a bad edits block and a checksum that matches it.
  std::string data = text.substr(text.find("\"data\":") + 7);
  data.pop_back();  // newline
  data.pop_back();  // closing brace of the file object
  data.replace(data.find(good), good.size(), "\"edits\":{\"env\":[7]}");
  char crc[9];
  std::snprintf(crc, sizeof(crc), "%08x", Crc32(data));
  const std::string bad =
      "{\"kind\":\"DevletCheckpoint\",\"version\":2,\"checksum\":\"crc32:" + std::string(crc) +
      "\",\"data\":" + data + "}\n";
  EXPECT_THAT(DecodeCheckpoint(bad, "f"),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("device cpu-0 edits.env")));
}

TEST(CheckpointTest, Crc32MatchesZlib) {
  EXPECT_EQ(Crc32(""), 0u);
  EXPECT_EQ(Crc32("123456789"), 0xCBF43926u);
}

// Every proper prefix of a checkpoint is detected as corrupted.
TEST(CheckpointTest, EveryTruncationIsDataLoss) {
  const std::string text = EncodeCheckpoint(Sample());
  // The trailing newline is not part of the JSON, so the last two prefixes still parse.
  for (size_t n = 0; n + 1 < text.size(); ++n) {
    EXPECT_THAT(DecodeCheckpoint(text.substr(0, n), "/x/checkpoint.json"),
                StatusIs(absl::StatusCode::kDataLoss, HasSubstr("/x/checkpoint.json")))
        << "prefix " << n;
  }
}

// Flipping any byte inside "data" breaks the checksum (or the JSON); never a silent change.
TEST(CheckpointTest, EveryByteFlipInDataIsDetected) {
  const std::string text = EncodeCheckpoint(Sample());
  const size_t start = text.find("\"data\":") + 7;
  for (size_t i = start; i + 2 < text.size(); ++i) {
    std::string bad = text;
    bad[i] = static_cast<char>(bad[i] ^ 0x01);
    EXPECT_THAT(DecodeCheckpoint(bad), StatusIs(absl::StatusCode::kDataLoss)) << "byte " << i;
  }
}

TEST(CheckpointTest, Rejects) {
  EXPECT_THAT(DecodeCheckpoint("{}"), StatusIs(absl::StatusCode::kDataLoss, HasSubstr("kind")));
  EXPECT_THAT(DecodeCheckpoint(R"({"kind":"DevletCheckpoint","version":9,"data":{}})"),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("version 9")));
  std::string text = EncodeCheckpoint(Sample());
  text.replace(text.find("crc32:") + 6, 8, "00000000");
  EXPECT_THAT(DecodeCheckpoint(text),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("checksum mismatch")));
}

}  // namespace
}  // namespace devlet::state
