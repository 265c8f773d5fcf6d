// The glibc symbols newer than 2.31 that the portable build refers to, defined
// here so the binary and the Python extension run on glibc 2.31 (Ubuntu 20.04,
// Debian 11, RHEL 9 has 2.34). The code is compiled against Debian 12's glibc
// 2.36 headers and links Debian 12's static archives, which were too: libstdc++
// and gRPC read __libc_single_threaded (glibc 2.32), libstdc++'s random_device
// and libcrypt call arc4random (2.36). Linked only into the portable products
// (cmake/dependencies.cmake, gputriage_portable_link); the link against glibc
// 2.31 fails on any other newer symbol, so nothing slips through unseen.
//
// Hidden: these definitions bind inside our own binary or module and are never
// exported; glibc's own copies, where the host has them, keep serving glibc.
#include <fcntl.h>
#include <sys/random.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#define GPUTRIAGE_HIDDEN __attribute__((visibility("hidden")))

extern "C" {

// glibc 2.32+ sets it to 1 while the process has one thread so that libstdc++
// may skip atomic instructions. 0 is always correct: reference counts stay
// atomic, as they were on every glibc before 2.32.
GPUTRIAGE_HIDDEN char __libc_single_threaded = 0;

// arc4random_buf never fails: getrandom(2) (Linux 3.17+), else /dev/urandom;
// with neither there is no safe randomness and the process stops, as glibc's does.
GPUTRIAGE_HIDDEN void arc4random_buf(void* buffer, size_t size) {
  auto* out = static_cast<unsigned char*>(buffer);
  while (size > 0) {
    const ssize_t n = getrandom(out, size, 0);
    if (n > 0) {
      out += n;
      size -= static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == ENOSYS) break;
    abort();
  }
  if (size == 0) return;
  const int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  if (fd < 0) abort();
  while (size > 0) {
    const ssize_t n = read(fd, out, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) abort();
    out += n;
    size -= static_cast<size_t>(n);
  }
  close(fd);
}

GPUTRIAGE_HIDDEN uint32_t arc4random(void) {
  uint32_t value = 0;
  arc4random_buf(&value, sizeof value);
  return value;
}

}  // extern "C"
