#include "devlet/nri/framing.h"

#include <random>
#include <string>
#include <vector>

#include "devlet/common/testing/status_matchers.h"
#include "devlet/ttrpc/ttrpc.pb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nri/pkg/api/v1alpha1/api.pb.h"

namespace devlet::nri {
namespace {

using ::testing::ElementsAre;
using ::testing::SizeIs;

std::string Hex(std::string_view bytes) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out += digits[c >> 4];
    out += digits[c & 15];
  }
  return out;
}

// The worked example of shared/research/nri.md §8: plugin "myplug" index "10" registering.
TEST(FramingTest, RegisterPluginRequestIsByteExact) {
  ::nri::pkg::api::v1alpha1::RegisterPluginRequest register_request;
  register_request.set_plugin_name("myplug");
  register_request.set_plugin_idx("10");
  register_request.set_nri_version("v0.12.2");
  ::devlet::ttrpc::Request request;
  request.set_service("nri.pkg.api.v1alpha1.Runtime");
  request.set_method("RegisterPlugin");
  request.set_payload(register_request.SerializeAsString());
  request.set_timeout_nano(5000000000);
  const std::string message =
      EncodeTtrpcMessage(1, TtrpcMessageType::kRequest, 0, request.SerializeAsString());
  const std::vector<std::string> frames = EncodeMuxFrames(kRuntimeServiceConn, message);
  ASSERT_THAT(frames, SizeIs(1));
  EXPECT_EQ(Hex(frames[0].substr(0, 18)), "0000000200000055" "0000004b000000010100");
  EXPECT_EQ(Hex(frames[0].substr(18, 2)), "0a1c");
  EXPECT_EQ(frames[0].substr(20, 28), "nri.pkg.api.v1alpha1.Runtime");
  EXPECT_EQ(Hex(frames[0].substr(frames[0].size() - 6)), "2080e497d012");
  EXPECT_EQ(Hex(frames[0].substr(64, 2 + 21)),
            "1a15" "0a06" + Hex("myplug") + "1202" + Hex("10") + "1a07" + Hex("v0.12.2"));
}

TEST(FramingTest, OkResponseIsByteExact) {
  ::devlet::ttrpc::Response response;
  response.mutable_status();
  const std::string message =
      EncodeTtrpcMessage(1, TtrpcMessageType::kResponse, 0, response.SerializeAsString());
  const std::vector<std::string> frames = EncodeMuxFrames(kRuntimeServiceConn, message);
  ASSERT_THAT(frames, SizeIs(1));
  EXPECT_EQ(Hex(frames[0]), "000000020000000c" "00000002000000010200" "0a00");
}

TEST(FramingTest, ConfigureResponseMask) {
  ::nri::pkg::api::v1alpha1::ConfigureResponse response;
  response.set_events(0x60F);
  EXPECT_EQ(Hex(response.SerializeAsString()), "108f0c");
}

TEST(FramingTest, FramesFollowGoBufioSplit) {
  for (size_t size : {size_t{0}, size_t{100}, size_t{4096}, size_t{4097}, size_t{1} << 20,
                      kTtrpcMessageLengthMax + kTtrpcHeaderLength}) {
    const std::string message(size, 'x');
    const std::vector<std::string> frames = EncodeMuxFrames(7, message);
    size_t total = 0;
    for (const std::string& frame : frames) {
      ASSERT_GE(frame.size(), kMuxHeaderLength);
      EXPECT_EQ(GetUint32(frame.data()), 7u);
      EXPECT_EQ(GetUint32(frame.data() + 4), frame.size() - kMuxHeaderLength);
      EXPECT_LE(frame.size() - kMuxHeaderLength, kMuxPayloadMax);
      total += frame.size() - kMuxHeaderLength;
    }
    EXPECT_EQ(total, size);
    if (size <= 4096) {
      EXPECT_THAT(frames, SizeIs(1)) << size;
    } else {
      EXPECT_THAT(frames, SizeIs(2)) << size;
      EXPECT_EQ(frames[0].size(), kMuxHeaderLength + 4096);
    }
  }
}

struct Wire {
  uint32_t conn;
  TtrpcMessage message;
};

