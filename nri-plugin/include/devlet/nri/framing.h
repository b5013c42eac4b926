// File: devlet/nri/framing.h
//
// Byte-exact framing of the two layers NRI stacks on one unix socket (shared/research/nri.md §2, §3):
//
//   trunk (mux) frame:  [conn_id u32][length u32][payload]            big-endian, 8-byte header
//   ttrpc message:      [length u32][stream u32][type u8][flags u8][data]   big-endian, 10 bytes
//
// The decoders are pure state machines: feed them bytes cut anywhere and they emit whole frames
// and messages, so the same code serves the socket reader and the randomized split tests.
//
//   MuxFrameDecoder mux;
//   TtrpcMessageDecoder ttrpc;
//   DEVLET_RETURN_IF_ERROR(mux.Feed(bytes, [&](uint32_t conn, std::string_view payload) {
//     ttrpc.Feed(payload, [&](TtrpcMessage message) { ... });
//   }));
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"

namespace devlet::nri {

// Mux connection ids: the runtime calls the plugin's service on kPluginServiceConn and the plugin
// calls the runtime's service on kRuntimeServiceConn. Id 0 is reserved.
inline constexpr uint32_t kPluginServiceConn = 1;
inline constexpr uint32_t kRuntimeServiceConn = 2;

// kMuxHeaderLength is the size of a trunk frame header.
inline constexpr size_t kMuxHeaderLength = 8;
// kTtrpcHeaderLength is the size of a ttrpc message header.
inline constexpr size_t kTtrpcHeaderLength = 10;
// kTtrpcMessageLengthMax is the largest ttrpc message body either side accepts (4 MiB).
inline constexpr size_t kTtrpcMessageLengthMax = 4u << 20;
// kMuxPayloadMax is the largest trunk frame payload the Go multiplexer accepts.
inline constexpr size_t kMuxPayloadMax = kTtrpcHeaderLength + kTtrpcMessageLengthMax;
// kGoReadBufferSize is the size of the bufio.Reader behind Go's ttrpc channel; see
// EncodeMuxFrames for why it constrains our frames.
inline constexpr size_t kGoReadBufferSize = 4096;

// TtrpcMessageType is the ttrpc message type byte.
enum class TtrpcMessageType : uint8_t { kRequest = 1, kResponse = 2, kData = 3 };

// TtrpcMessage is one decoded ttrpc message.
struct TtrpcMessage {
  uint32_t stream_id = 0;
  uint8_t type = 0;   // A TtrpcMessageType value, or whatever the peer sent.
  uint8_t flags = 0;
  std::string data;   // Empty when `oversized`.
  // True when the header announced more than kTtrpcMessageLengthMax bytes: the body was
  // discarded and only the header fields are meaningful (the receiver answers ResourceExhausted).
  bool oversized = false;
  uint32_t announced_length = 0;
};

// MuxFrameDecoder reassembles trunk frames from a byte stream.
class MuxFrameDecoder {
 public:
  using FrameCallback = std::function<void(uint32_t conn_id, std::string_view payload)>;

  // Feed consumes `bytes`, calling `on_frame` for every complete frame. A frame longer than
  // kMuxPayloadMax is a protocol error (the Go multiplexer closes the trunk on it); after an error
  // the decoder stays failed.
  absl::Status Feed(std::string_view bytes, const FrameCallback& on_frame);

  // Buffered returns how many bytes of an incomplete frame are held.
  size_t Buffered() const { return buffer_.size(); }

 private:
  std::string buffer_;
  absl::Status error_;
};

// TtrpcMessageDecoder reassembles ttrpc messages from the byte stream of one mux connection.
// Oversized messages are skipped byte by byte (never buffered) and reported with `oversized` set.
class TtrpcMessageDecoder {
 public:
  using MessageCallback = std::function<void(TtrpcMessage message)>;

  // Feed consumes `bytes`, calling `on_message` for every complete message.
  void Feed(std::string_view bytes, const MessageCallback& on_message);

  // Buffered returns how many bytes of an incomplete message are held.
  size_t Buffered() const { return buffer_.size(); }

 private:
  std::string buffer_;
  size_t skip_remaining_ = 0;  // Body bytes of an oversized message still to discard.
};

// EncodeTtrpcMessage returns header + data. `data` must not exceed kTtrpcMessageLengthMax.
std::string EncodeTtrpcMessage(uint32_t stream_id, TtrpcMessageType type, uint8_t flags,
                               std::string_view data);

// EncodeMuxFrame returns one trunk frame carrying `payload` (at most kMuxPayloadMax bytes).
std::string EncodeMuxFrame(uint32_t conn_id, std::string_view payload);

// EncodeMuxFrames splits one encoded ttrpc message into trunk frames the way the Go side writes
// and expects them. Go's mux hands a reader one whole frame per Read and fails when the reader's
// buffer is smaller, and Go's ttrpc reads through a 4096-byte bufio.Reader; so a message of up to
// 4096 bytes travels in one frame, and a larger one as [its first 4096 bytes] + [the rest]
// (exactly what Go's bufio.Writer(4096) produces). Never mixes two messages in one frame.
std::vector<std::string> EncodeMuxFrames(uint32_t conn_id, std::string_view message);

// PutUint32 / GetUint32: big-endian helpers.
void PutUint32(char* out, uint32_t value);
uint32_t GetUint32(const char* in);

}  // namespace devlet::nri
