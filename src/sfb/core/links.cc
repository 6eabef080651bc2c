#include "sfb/core/links.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "sfb/core/error.h"

namespace sfb {
namespace {

NamedLink make(const char* name, double gbit, double a_us, const char* source) {
  return NamedLink{name, gbit, a_us, 8.0 / (gbit * 1e3), source};
}

}  // namespace

const std::vector<NamedLink>& link_catalogue() {
  // 10 GbE and FDR InfiniBand: the start-ups of the MG-WFBP authors' 8-node clusters (a ring
  // all-reduce's 523 us and 97.5 us start-up over its 2 (N - 1) = 14 steps); the others a TCP
  // message through one switch, by the same ratio to the line rate's generation.
  static const std::vector<NamedLink> links = {
      make("1gbe", 1, 50, "one TCP message through a 1 GbE switch"),
      make("10gbe", 10, 523.03 / 14.0, "MG-WFBP's 8-node 10 GbE cluster: 523 us ring start-up / 14 steps"),
      make("25gbe", 25, 10, "one TCP message through a 25 GbE switch"),
      make("ib", 56, 97.537 / 14.0, "MG-WFBP's 8-node FDR InfiniBand cluster: 97.5 us ring start-up / 14 steps"),
      make("100gbe", 100, 5, "one RoCE/TCP message through a 100 GbE switch"),
  };
  return links;
}

std::vector<std::string> link_names() {
  std::vector<std::string> out;
  for (const auto& l : link_catalogue()) out.push_back(l.name);
  return out;
}

const NamedLink& find_link(const std::string& name) {
  for (const auto& l : link_catalogue())
    if (l.name == name) return l;
  throw InvalidArgument(fmt::format("unknown link \"{}\"; links are {}", name, fmt::join(link_names(), ", ")));
}

}  // namespace sfb
