#pragma once
// What this binary was built from and for (`gputriage --version`); the
// definitions are written at build time by cmake/build_info.cmake.

namespace gputriage {

/// The commit (12 hex digits; "-modified" when tracked files differed from it,
/// "unknown" outside a git checkout).
extern const char* const kBuildCommit;
/// The platform the binary is for and how it is linked, e.g. "x86_64-linux-gnu,
/// glibc >= 2.28, libraries linked in (manylinux_2_28_x86_64)".
extern const char* const kBuildTarget;

}  // namespace gputriage
