#include "sfb/core/metrics.h"

#include <cmath>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "sfb/core/error.h"

namespace sfb {

std::string to_json(const EvalRecord& r) {
  std::string extra;
  for (const auto& [k, v] : r.extra) {
    // JSON has no NaN or infinity: such a value is written as null.
    if (std::isfinite(v)) extra += fmt::format(", \"{}\": {:.8g}", k, v);
    else extra += fmt::format(", \"{}\": null", k);
  }
  return fmt::format(
      "{{\"clock\": {}, \"seconds\": {:.6f}, \"objective\": {:.8g}, \"accuracy\": {:.6f}, "
      "\"samples_per_s\": {:.3f}, \"bytes_sent\": {}, \"bytes_received\": {}, "
      "\"compute_s\": {:.6f}, \"update_s\": {:.6f}, \"wait_s\": {:.6f}{}}}",
      r.clock, r.seconds, r.objective, r.accuracy, r.samples_per_s, r.bytes_sent, r.bytes_received,
      r.compute_s, r.update_s, r.wait_s, extra);
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
