#include "sfb/core/files.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <system_error>

#include <fmt/format.h>

#include "sfb/core/error.h"

namespace sfb {

void write_file_atomic(const std::string& path, std::span<const std::byte> content) {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) throw InvalidArgument(fmt::format("{}: cannot create: {}", tmp, std::strerror(errno)));
  const auto* p = reinterpret_cast<const char*>(content.data());
  size_t left = content.size();
  while (left > 0) {
    const ssize_t n = ::write(fd, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      throw Error(fmt::format("{}: write failed: {}", tmp, std::strerror(err)));
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    throw Error(fmt::format("{}: fsync/close failed: {}", tmp, std::strerror(err)));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    throw Error(fmt::format("{}: rename to {} failed: {}", tmp, path, std::strerror(err)));
  }
}

void write_file_atomic(const std::string& path, const std::string& content) {
  write_file_atomic(path, std::as_bytes(std::span(content.data(), content.size())));
}

void for_each_line(const std::string& path, const std::string& what,
                   const std::function<void(const std::string& line, int lineno)>& fn) {
  std::ifstream in(path);
  SFB_CHECK_DATA(in.good(), "{}: cannot open {}: {}", path, what, std::strerror(errno));
  std::string line;
  for (int lineno = 1; std::getline(in, line); ++lineno) {
    const auto first = line.find_first_not_of(" \t\r");
    if (first != std::string::npos && line[first] != '#') fn(line, lineno);
  }
}

void create_directories(const std::string& dir) {
  if (dir.empty()) return;
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw InvalidArgument(fmt::format("{}: cannot create directory: {}", dir, ec.message()));
}

void create_parent_directories(const std::string& path) {
  create_directories(std::filesystem::path(path).parent_path().string());
}

}  // namespace sfb
