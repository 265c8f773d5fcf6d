// libFuzzer target: the job's configuration channel, which the recorder reads
// from whatever the job wrote (src/record/job_config.cc). Beyond not crashing,
// what it promises: bounded keys and values, no key that could pose as the
// recorder's context or a --tag, requests kept apart from settings.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "src/record/job_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const gputriage::JobConfig c = gputriage::ParseJobConfig(text);
  if (c.settings.size() > gputriage::JobConfigChannel::kMaxKeys) __builtin_trap();
  for (const auto& [key, value] : c.settings) {
    if (key.empty() || key.size() > gputriage::JobConfigChannel::kMaxKeyBytes) __builtin_trap();
    if (key.find('.') == std::string::npos || key.rfind("tag.", 0) == 0 || key.rfind("gputriage.", 0) == 0)
      __builtin_trap();
    if (value.size() > gputriage::JobConfigChannel::kMaxValueBytes) __builtin_trap();
  }
  return 0;
}
