// How a job ended, from its exit code as the recorder reports it: 128 + N for a
// job ended by signal N, as shells do (Linux's signals go up to 64).
#pragma once

#include <cstring>
#include <string>

namespace gputriage {

inline bool EndedBySignal(int exit_code) { return exit_code > 128 && exit_code <= 128 + 64; }

/// "killed by signal 15 (Terminated; exit code 143)"; for a code EndedBySignal.
inline std::string SignalDeathWords(int exit_code) {
  return "killed by signal " + std::to_string(exit_code - 128) + " (" + strsignal(exit_code - 128) + "; exit code " +
         std::to_string(exit_code) + ")";
}

}  // namespace gputriage
