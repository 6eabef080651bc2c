#include "sfb/core/files.h"

#include "sfb/core/hash.h"
#include "sfb/core/memory.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <system_error>

#include <fmt/format.h>

#include "sfb/core/error.h"
#include "sfb/core/strings.h"

namespace sfb {

namespace {
FileIdentity identity_of(const struct stat& st) {
  return {static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino), static_cast<uint64_t>(st.st_size),
          static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec};
}

// What a path that is not a regular file is, in words.
const char* kind_of(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}
}  // namespace

std::string FileIdentity::describe() const {
  return fmt::format("device {} inode {}, {} bytes, modified {}.{:09d}", dev, ino, size, mtime_ns / 1000000000,
                     mtime_ns % 1000000000);
}

namespace {
// Writes all of `data` at `offset` (or appended when offset < 0); returns errno or 0.
int write_all(int fd, const char* p, size_t left, int64_t offset) {
  while (left > 0) {
    const ssize_t n = offset < 0 ? ::write(fd, p, left) : ::pwrite(fd, p, left, static_cast<off_t>(offset));
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    p += n;
    left -= static_cast<size_t>(n);
    if (offset >= 0) offset += n;
  }
  return 0;
}
}  // namespace

AtomicFileWriter::AtomicFileWriter(std::string path)
    : path_(std::move(path)), tmp_(path_ + ".tmp." + std::to_string(::getpid())) {
  fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd_ < 0) throw InvalidArgument(fmt::format("{}: cannot create: {}", tmp_, std::strerror(errno)));
}

AtomicFileWriter::~AtomicFileWriter() {
  if (fd_ < 0) return;
  ::close(fd_);
  ::unlink(tmp_.c_str());
}

void AtomicFileWriter::write(std::span<const std::byte> data) {
  SFB_ENFORCE(fd_ >= 0, "{}: written after commit", tmp_);
  if (const int err = write_all(fd_, reinterpret_cast<const char*>(data.data()), data.size(), -1))
    throw Error(fmt::format("{}: write failed: {}", tmp_, std::strerror(err)));
}

void AtomicFileWriter::write_at(int64_t offset, std::span<const std::byte> data) {
  SFB_ENFORCE(fd_ >= 0 && offset >= 0, "{}: written after commit", tmp_);
  if (const int err = write_all(fd_, reinterpret_cast<const char*>(data.data()), data.size(), offset))
    throw Error(fmt::format("{}: write failed: {}", tmp_, std::strerror(err)));
}

void AtomicFileWriter::commit() {
  const int fd = fd_;
  fd_ = -1;
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    const int err = errno;
    ::unlink(tmp_.c_str());
    throw Error(fmt::format("{}: fsync/close failed: {}", tmp_, std::strerror(err)));
  }
  // Renamed over a regular file only: a device node, FIFO or socket in its place stays (checked
  // again here: the path may have been swapped since the job claimed it).
  struct stat st {};
  if (::stat(path_.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
    ::unlink(tmp_.c_str());
    throw Error(
        fmt::format("{}: is {}, not a regular file: not replaced ({} removed)", path_, kind_of(st.st_mode), tmp_));
  }
  if (::rename(tmp_.c_str(), path_.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp_.c_str());
    throw Error(fmt::format("{}: rename to {} failed: {}", tmp_, path_, std::strerror(err)));
  }
}

void write_file_atomic(const std::string& path, std::span<const std::byte> content) {
  AtomicFileWriter out(path);
  out.write(content);
  out.commit();
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

void check_writable_directory(const std::string& dir, const std::string& key) {
  namespace fs = std::filesystem;
  fs::path p = fs::absolute(dir.empty() ? "." : dir).lexically_normal();
  std::error_code ec;
  while (!fs::exists(p, ec) && p.has_parent_path() && p.parent_path() != p) p = p.parent_path();
  SFB_CHECK(fs::is_directory(p, ec), "{}: {}: {} is not a directory", key, dir, p.string());
  SFB_CHECK(::access(p.c_str(), W_OK | X_OK) == 0, "{}: {}: {} is not writable: {}", key, dir, p.string(),
            std::strerror(errno));
}

void create_parent_directories(const std::string& path) {
  create_directories(std::filesystem::path(path).parent_path().string());
}

void check_output_is_regular(const std::string& path, const std::string& key) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return;  // a new name (or one the write will report)
  SFB_CHECK(S_ISREG(st.st_mode),
            "{}: {} is {}: an output is a regular file or a new name; it is never opened or replaced", key, path,
            kind_of(st.st_mode));
}

