#pragma once
// The named interconnects both predictors know (sfb-plan and comm.scheme = "auto" for the matrix
// models, mgwfbp-plan and the CNN simulator for MG-WFBP): one catalogue, so "10gbe" means the
// same link in both. A link's message of M bytes takes a_us + M b_us_per_byte point to point, b at
// the line rate.
#include <string>
#include <vector>

namespace sfb {

struct NamedLink {
  std::string name;
  double gbit_s = 0.0;         // line rate
  double a_us = 0.0;           // one message's start-up through a switch
  double b_us_per_byte = 0.0;  // 8 / (gbit_s 1e3)
  std::string source;          // where a_us comes from
};

const std::vector<NamedLink>& link_catalogue();
// InvalidArgument naming `name` and every known link otherwise.
const NamedLink& find_link(const std::string& name);
std::vector<std::string> link_names();

}  // namespace sfb
