#include "sfb/core/metrics.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "sfb/core/error.h"
#include "sfb/core/files.h"
#include "sfb/core/json.h"

namespace sfb {

namespace {
// `path` opened for writing as a regular file or a new one: a FIFO, device or socket in its place is
// refused (InvalidArgument naming it) without blocking on it or truncating it.
int open_regular_for_writing(const std::string& path) {
  check_output_is_regular(path, path);
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_NONBLOCK | O_CLOEXEC, 0644);
  if (fd < 0) throw InvalidArgument(fmt::format("{}: cannot open for writing: {}", path, std::strerror(errno)));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw InvalidArgument(fmt::format("{}: not a regular file: not written", path));
  }
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  return fd;
}
}  // namespace

std::string to_json(const EvalRecord& r) {
  Json j{{"clock", r.clock},
         {"seconds", fixed(r.seconds, 6)},
         {"objective", sig(r.objective, 8)},
         {"accuracy", fixed(r.accuracy, 6)},
         {"samples_per_s", fixed(r.samples_per_s, 3)},
         {"bytes_sent", r.bytes_sent},
         {"bytes_received", r.bytes_received},
         {"compute_s", fixed(r.compute_s, 6)},
         {"update_s", fixed(r.update_s, 6)},
         {"wait_s", fixed(r.wait_s, 6)},
         {"replica_drift", sig(r.replica_drift, 6)},
         {"replica_drift_clock", r.replica_drift_clock >= 0 ? Json(r.replica_drift_clock) : Json(nullptr)}};
  if (r.attempt_seconds >= 0) j["attempt_seconds"] = fixed(r.attempt_seconds, 6);
  for (const auto& [k, v] : r.extra) j[k] = sig(v, 8);  // a non-finite value is written as null
  return to_line(j);
}

void JsonlWriter::open(const std::string& path) {
  close();
  path_ = path;
  fd_ = open_regular_for_writing(path);
  if (::ftruncate(fd_, 0) != 0) {
    const int err = errno;
    close();
    throw InvalidArgument(fmt::format("{}: cannot truncate: {}", path, std::strerror(err)));
  }
  size_ = 0;
}

void JsonlWriter::open_continuing(const std::string& path, int64_t from_clock) {
  close();
  path_ = path;
  continued_seconds_ = 0;
  int64_t keep = 0;
  check_output_is_regular(path, path);  // before the read below: a FIFO would block it
  if (std::ifstream in(path, std::ios::binary); in) {
    std::string line;
    while (std::getline(in, line) && !in.eof()) {  // a last line without its newline is incomplete
      const Json j = Json::parse(line, nullptr, false);
      if (j.is_discarded() || !j.is_object()) break;
      const auto c = j.contains("clock") ? j["clock"] : j.contains("iteration") ? j["iteration"] : Json();
      if (!c.is_number_integer() || c.get<int64_t>() >= from_clock) break;
      keep += static_cast<int64_t>(line.size()) + 1;
      if (j.contains("seconds") && j["seconds"].is_number()) continued_seconds_ = j["seconds"].get<double>();
    }
  }
  fd_ = open_regular_for_writing(path);
  if (::ftruncate(fd_, static_cast<off_t>(keep)) != 0) {
    const int err = errno;
    close();
    throw Error(fmt::format("{}: cannot cut back to clock {}: {}", path, from_clock, std::strerror(err)));
  }
  size_ = keep;
}

void JsonlWriter::write_or_stop(const std::string& line) {
  try {
    write(line);
  } catch (const Error& e) {
    spdlog::error(
        "{}; no more metrics lines are written (the file ends with the last complete line); training "
        "continues",
        e.what());
    close();
  }
}

void JsonlWriter::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

JsonlWriter::~JsonlWriter() { close(); }

void JsonlWriter::write(const std::string& line) {
  if (fd_ < 0) return;
  const std::string text = line + "\n";
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n =
        ::pwrite(fd_, text.data() + done, text.size() - done, static_cast<off_t>(size_) + static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = n < 0 ? errno : ENOSPC;
      // Never leave half a line: cut the file back to its last complete line.
      const bool cut = ::ftruncate(fd_, static_cast<off_t>(size_)) == 0;
      throw Error(fmt::format("{}: write failed: {}{}", path_, std::strerror(err),
                              cut ? "" : " (and the partial line could not be removed)"));
    }
    done += static_cast<size_t>(n);
  }
  size_ += static_cast<int64_t>(text.size());
}

}  // namespace sfb