void prepare_output_file(const std::string& path, const std::string& key) {
  namespace fs = std::filesystem;
  const fs::path p(path);
  for (const auto& part : p)
    SFB_CHECK(part.native().size() <= 255, "{}: {}: a path component of {} characters (at most 255): {}...", key,
              excerpt(path), part.native().size(), excerpt(part.native(), 40));
  try {
    create_parent_directories(path);
  } catch (const InvalidArgument& e) {
    throw InvalidArgument(fmt::format("{}: {}", key, e.what()));
  }
  std::error_code ec;
  SFB_CHECK(!fs::is_directory(p, ec), "{}: {} is a directory, not a file name", key, path);
  check_output_is_regular(path, key);
  // Temporaries of this file that a killed writer left behind (see write_file_atomic).
  const fs::path dir = p.has_parent_path() ? p.parent_path() : fs::path(".");
  const std::string stem = p.filename().string() + ".tmp.";
  for (const auto& entry : fs::directory_iterator(dir, ec))
    if (entry.path().filename().string().rfind(stem, 0) == 0) fs::remove(entry.path(), ec);
  // Writable: the same temporary write_file_atomic will use.
  const std::string probe = path + ".tmp." + std::to_string(::getpid());
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) throw InvalidArgument(fmt::format("{}: cannot write {}: {}", key, path, std::strerror(errno)));
  ::close(fd);
  ::unlink(probe.c_str());
}

