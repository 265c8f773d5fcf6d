// Where a report or an export may be written by replacing the file, and where not.
#pragma once

#include <sys/stat.h>

#include <string>

namespace gputriage {

/// Whether `path` names something written into, never replaced: a device
/// (/dev/null, /dev/stdout), a FIFO (`--json >(jq .)`), a socket. A file written
/// beside it and renamed over it would put a regular file in its place (a
/// `--json /dev/null` once replaced the machine's /dev/null).
inline bool WrittenInPlace(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode);
}

}  // namespace gputriage
