/* Test-only LD_PRELOAD library: simulates a full disk and signals that arrive in the middle of an export.
 *
 * Counts the bytes written to regular files (never to terminals, pipes or sockets) and, from the
 * environment:
 *   SPARGE_FAULT_ENOSPC_AFTER=N   writes fail with ENOSPC once N bytes were written (a disk that fills up)
 *   SPARGE_FAULT_SIGNAL_AFTER=N   the process sends itself SPARGE_FAULT_SIGNAL (default SIGKILL) once N
 *                                 bytes were written (killed mid-write)
 *   SPARGE_FAULT_SIGNAL_AT_RENAME=1  the signal is sent just before rename() (killed while the finished
 *                                 file is moved into place)
 *   SPARGE_FAULT_RENAME_MS=N      every rename() takes N ms more (a slow disk)
 *   SPARGE_FAULT_RENAME_LOG=FILE  every rename() appends its target to FILE (how often a file was replaced)
 *   SPARGE_FAULT_THREADS_AFTER=N  pthread_create fails with EAGAIN once N threads were started (a process or
 *                                 address-space limit reached)
 * Deterministic: the same variables give the same failure point on every run.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

static long long written;

static long long envNumber(const char* name) {
  const char* v = getenv(name);
  return v && *v ? atoll(v) : -1;
}

static int faultSignal(void) {
  const long long s = envNumber("SPARGE_FAULT_SIGNAL");
  return s > 0 ? (int)s : SIGKILL;
}

static int isRegularFile(int fd) {
  struct stat st;
  return fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
}

/* Returns how many of `want` bytes may be written now (0 with errno = ENOSPC when the disk is full). */
static size_t allowance(int fd, size_t want) {
  if (!isRegularFile(fd)) return want;
  const long long signalAfter = envNumber("SPARGE_FAULT_SIGNAL_AFTER");
  if (signalAfter >= 0 && written + (long long)want > signalAfter) raise(faultSignal());
  const long long full = envNumber("SPARGE_FAULT_ENOSPC_AFTER");
  if (full < 0) return want;
  if (written >= full) {
    errno = ENOSPC;
    return 0;
  }
  return written + (long long)want > full ? (size_t)(full - written) : want;
}

ssize_t write(int fd, const void* buf, size_t count) {
  static ssize_t (*real)(int, const void*, size_t);
  if (!real) real = (ssize_t(*)(int, const void*, size_t))dlsym(RTLD_NEXT, "write");
  const size_t n = allowance(fd, count);
  if (count > 0 && n == 0) return -1;
  const ssize_t r = real(fd, buf, n);
  if (r > 0 && isRegularFile(fd)) written += r;
  return r;
}

ssize_t pwrite64(int fd, const void* buf, size_t count, off_t offset) {
  static ssize_t (*real)(int, const void*, size_t, off_t);
  if (!real) real = (ssize_t(*)(int, const void*, size_t, off_t))dlsym(RTLD_NEXT, "pwrite64");
  const size_t n = allowance(fd, count);
  if (count > 0 && n == 0) return -1;
  const ssize_t r = real(fd, buf, n, offset);
  if (r > 0 && isRegularFile(fd)) written += r;
  return r;
}

ssize_t pwrite(int fd, const void* buf, size_t count, off_t offset) {
  return pwrite64(fd, buf, count, offset);
}

ssize_t writev(int fd, const struct iovec* iov, int iovcnt) {
  /* One piece at a time, so that the byte limits apply exactly (libstdc++ streams use writev). */
  ssize_t total = 0;
  for (int i = 0; i < iovcnt; ++i) {
    const ssize_t r = write(fd, iov[i].iov_base, iov[i].iov_len);
    if (r < 0) return total > 0 ? total : -1;
    total += r;
    if ((size_t)r < iov[i].iov_len) break;
  }
  return total;
}

int rename(const char* from, const char* to) {
  static int (*real)(const char*, const char*);
  if (!real) real = (int (*)(const char*, const char*))dlsym(RTLD_NEXT, "rename");
  if (envNumber("SPARGE_FAULT_SIGNAL_AT_RENAME") > 0) raise(faultSignal());
  const long long ms = envNumber("SPARGE_FAULT_RENAME_MS");
  if (ms > 0) {
    const struct timespec t = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    nanosleep(&t, NULL);
  }
  const char* log = getenv("SPARGE_FAULT_RENAME_LOG");
  if (log && *log) {
    FILE* f = fopen(log, "a");
    if (f) {
      fprintf(f, "%s\n", to);
      fclose(f);
    }
  }
  return real(from, to);
}

int pthread_create(pthread_t* thread, const pthread_attr_t* attr, void* (*start)(void*), void* arg) {
  static int (*real)(pthread_t*, const pthread_attr_t*, void* (*)(void*), void*);
  static long long started;
  if (!real)
    real = (int (*)(pthread_t*, const pthread_attr_t*, void* (*)(void*), void*))dlsym(RTLD_NEXT,
                                                                                      "pthread_create");
  const long long limit = envNumber("SPARGE_FAULT_THREADS_AFTER");
  if (limit >= 0 && __atomic_fetch_add(&started, 1, __ATOMIC_SEQ_CST) >= limit) return EAGAIN;
  return real(thread, attr, start, arg);
}