FileReader::FileReader(std::string path, std::string what) : path_(std::move(path)), what_(std::move(what)) {
  const auto refuse = [this](const struct stat& st) {
    if (S_ISREG(st.st_mode)) return;
    if (fd_ >= 0) ::close(fd_);  // a constructor that throws runs no destructor
    fd_ = -1;
    SFB_CHECK_DATA(S_ISREG(st.st_mode), "{}: cannot read {}: {}", path_, what_,
                   S_ISDIR(st.st_mode) ? "it is a directory" : kind_of(st.st_mode));
  };
  // A device or FIFO is never opened; what is opened is judged again by fstat (the path may have
  // been swapped in between), so the file checked is the file read. O_NONBLOCK: a FIFO swapped in
  // does not block the open.
  struct stat st {};
  SFB_CHECK_DATA(::stat(path_.c_str(), &st) == 0, "{}: cannot read {}: {}", path_, what_, std::strerror(errno));
  refuse(st);
  fd_ = ::open(path_.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  SFB_CHECK_DATA(fd_ >= 0, "{}: cannot read {}: {}", path_, what_, std::strerror(errno));
  if (::fstat(fd_, &st) != 0) st.st_mode = 0;
  refuse(st);
  ::fcntl(fd_, F_SETFL, ::fcntl(fd_, F_GETFL) & ~O_NONBLOCK);
  identity_ = identity_of(st);
  size_ = identity_.size;
}

void FileReader::check_identity(const FileIdentity& sealed, const std::string& when) const {
  struct stat st {};
  SFB_CHECK_DATA(::fstat(fd_, &st) == 0, "{}: cannot read {}: {}", path_, what_, std::strerror(errno));
  const FileIdentity now = identity_of(st);
  if (now == sealed) return;
  throw FileChanged(fmt::format("{}: the {} changed {} (verified: {}; now: {}): refused; nothing was loaded from it",
                                path_, what_, when, sealed.describe(), now.describe()));
}

FileReader::~FileReader() {
  if (fd_ >= 0) ::close(fd_);
}

void FileReader::read(std::span<std::byte> out, const char* field) {
  size_t got = 0;
  while (got < out.size()) {
    const ssize_t n = ::read(fd_, out.data() + got, out.size() - got);
    if (n < 0 && errno == EINTR) continue;
    SFB_CHECK_DATA(n >= 0, "{}: cannot read {}: {}", path_, what_, std::strerror(errno));
    SFB_CHECK_DATA(n > 0, "{}: {} is truncated: {} ends at byte {}", path_, what_, field, pos_ + got);
    got += static_cast<size_t>(n);
  }
  pos_ += got;
}

Bytes FileReader::read_head(size_t bytes) {
  Bytes out(static_cast<size_t>(std::min<uint64_t>(bytes, size_ - std::min(size_, pos_))));
  read(out, "the header");
  return out;
}

uint32_t FileReader::crc32_of_next(uint64_t bytes, uint32_t running, const char* field) {
  Bytes block(std::size_t{1} << 20);
  for (uint64_t left = bytes; left > 0;) {
    const auto n = static_cast<size_t>(std::min<uint64_t>(left, block.size()));
    read(std::span(block).first(n), field);
    running = crc32(std::span<const std::byte>(block).first(n), running);
    left -= n;
  }
  return running;
}

void seal_or_check(FileSeal& seal, const FileReader& in, const Bytes& header) {
  if (seal.empty()) {
    seal = {in.identity(), header};
    return;
  }
  in.check_identity(seal.identity, "after it was verified");
  if (header != seal.header)
    throw FileChanged(
        fmt::format("{}: the file changed after it was verified (its header differs): refused; nothing "
                    "was loaded from it",
                    in.path()));
}

void check_sealed(const std::string& path, const std::string& what, const FileSeal& seal) {
  FileReader in(path, what);
  FileSeal copy = seal;
  seal_or_check(copy, in, in.read_head(seal.header.size()));
}

Bytes read_file(const std::string& path, const std::string& what, int64_t max_bytes) {
  FileReader in(path, what);
  SFB_CHECK_DATA(max_bytes < 0 || in.size() <= static_cast<uint64_t>(max_bytes),
                 "{}: the {} is {} bytes, more than the {} a {} may have: not read", path, what, in.size(), max_bytes,
                 what);
  // A file is read whole into memory: one larger than this process can allocate is refused by its
  // size, before anything is allocated, naming it (a model, checkpoint or CNN file).
  const int64_t available = available_memory_bytes(1);
  SFB_CHECK_DATA(available <= 0 || in.size() <= static_cast<uint64_t>(available),
                 "{}: the {} is {:.1f} GiB, more than this process can allocate ({:.1f} GiB): not read", path, what,
                 static_cast<double>(in.size()) / (1 << 30), static_cast<double>(available) / (1 << 30));
  Bytes out(static_cast<size_t>(in.size()));
  in.read(out, "its data");
  return out;
}

DirectoryLock::DirectoryLock(const std::string& dir) {
  path_ = (std::filesystem::path(dir) / ".sfbd.lock").string();
  fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0)
    throw InvalidArgument(fmt::format("output.dir {}: cannot create {}: {}", dir, path_, std::strerror(errno)));
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    char holder[256] = {0};
    const ssize_t n = ::pread(fd_, holder, sizeof(holder) - 1, 0);
    ::close(fd_);
    fd_ = -1;
    throw InvalidArgument(
        fmt::format("output.dir {} is in use by another sfbd job ({}); give this job another "
                    "output.dir (and output paths outside it) or wait for that one to end",
                    dir, n > 0 ? excerpt(std::string(holder, static_cast<size_t>(n))) : "holder unknown"));
  }
  char host[256] = {0};
  ::gethostname(host, sizeof(host) - 1);
  const std::string me = fmt::format("process {} on host {}", ::getpid(), host);
  if (::ftruncate(fd_, 0) == 0 && ::pwrite(fd_, me.data(), me.size(), 0) < 0) {
    // Naming the holder is a courtesy; the lock itself is what counts.
  }
}

DirectoryLock::~DirectoryLock() {
  if (fd_ < 0) return;
  // Unlinked while still locked: a job that opens the name meanwhile finds it locked and fails
  // (LOCK_NB), one that opens it afterwards creates a new file. Then close releases the flock.
  ::unlink(path_.c_str());
  ::close(fd_);
}

}  // namespace sfb
