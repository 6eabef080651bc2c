#pragma once
// Runs gnuplot on a script the tool wrote, the one way the C++ tools call it: no shell, and every
// name that comes from a user or a file (paths, titles, planner names) reaches the script as an
// argument (gnuplot -c SCRIPT ARG1 ...: the script reads ARG1, ARGV[i] as strings), never as code.
#include <spawn.h>
#include <sys/wait.h>

#include <string>
#include <vector>

extern char** environ;

namespace sfb_tools {

// gnuplot's exit status; -1 when it could not be started (not installed).
inline int run_gnuplot(const std::string& script, const std::vector<std::string>& args) {
  std::vector<std::string> argv_s{"gnuplot", "-c", script};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  if (::posix_spawnp(&pid, "gnuplot", nullptr, nullptr, argv.data(), environ) != 0) return -1;
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return -1;
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace sfb_tools
