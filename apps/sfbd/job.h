#pragma once
// What sfbd's two training modes share: the MPI session, the transport, the resolved config, and
// the exit codes (README: 0 success, 2 bad input, 3 a rank failed, 4 diverged).
#include <functional>
#include <memory>
#include <string>

#include "sfb/comm/mpi_session.h"
#include "sfb/comm/transport.h"
#include "sfb/core/config.h"

namespace sfbd {

inline constexpr int kExitOk = 0;
inline constexpr int kExitBadInput = 2;
inline constexpr int kExitFailed = 3;
inline constexpr int kExitDiverged = 4;

struct Job {
  sfb::Config cfg;  // after --set overrides, with runtime.threads resolved
  sfb::comm::MpiSession& mpi;
  std::unique_ptr<sfb::comm::Transport> transport;
  std::string resume_path;  // --resume
  int rank() const { return mpi.rank(); }
  int ranks() const { return mpi.size(); }
};

// Runs `step` on every rank. When it throws sfb::Error on any rank, every rank learns it, the
// failing ranks print their message (only rank 0 when `root_reports`: the error is the same
// everywhere) and false is returned: the caller exits with kExitBadInput.
bool all_ranks_ok(const sfb::comm::MpiSession& mpi, const std::function<void()>& step, bool root_reports = false);

// job.mode = "sfb" (sfb_job.cc) and "mgwfbp" (cnn_job.cc); each returns the exit code.
int run_sfb(Job& job);
int run_cnn(Job& job);

}  // namespace sfbd
