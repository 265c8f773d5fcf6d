#pragma once

namespace gputriage {
inline constexpr const char* kGputriageVersion = "0.1.0";
}  // namespace gputriage
