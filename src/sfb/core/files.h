#pragma once
// Files that must never be seen half-written: results, checkpoints, models.
#include <cstddef>
#include <span>
#include <string>

namespace sfb {

// Writes `content` to `path` atomically: a temporary file in the same directory, fsync, rename.
// On any failure the temporary is removed and `path` is left as it was.
void write_file_atomic(const std::string& path, std::span<const std::byte> content);
void write_file_atomic(const std::string& path, const std::string& content);

// Creates directory `dir` (and its parents), or the one that will hold file `path`; throws
// InvalidArgument naming the directory and the reason when it cannot.
void create_directories(const std::string& dir);
void create_parent_directories(const std::string& path);

}  // namespace sfb
