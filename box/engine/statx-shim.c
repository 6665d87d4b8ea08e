/*
 * Preloaded into every process of a box (the image's LD_PRELOAD, set when it was built): Debian 12's gVisor
 * (runsc 0.0~20221219, the runtime roster picks where it is registered) refuses the AT_NO_AUTOMOUNT
 * flag in statx and newfstatat with EINVAL, and coreutils passes it — so `ls`, `stat` and `du` fail in
 * a box under it ("cannot access '/tmp': Invalid argument"). This drops the flag, which means nothing
 * in a box (it has no automount points), and calls the kernel (or gVisor) directly. Under runc, or a
 * gVisor that accepts the flag, it changes nothing.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

int statx(int dirfd, const char *path, int flags, unsigned int mask, struct statx *buf) {
  return (int)syscall(SYS_statx, dirfd, path, flags & ~AT_NO_AUTOMOUNT, mask, buf);
}

int fstatat(int dirfd, const char *path, struct stat *buf, int flags) {
  return (int)syscall(SYS_newfstatat, dirfd, path, buf, flags & ~AT_NO_AUTOMOUNT);
}

int fstatat64(int dirfd, const char *path, struct stat64 *buf, int flags) {
  /* On 64-bit Linux a stat64 is a stat (both the kernel's). */
  return (int)syscall(SYS_newfstatat, dirfd, path, buf, flags & ~AT_NO_AUTOMOUNT);
}
