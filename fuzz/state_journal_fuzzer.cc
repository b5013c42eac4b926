// The checkpoint and its journal (state/): what devlet-node reads back after a crash, torn
// writes and foreign bytes included. The input is taken as a checkpoint file and, separately, as
// a journal replayed onto an empty checkpoint, read in chunks of a size chosen by the input.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "devlet/state/checkpoint.h"
#include "devlet/state/journal.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  if (size > (1u << 20)) {
    return -1;
  }
  const std::string input(reinterpret_cast<const char*>(data), size);
  (void)devlet::state::DecodeCheckpoint(input, "fuzz");

  const std::size_t chunk = size == 0 ? 1 : 1 + data[0] % 64;
  devlet::state::JournalReader read = [&](std::uint64_t offset,
                                          std::size_t want) -> absl::StatusOr<std::string> {
    if (offset >= input.size()) {
      return std::string();
    }
    // Short reads too: the replay must not assume it gets all it asked for.
    return input.substr(offset, std::min(want, chunk * 4096));
  };
  devlet::state::Checkpoint checkpoint;
  (void)devlet::state::ReplayJournal(read, input.size(), 0, checkpoint, "fuzz");
  return 0;
}
