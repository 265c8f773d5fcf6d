// The glibc symbols newer than 2.28 that the portable build refers to, defined
// here (or bound to their older versions) so the binary and the Python extension
// run on glibc 2.28 (RHEL 8 and its rebuilds; Ubuntu 20.04 and Debian 11 have
// 2.31, RHEL 9 has 2.34). The code is compiled against Debian 12's glibc
// 2.36 headers and links Debian 12's static archives, which were too: libstdc++
// and gRPC read __libc_single_threaded (glibc 2.32), libstdc++'s random_device
// and libcrypt call arc4random (2.36). Linked only into the portable products
// (cmake/dependencies.cmake, gputriage_portable_link). The link is against glibc
// 2.31 (Debian 11's: no 2.28 is in the archives this project reaches), so it
// fails on any other symbol newer than 2.31, and the check after it
// (scripts/glibc_floor_check.sh) on any other newer than 2.28: nothing slips
// through unseen.
//
// Hidden: these definitions bind inside our own binary or module and are never
// exported; glibc's own copies, where the host has them, keep serving glibc.
#include <fcntl.h>
#include <pthread.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <time.h>
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

// ---- glibc 2.29-2.31: what keeps the products at glibc 2.28 (manylinux_2_28:
// RHEL 8 and its rebuilds, where PyTorch's own wheels install) ----

// glibc 2.30's gettid(), which the code and libstdc++ call: the system call itself.
GPUTRIAGE_HIDDEN pid_t gettid(void) { return static_cast<pid_t>(syscall(SYS_gettid)); }

// glibc 2.30's pthread_cond_clockwait, which libstdc++'s condition_variable calls
// to wait on the steady clock. glibc 2.28 waits only on the condition's own clock
// (the realtime clock: libstdc++ never sets another): a steady deadline becomes the
// realtime moment as far away. A realtime clock stepped during the wait moves
// when it times out (earlier, or later), as it did with libstdc++ before glibc
// 2.30; a notify still wakes it, and libstdc++'s wait_until reads the steady
// clock again on waking to tell a timeout from a wake-up.
GPUTRIAGE_HIDDEN int pthread_cond_clockwait(pthread_cond_t* cond, pthread_mutex_t* mutex, clockid_t clock,
                                            const struct timespec* deadline) {
  if (clock == CLOCK_REALTIME) return pthread_cond_timedwait(cond, mutex, deadline);
  if (clock != CLOCK_MONOTONIC) return EINVAL;
  timespec now_steady{}, now_real{};
  clock_gettime(CLOCK_MONOTONIC, &now_steady);
  clock_gettime(CLOCK_REALTIME, &now_real);
  const int64_t left_ns = (static_cast<int64_t>(deadline->tv_sec) - now_steady.tv_sec) * 1000000000 +
                          (deadline->tv_nsec - now_steady.tv_nsec);
  if (left_ns <= 0) return ETIMEDOUT;
  const int64_t real_ns = static_cast<int64_t>(now_real.tv_sec) * 1000000000 + now_real.tv_nsec + left_ns;
  const timespec real_deadline{static_cast<time_t>(real_ns / 1000000000), static_cast<long>(real_ns % 1000000000)};
  return pthread_cond_timedwait(cond, mutex, &real_deadline);
}

// glibc 2.29 gave exp, exp2, log, log2 and pow new symbol versions: the same
// functions without the old SVID error-handling wrapper (matherr, gone since).
// The link renames every reference to them (-Wl,--wrap=exp, ...:
// cmake/dependencies.cmake) to these, which call the versions glibc has had since
// its first release on the architecture. Results are the same; errno is set the
// same way.
#if defined(__x86_64__)
#define GPUTRIAGE_GLIBC_FIRST "GLIBC_2.2.5"
#elif defined(__aarch64__)
#define GPUTRIAGE_GLIBC_FIRST "GLIBC_2.17"
#else
#error "the portable build knows the first glibc version of x86_64 and aarch64 only"
#endif
#define GPUTRIAGE_FIRST_VERSION_OF(fn, params, args)                             \
  double gputriage_first_##fn params;                                            \
  __asm__(".symver gputriage_first_" #fn ", " #fn "@" GPUTRIAGE_GLIBC_FIRST);      \
  GPUTRIAGE_HIDDEN double __wrap_##fn params { return gputriage_first_##fn args; }
GPUTRIAGE_FIRST_VERSION_OF(exp, (double x), (x))
GPUTRIAGE_FIRST_VERSION_OF(exp2, (double x), (x))
GPUTRIAGE_FIRST_VERSION_OF(log, (double x), (x))
GPUTRIAGE_FIRST_VERSION_OF(log2, (double x), (x))
GPUTRIAGE_FIRST_VERSION_OF(pow, (double x, double y), (x, y))

}  // extern "C"
