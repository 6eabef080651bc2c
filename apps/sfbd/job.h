#pragma once
// What sfbd's two training modes share: the MPI session, the transport, the resolved config, and
// the exit codes (README: 0 success, 2 bad input, 3 a rank failed, 4 diverged).
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "sfb/comm/allreduce.h"
#include "sfb/comm/mpi_session.h"
#include "sfb/comm/transport.h"
#include "sfb/core/config.h"
#include "sfb/core/files.h"
#include "watchdog.h"

namespace sfbd {

inline constexpr int kExitOk = 0;
inline constexpr int kExitBadInput = 2;
inline constexpr int kExitFailed = 3;
inline constexpr int kExitDiverged = 4;

// One setting sfbd resolved after parsing: the key, what the parsed config said, what the job runs
// with, and why (plan.json beside config.resolved.toml).
struct Decision {
  std::string key, given, resolved, why;
};

struct Job {
  // The job's plan: the parsed config (--set overrides applied), then changed only by decide(), so
  // every setting sfbd resolves (auto, a rank count's rule, the learning-rate search) is recorded.
  sfb::Config cfg;
  sfb::comm::MpiSession& mpi;
  Watchdog& watchdog;
  std::unique_ptr<sfb::comm::Transport> transport;
  std::string resume_path;   // --resume
  std::string profile_path;  // --profile: claimed and proven writable with the outputs, before any work
  // Rank 0, for the whole job: output.dir and every other directory an output path names.
  std::vector<std::unique_ptr<sfb::DirectoryLock>> output_locks;
  bool check_only = false;  // --check: validate everything, train nothing
  bool find_lr = false;     // --find-lr: the learning-rate search only (sfb_job.cc)
  int rank() const { return mpi.rank(); }
  int ranks() const { return mpi.size(); }
  // Arms the watchdog for a stage that waits on the peers (runtime.peer_timeout_s), plus `work_s`
  // for a stage with bounded work of its own between its waits (the scheme profile's budget).
  [[nodiscard]] Watchdog::Guard waiting_on_peers(std::string stage, double work_s = 0) {
    const double t = cfg.runtime.peer_timeout_s;
    return watchdog.guard(std::move(stage), t + work_s,
                          work_s > 0 ? fmt::format("runtime.peer_timeout_s = {} s and {} s of its own work", t, work_s)
                                     : std::string("runtime.peer_timeout_s"));
  }
  // Runs `step` on every rank. When it throws sfb::Error (or runs out of memory) on any rank,
  // every rank learns it, the lowest failing rank prints its message once (with how many other
  // ranks failed) and false is returned: the caller exits with failure_exit(). `stage` names the
  // agreement for the watchdog.
  bool all_ok(const std::string& stage, const std::function<void()>& step);
  // The exit code of the last all_ok that failed: kExitFailed when a rank's error was the network's
  // (sfb::CommError: a peer died or went silent), else kExitBadInput.
  int failure_exit() const { return comm_failed ? kExitFailed : kExitBadInput; }
  // Rank 0, before training: claims output.dir (a lock against a second job), removes temporaries a
  // killed job left and proves every file this job will write writable, so no trained model is
  // lost to an output path. Throws InvalidArgument naming the key and path.
  // Under --check nothing is created or locked: output.dir (or the directory it would be made in)
  // must be a writable directory.
  void claim_outputs();
  // Rank 0, once the name of an output is known only after the inputs are read (a resumed CNN run's
  // trace, <trace>.from-F.json): claimed like the others. Refused (InvalidArgument naming `key`)
  // when it is another output's file, the checkpoint it resumes from, or not a regular file.
  void claim_output(const std::string& path, const std::string& key);
  // Rank 0, once every check before training has passed: output.dir/config.resolved.toml, every
  // key of this run with the overrides applied (`sfbd --config` of it repeats the run). A job
  // refused for bad input leaves nothing behind.
  void record_config() const;
  // Fixes the parsed config as the plan's starting point (after parsing, before any decision).
  void set_parsed(sfb::Config parsed_cfg) {
    cfg = parsed_cfg;
    parsed = std::move(parsed_cfg);
    decisions.clear();
  }
  // Changes the plan by `change` and records every key it changed, with `why` (a key decided again
  // keeps one entry, its latest value). Logged on rank 0.
  void decide(const std::string& why, const std::function<void(sfb::Config&)>& change);

  sfb::Config parsed{};               // as parsed: never written after set_parsed
  std::vector<Decision> decisions{};  // every key decide() changed, in order

  std::map<std::string, std::string> claimed{};  // rank 0: every claimed output, absolute path -> key
  bool comm_failed = false;  // the last failed all_ok's errors included the network's (failure_exit)
};

// Rank 0, an output at the end of a run: runs `write`; an sfb::Error (full disk, I/O error) is
// logged as "<what> not written: ...", naming the checkpoint that stays intact, and false is
// returned. Every output is written to a temporary and renamed, so a failure leaves the previous
// file (or none), never a truncated one.
bool write_output(const sfb::Config& cfg, const std::string& what, const std::function<void()>& write);

// The dense all-reduce engine of comm.collectives (the allreduce scheme's, and the CNN mode's
// dense groups): Open MPI's, or sfb's (the empty factory: every consumer's default).
sfb::comm::AllreduceFactory allreduce_factory(const sfb::Config& cfg);

// job.mode = "sfb" (sfb_job.cc) and "mgwfbp" (cnn_job.cc); each returns the exit code.
int run_sfb(Job& job);
int run_cnn(Job& job);
// --check: the same validation as before training (config, data, model and plugin with its
// [model.params], topology, memory, outputs, the checkpoint of --resume), nothing trained or
// written; false (every rank) when any rank found bad input, which rank 0 has reported.
bool check_sfb(Job& job);
// --evaluate FILE: rank 0 loads the whole training and test sets and prints, as JSON on stdout, the
// objective of the model file's W on both, the test accuracy and the model's metrics; nothing is
// trained or written. kExitBadInput when the file, data or model do not fit together.
int evaluate_sfb(Job& job, const std::string& model_path);
// --profile FILE: measures the scheme profile on every rank (profiler/scheme_profiler.h); rank 0
// writes it to FILE and prints every scheme's prediction at this job's ranks; nothing is trained.
// A profile that skipped an engine run (SchemeProfile::skipped) is an error (kExitFailed, nothing
// written) unless `partial`.
int profile_sfb(Job& job, const std::string& path, bool partial = false);
bool check_cnn(Job& job);
// --evaluate FILE in CNN mode: rank 0 prints the CNN model file's test loss and accuracy, and its
// loss and accuracy on the training set's sample (eval.train_sample rows), as JSON on stdout.
int evaluate_cnn(Job& job, const std::string& model_path);

}  // namespace sfbd
