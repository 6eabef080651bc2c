#pragma once
// Files that must never be seen half-written: results, checkpoints, models.
#include <cstddef>
#include <functional>
#include <span>
#include <string>

#include "sfb/core/bytes.h"

namespace sfb {

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

// Before a job writes `path` (atomically, write_file_atomic): creates its directory, removes the
// temporaries a killed writer left there (<path>.tmp.<pid>), and proves it writable by creating
// and removing one. Throws InvalidArgument naming `key` (the config key), the path and the reason
// (not a directory, read-only, no space, a directory in the file's place, a name too long).
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
  // Exactly out.size() bytes from where the last read ended; throws DataError naming `field` when the
  // file ends first.
  void read(std::span<std::byte> out, const char* field);
  // The first `bytes` bytes (or the whole file when shorter: the caller's header check names it).
  Bytes read_head(size_t bytes);

 private:
  std::string path_, what_;
  int fd_ = -1;
  uint64_t size_ = 0, pos_ = 0;
};

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
