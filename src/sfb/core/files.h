#pragma once
// Files that must never be seen half-written: results, checkpoints, models.
#include <cstddef>
#include <functional>
#include <span>
#include <string>

#include "sfb/core/bytes.h"
#include "sfb/core/error.h"

namespace sfb {

// What tells one file's contents from another's without reading them: device, inode, size and
// modification time (ns). A file replaced (renamed over) or rewritten in place has another.
struct FileIdentity {
  uint64_t dev = 0, ino = 0, size = 0;
  int64_t mtime_ns = 0;
  bool operator==(const FileIdentity&) const = default;
  std::string describe() const;  // "device D inode I, N bytes, modified T"
};

// A file read twice (checked, then used) that is not the one checked: its identity or its header
// differs. Bad input (sfbd exits 2 naming it), never a crash: nothing of the second read is used.
class FileChanged : public DataError {
 public:
  using DataError::DataError;
};

// What a first read of a file verified: its identity and its header's bytes. A second read given a
// filled seal refuses (FileChanged) a file that is not that one.
struct FileSeal {
  FileIdentity identity;
  Bytes header;
  bool empty() const { return header.empty(); }
};

// Writes `content` to `path` atomically: a temporary file in the same directory, fsync, rename.
// On any failure the temporary is removed and `path` is left as it was.
void write_file_atomic(const std::string& path, std::span<const std::byte> content);
void write_file_atomic(const std::string& path, const std::string& content);

// A file written as a stream, atomically: bytes go to <path>.tmp.<pid>; commit() fsyncs it and
// renames it to `path`. Until commit() succeeds `path` is untouched, and a writer destroyed
// without commit() (an exception, a full disk) removes its temporary. Large files (checkpoints,
// model files) are written through it block by block, never assembled in memory.
class AtomicFileWriter {
 public:
  // Throws InvalidArgument naming the temporary when it cannot be created.
  explicit AtomicFileWriter(std::string path);
  ~AtomicFileWriter();
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;
  // Appends; throws Error naming the temporary on a write error.
  void write(std::span<const std::byte> data);
  // Overwrites already written bytes at `offset` (a header field known only at the end).
  void write_at(int64_t offset, std::span<const std::byte> data);
  void commit();

 private:
  std::string path_, tmp_;
  int fd_ = -1;
};

// Calls fn(line, lineno) for every line of the text file `path` (lines numbered from 1), skipping
// blank lines and lines whose first non-blank character is '#'. Throws DataError
// "<path>: cannot open <what>: <reason>" when the file cannot be read.
void for_each_line(const std::string& path, const std::string& what,
                   const std::function<void(const std::string& line, int lineno)>& fn);

// Creates directory `dir` (and its parents), or the one that will hold file `path`; throws
// InvalidArgument naming the directory and the reason when it cannot.
void create_directories(const std::string& dir);
void create_parent_directories(const std::string& path);
// Without creating anything: `dir` is a writable directory, or the directory it would be created
// in (its nearest existing ancestor) is. Throws InvalidArgument naming `key`, the path and why not.
void check_writable_directory(const std::string& dir, const std::string& key);

// An output path must be a regular file or a new name: throws InvalidArgument naming `key` and what
// the path is (a FIFO, a character or block device, a socket, a directory) otherwise. A symlink is
// judged by what it points to. Renaming over such a path would replace it (a device node), and
// opening a FIFO blocks.
void check_output_is_regular(const std::string& path, const std::string& key);

// Before a job writes `path` (atomically, write_file_atomic): creates its directory, removes the
// temporaries a killed writer left there (<path>.tmp.<pid>), and proves it writable by creating
// and removing one. Throws InvalidArgument naming `key` (the config key), the path and the reason
// (not a directory, read-only, no space, a directory, FIFO, device or socket in the file's place, a
// name too long).
void prepare_output_file(const std::string& path, const std::string& key);

// The whole contents of a regular file; throws DataError "<path>: cannot read <what>: <reason>"
// (also for a directory or a device).
// `max_bytes` >= 0 refuses a larger file by its size, before reading (a JSON document, a profile).
Bytes read_file(const std::string& path, const std::string& what, int64_t max_bytes = -1);

// A regular file read as a stream (checkpoints and model files, which may be larger than what a
// process can hold twice). Throws DataError "<path>: cannot read <what>: <reason>".
class FileReader {
 public:
  FileReader(std::string path, std::string what);
  ~FileReader();
  FileReader(const FileReader&) = delete;
  FileReader& operator=(const FileReader&) = delete;
  uint64_t size() const { return size_; }
  const std::string& path() const { return path_; }
  // The file as it was opened.
  const FileIdentity& identity() const { return identity_; }
  // Throws FileChanged naming the file when what is open now is not `sealed` (by fstat: a file
  // written in place while it was read has another size or mtime). `what` says when.
  void check_identity(const FileIdentity& sealed, const std::string& when) const;
  // Exactly out.size() bytes from where the last read ended; throws DataError naming `field` when the
  // file ends first.
  void read(std::span<std::byte> out, const char* field);
  // The first `bytes` bytes (or the whole file when shorter: the caller's header check names it).
  Bytes read_head(size_t bytes);
  // The CRC-32 (core/hash.h) of the next `bytes` bytes, continuing `running`, read in 1 MiB blocks:
  // how a checkpoint's or model file's damaged header is told from damaged data.
  uint32_t crc32_of_next(uint64_t bytes, uint32_t running, const char* field);

 private:
  std::string path_, what_;
  int fd_ = -1;
  uint64_t size_ = 0, pos_ = 0;
  FileIdentity identity_;
};

// A second read of a file a first one verified (FileSeal): fills an empty `seal` from `in` and its
// `header`, or throws FileChanged naming the file when `in` or `header` is not what it holds.
void seal_or_check(FileSeal& seal, const FileReader& in, const Bytes& header);
// The same without reading the data: opens `path` and compares its identity and header with `seal`
// (the check before a read whose blocks cannot be taken back has begun).
void check_sealed(const std::string& path, const std::string& what, const FileSeal& seal);

// An exclusive claim on a directory for as long as this object lives (flock on <dir>/.sfbd.lock,
// which the kernel releases when the process ends, however it ends): two jobs writing one output
// directory would interleave metrics lines and overwrite each other's model. The lock file names
// the holder (pid, host) and is removed when the claim ends normally (a crash leaves it, unlocked:
// the next job takes it over).
class DirectoryLock {
 public:
  // Throws InvalidArgument naming the directory and the holder when another process has it.
  explicit DirectoryLock(const std::string& dir);
  ~DirectoryLock();
  DirectoryLock(const DirectoryLock&) = delete;
  DirectoryLock& operator=(const DirectoryLock&) = delete;

 private:
  int fd_ = -1;
  std::string path_;
};

}  // namespace sfb
