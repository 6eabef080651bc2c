// LD_PRELOAD shim for the hostile tests (issue 69): a file that changes between the read that checks
// it and the read that uses it. On the SFB_SWAP_AT-th open (1-based, default 2) of the path
// SFB_SWAP_PATH, before that open runs, the file SFB_SWAP_WITH replaces it: renamed over it
// (SFB_SWAP_MODE=rename, the default: a new inode) or copied into it in place (inplace: the same
// inode, new contents and mtime). Every other open passes through untouched.
#include <dlfcn.h>
#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

using OpenFn = int (*)(const char*, int, ...);
std::atomic<int> opens{0};

OpenFn real(const char* name) { return reinterpret_cast<OpenFn>(dlsym(RTLD_NEXT, name)); }

void copy_in_place(const char* from, const char* to) {
  const int in = real("open")(from, O_RDONLY);
  const int out = real("open")(to, O_WRONLY | O_TRUNC);
  char buf[65536];
  for (ssize_t n; in >= 0 && out >= 0 && (n = ::read(in, buf, sizeof(buf))) > 0;)
    if (::write(out, buf, static_cast<size_t>(n)) != n) break;
  if (in >= 0) ::close(in);
  if (out >= 0) ::close(out);
}

void maybe_swap(const char* path) {
  const char* target = std::getenv("SFB_SWAP_PATH");
  const char* with = std::getenv("SFB_SWAP_WITH");
  if (!target || !with || !path || std::strcmp(path, target) != 0) return;
  const char* at = std::getenv("SFB_SWAP_AT");
  if (++opens != (at ? std::atoi(at) : 2)) return;
  const char* mode = std::getenv("SFB_SWAP_MODE");
  if (mode && std::strcmp(mode, "inplace") == 0)
    copy_in_place(with, target);
  else
    std::rename(with, target);
  std::fprintf(stderr, "swap_on_open: %s replaced by %s before open %d\n", target, with, opens.load());
}

int forward(const char* name, const char* path, int flags, va_list ap) {
  maybe_swap(path);
  const mode_t mode = (flags & (O_CREAT | O_TMPFILE)) ? static_cast<mode_t>(va_arg(ap, int)) : 0;
  return real(name)(path, flags, mode);
}

}  // namespace

extern "C" {
int open(const char* path, int flags, ...) {
  va_list ap;
  va_start(ap, flags);
  const int fd = forward("open", path, flags, ap);
  va_end(ap);
  return fd;
}
int open64(const char* path, int flags, ...) {
  va_list ap;
  va_start(ap, flags);
  const int fd = forward("open64", path, flags, ap);
  va_end(ap);
  return fd;
}
}