// Random messages on random connections, encoded, cut at random points, decoded back.
TEST(FramingTest, RandomSplitPointsRoundTrip) {
  std::mt19937 rng(20261202);
  for (int round = 0; round < 50; ++round) {
    std::vector<Wire> sent;
    std::string stream;
    const int count = 1 + static_cast<int>(rng() % 20);
    for (int i = 0; i < count; ++i) {
      Wire wire;
      wire.conn = 1 + rng() % 2;
      wire.message.stream_id = static_cast<uint32_t>(rng());
      wire.message.type = static_cast<uint8_t>(1 + rng() % 2);
      const size_t size = (rng() % 4 == 0) ? rng() % 200000 : rng() % 5000;
      wire.message.data.resize(size);
      for (char& c : wire.message.data) {
        c = static_cast<char>(rng());
      }
      for (const std::string& frame : EncodeMuxFrames(
               wire.conn, EncodeTtrpcMessage(wire.message.stream_id,
                                             static_cast<TtrpcMessageType>(wire.message.type), 0,
                                             wire.message.data))) {
        stream += frame;
      }
      sent.push_back(std::move(wire));
    }
    MuxFrameDecoder mux;
    TtrpcMessageDecoder decoders[3];
    std::vector<Wire> received;
    size_t pos = 0;
    while (pos < stream.size()) {
      const size_t n = std::min(stream.size() - pos, size_t{1} + rng() % 9000);
      ASSERT_OK(mux.Feed(std::string_view(stream).substr(pos, n),
                         [&](uint32_t conn, std::string_view payload) {
                           decoders[conn].Feed(payload, [&](TtrpcMessage m) {
                             received.push_back({conn, std::move(m)});
                           });
                         }));
      pos += n;
    }
    EXPECT_EQ(mux.Buffered(), 0u);
    ASSERT_EQ(received.size(), sent.size());
    for (size_t i = 0; i < sent.size(); ++i) {
      EXPECT_EQ(received[i].conn, sent[i].conn);
      EXPECT_EQ(received[i].message.stream_id, sent[i].message.stream_id);
      EXPECT_EQ(received[i].message.type, sent[i].message.type);
      EXPECT_EQ(received[i].message.data, sent[i].message.data);
      EXPECT_FALSE(received[i].message.oversized);
    }
  }
}

TEST(FramingTest, OversizedTtrpcMessageIsSkippedNotBuffered) {
  std::string header(kTtrpcHeaderLength, '\0');
  PutUint32(header.data(), kTtrpcMessageLengthMax + 1);
  PutUint32(header.data() + 4, 5);
  header[8] = 1;
  std::string bytes = header + std::string(kTtrpcMessageLengthMax + 1, 'z') +
                      EncodeTtrpcMessage(7, TtrpcMessageType::kRequest, 0, "next");
  TtrpcMessageDecoder decoder;
  std::vector<TtrpcMessage> messages;
  std::mt19937 rng(7);
  size_t pos = 0;
  while (pos < bytes.size()) {
    const size_t n = std::min(bytes.size() - pos, size_t{1} + rng() % 100000);
    decoder.Feed(std::string_view(bytes).substr(pos, n),
                 [&](TtrpcMessage m) { messages.push_back(std::move(m)); });
    EXPECT_LE(decoder.Buffered(), kTtrpcHeaderLength + 4);
    pos += n;
  }
  ASSERT_THAT(messages, SizeIs(2));
  EXPECT_TRUE(messages[0].oversized);
  EXPECT_EQ(messages[0].stream_id, 5u);
  EXPECT_EQ(messages[0].announced_length, kTtrpcMessageLengthMax + 1);
  EXPECT_FALSE(messages[1].oversized);
  EXPECT_EQ(messages[1].data, "next");
}

TEST(FramingTest, OversizedMuxFrameIsAProtocolError) {
  std::string header(kMuxHeaderLength, '\0');
  PutUint32(header.data(), 1);
  PutUint32(header.data() + 4, kMuxPayloadMax + 1);
  MuxFrameDecoder mux;
  int frames = 0;
  auto count = [&](uint32_t, std::string_view) { ++frames; };
  EXPECT_THAT(mux.Feed(header.substr(0, 3), count), devlet::testing::IsOk());
  EXPECT_THAT(mux.Feed(header.substr(3), count),
              devlet::testing::StatusIs(absl::StatusCode::kInvalidArgument,
                                        ::testing::HasSubstr("maximum is 4194314")));
  // Stays failed.
  EXPECT_FALSE(mux.Feed(EncodeMuxFrame(1, "ok"), count).ok());
  EXPECT_EQ(frames, 0);
}

TEST(FramingTest, MaximalMuxFrameIsAccepted) {
  const std::string payload(kMuxPayloadMax, 'a');
  MuxFrameDecoder mux;
  std::vector<size_t> sizes;
  ASSERT_OK(mux.Feed(EncodeMuxFrame(2, payload),
                     [&](uint32_t, std::string_view p) { sizes.push_back(p.size()); }));
  EXPECT_THAT(sizes, ElementsAre(kMuxPayloadMax));
}

// Garbage never crashes the decoders; they either fail (mux) or produce messages.
TEST(FramingTest, CorruptedInputNeverCrashes) {
  std::mt19937 rng(99);
  for (int round = 0; round < 200; ++round) {
    std::string bytes(1 + rng() % 3000, '\0');
    for (char& c : bytes) {
      c = static_cast<char>(rng() % 4 == 0 ? 0 : rng());
    }
    MuxFrameDecoder mux;
    TtrpcMessageDecoder decoder;
    size_t pos = 0;
    while (pos < bytes.size()) {
      const size_t n = std::min(bytes.size() - pos, size_t{1} + rng() % 64);
      if (!mux.Feed(std::string_view(bytes).substr(pos, n),
                    [&](uint32_t, std::string_view p) { decoder.Feed(p, [](TtrpcMessage) {}); })
               .ok()) {
        break;
      }
      pos += n;
    }
    TtrpcMessageDecoder direct;
    direct.Feed(bytes, [](TtrpcMessage) {});
  }
}

}  // namespace
}  // namespace devlet::nri
