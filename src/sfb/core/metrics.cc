#include "sfb/core/metrics.h"

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "sfb/core/error.h"
#include "sfb/core/json.h"

namespace sfb {

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
  for (const auto& [k, v] : r.extra) j[k] = sig(v, 8);  // a non-finite value is written as null
  return to_line(j);
}

void JsonlWriter::open(const std::string& path) {
  if (f_) std::fclose(f_);
  path_ = path;
  f_ = std::fopen(path.c_str(), "w");
  if (!f_) throw InvalidArgument(fmt::format("{}: cannot open for writing: {}", path, std::strerror(errno)));
}

JsonlWriter::~JsonlWriter() {
  if (f_) std::fclose(f_);
}

void JsonlWriter::write(const std::string& line) {
  if (!f_) return;
  if (std::fputs(line.c_str(), f_) < 0 || std::fputc('\n', f_) < 0 || std::fflush(f_) != 0)
    throw Error(fmt::format("{}: write failed: {}", path_, std::strerror(errno)));
}

}  // namespace sfb
