#pragma once
// Files that must never be seen half-written: results, checkpoints, models.
#include <cstddef>
#include <functional>
#include <span>
#include <string>

namespace sfb {

// Writes `content` to `path` atomically: a temporary file in the same directory, fsync, rename.
// On any failure the temporary is removed and `path` is left as it was.
void write_file_atomic(const std::string& path, std::span<const std::byte> content);
void write_file_atomic(const std::string& path, const std::string& content);

// Calls fn(line, lineno) for every line of the text file `path` (lines numbered from 1), skipping
// blank lines and lines whose first non-blank character is '#'. Throws DataError
// "<path>: cannot open <what>: <reason>" when the file cannot be read.
void for_each_line(const std::string& path, const std::string& what,
                   const std::function<void(const std::string& line, int lineno)>& fn);

// Creates directory `dir` (and its parents), or the one that will hold file `path`; throws
// InvalidArgument naming the directory and the reason when it cannot.
void create_directories(const std::string& dir);
void create_parent_directories(const std::string& path);

}  // namespace sfb
