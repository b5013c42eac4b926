#include "devlet/nri/framing.h"

#include <algorithm>

#include "devlet/common/status.h"

namespace devlet::nri {

void PutUint32(char* out, uint32_t value) {
  out[0] = static_cast<char>((value >> 24) & 0xff);
  out[1] = static_cast<char>((value >> 16) & 0xff);
  out[2] = static_cast<char>((value >> 8) & 0xff);
  out[3] = static_cast<char>(value & 0xff);
}

uint32_t GetUint32(const char* in) {
  const auto* u = reinterpret_cast<const unsigned char*>(in);
  return (static_cast<uint32_t>(u[0]) << 24) | (static_cast<uint32_t>(u[1]) << 16) |
         (static_cast<uint32_t>(u[2]) << 8) | static_cast<uint32_t>(u[3]);
}

absl::Status MuxFrameDecoder::Feed(std::string_view bytes, const FrameCallback& on_frame) {
  if (!error_.ok()) {
    return error_;
  }
  // Fast path: nothing buffered, parse straight out of `bytes`.
  size_t pos = 0;
  if (buffer_.empty()) {
    while (bytes.size() - pos >= kMuxHeaderLength) {
      const uint32_t conn = GetUint32(bytes.data() + pos);
      const uint32_t length = GetUint32(bytes.data() + pos + 4);
      if (length > kMuxPayloadMax) {
        error_ = InvalidArgument("NRI mux: frame for connection " + std::to_string(conn) +
                                 " announces " + std::to_string(length) +
                                 " bytes, the maximum is " + std::to_string(kMuxPayloadMax));
        return error_;
      }
      if (bytes.size() - pos - kMuxHeaderLength < length) {
        break;
      }
      on_frame(conn, bytes.substr(pos + kMuxHeaderLength, length));
      pos += kMuxHeaderLength + length;
    }
    buffer_.assign(bytes.substr(pos));
    return absl::OkStatus();
  }
  buffer_.append(bytes);
  while (buffer_.size() - pos >= kMuxHeaderLength) {
    const uint32_t conn = GetUint32(buffer_.data() + pos);
    const uint32_t length = GetUint32(buffer_.data() + pos + 4);
    if (length > kMuxPayloadMax) {
      error_ = InvalidArgument("NRI mux: frame for connection " + std::to_string(conn) +
                               " announces " + std::to_string(length) +
                               " bytes, the maximum is " + std::to_string(kMuxPayloadMax));
      buffer_.clear();
      return error_;
    }
    if (buffer_.size() - pos - kMuxHeaderLength < length) {
      break;
    }
    on_frame(conn, std::string_view(buffer_).substr(pos + kMuxHeaderLength, length));
    pos += kMuxHeaderLength + length;
  }
  buffer_.erase(0, pos);
  return absl::OkStatus();
}

void TtrpcMessageDecoder::Feed(std::string_view bytes, const MessageCallback& on_message) {
  while (!bytes.empty()) {
    if (skip_remaining_ > 0) {
      const size_t n = std::min(skip_remaining_, bytes.size());
      skip_remaining_ -= n;
      bytes.remove_prefix(n);
      continue;
    }
    // Need a complete header first.
    if (buffer_.size() < kTtrpcHeaderLength) {
      const size_t need = kTtrpcHeaderLength - buffer_.size();
      const size_t n = std::min(need, bytes.size());
      buffer_.append(bytes.substr(0, n));
      bytes.remove_prefix(n);
      if (buffer_.size() < kTtrpcHeaderLength) {
        return;
      }
    }
    const uint32_t length = GetUint32(buffer_.data());
    if (length > kTtrpcMessageLengthMax) {
      TtrpcMessage message;
      message.stream_id = GetUint32(buffer_.data() + 4);
      message.type = static_cast<uint8_t>(buffer_[8]);
      message.flags = static_cast<uint8_t>(buffer_[9]);
      message.oversized = true;
      message.announced_length = length;
      buffer_.clear();
      skip_remaining_ = length;
      on_message(std::move(message));
      continue;
    }
    const size_t total = kTtrpcHeaderLength + length;
    if (buffer_.size() == kTtrpcHeaderLength && bytes.size() >= length) {
      // Whole body available in this chunk: avoid growing the buffer byte by byte.
      TtrpcMessage message;
      message.stream_id = GetUint32(buffer_.data() + 4);
      message.type = static_cast<uint8_t>(buffer_[8]);
      message.flags = static_cast<uint8_t>(buffer_[9]);
      message.announced_length = length;
      message.data.assign(bytes.substr(0, length));
      bytes.remove_prefix(length);
      buffer_.clear();
      on_message(std::move(message));
      continue;
    }
    if (buffer_.capacity() < total) {
      buffer_.reserve(total);
    }
    const size_t n = std::min(total - buffer_.size(), bytes.size());
    buffer_.append(bytes.substr(0, n));
    bytes.remove_prefix(n);
    if (buffer_.size() < total) {
      return;
    }
    TtrpcMessage message;
    message.stream_id = GetUint32(buffer_.data() + 4);
    message.type = static_cast<uint8_t>(buffer_[8]);
    message.flags = static_cast<uint8_t>(buffer_[9]);
    message.announced_length = length;
    message.data = buffer_.substr(kTtrpcHeaderLength);
    buffer_.clear();
    on_message(std::move(message));
  }
}

std::string EncodeTtrpcMessage(uint32_t stream_id, TtrpcMessageType type, uint8_t flags,
                               std::string_view data) {
  std::string out(kTtrpcHeaderLength + data.size(), '\0');
  PutUint32(out.data(), static_cast<uint32_t>(data.size()));
  PutUint32(out.data() + 4, stream_id);
  out[8] = static_cast<char>(type);
  out[9] = static_cast<char>(flags);
  std::copy(data.begin(), data.end(), out.begin() + kTtrpcHeaderLength);
  return out;
}

std::string EncodeMuxFrame(uint32_t conn_id, std::string_view payload) {
  std::string out(kMuxHeaderLength + payload.size(), '\0');
  PutUint32(out.data(), conn_id);
  PutUint32(out.data() + 4, static_cast<uint32_t>(payload.size()));
  std::copy(payload.begin(), payload.end(), out.begin() + kMuxHeaderLength);
  return out;
}

std::vector<std::string> EncodeMuxFrames(uint32_t conn_id, std::string_view message) {
  std::vector<std::string> frames;
  if (message.size() <= kGoReadBufferSize) {
    frames.push_back(EncodeMuxFrame(conn_id, message));
    return frames;
  }
  frames.push_back(EncodeMuxFrame(conn_id, message.substr(0, kGoReadBufferSize)));
  std::string_view rest = message.substr(kGoReadBufferSize);
  // The rest of a <= 4 MiB message always fits one frame; split defensively anyway.
  while (!rest.empty()) {
    const size_t n = std::min(rest.size(), kMuxPayloadMax);
    frames.push_back(EncodeMuxFrame(conn_id, rest.substr(0, n)));
    rest.remove_prefix(n);
  }
  return frames;
}

}  // namespace devlet::nri
