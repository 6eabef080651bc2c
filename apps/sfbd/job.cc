// Job's methods (job.h): agreeing across ranks, claiming the outputs, recording the config.
#include <filesystem>
#include <map>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include "job.h"
#include "sfb/comm/mpi_collectives.h"
#include "sfb/comm/setup_collectives.h"
#include "sfb/core/error.h"
#include "sfb/core/files.h"
#include "sfb/core/json.h"
#include "sfb/core/strings.h"

namespace sfbd {

namespace {

// Rank 0 prints each distinct message once, with the ranks that had it unless all did.
void report_errors(const std::vector<std::string>& errors) {
  std::map<std::string, std::vector<int>> by_message;
  for (size_t r = 0; r < errors.size(); ++r)
    if (!errors[r].empty()) by_message[errors[r]].push_back(static_cast<int>(r));
  for (const auto& [message, ranks] : by_message) {
    const bool everywhere = ranks.size() == errors.size();
    fmt::print(stderr, "sfbd: error{}: {}\n",
               everywhere || errors.size() == 1
                   ? ""
                   : fmt::format(" (rank{} {})", ranks.size() > 1 ? "s" : "", fmt::join(ranks, ", ")),
               message);
  }
}

// One file a job writes, by the key that names it. A run record (config.resolved.toml, plan.json) is
// written whole once the plan is resolved, so it is claimed but not prepared here.
struct OutputFile {
  std::string key, file;
  bool run_record = false;
};

// Creates each directory the job writes into (output.dir first) and claims it for this job: a
// second job cannot write into a live job's directory through an absolute output path, nor the
// other way round.
void lock_directories(const std::vector<std::pair<std::string, std::string>>& dirs,
                      std::vector<std::unique_ptr<sfb::DirectoryLock>>& locks) {
  for (const auto& [dir, key] : dirs) {
    try {
      sfb::create_directories(dir);
    } catch (const sfb::InvalidArgument& e) {
      throw sfb::InvalidArgument(fmt::format("{}: {}", key, e.what()));
    }
    try {
      locks.push_back(std::make_unique<sfb::DirectoryLock>(dir));
    } catch (const sfb::InvalidArgument& e) {
      if (key == "output.dir") throw;
      throw sfb::InvalidArgument(fmt::format("{} {} is in another job's directory: {}", key, dir, e.what()));
    }
  }
}

}  // namespace

bool Job::all_ok(const std::string& stage, const std::function<void()>& step) {
  std::string error;
  bool comm = false;
  try {
    step();
  } catch (const sfb::CommError& e) {
    error = e.what();
    comm = true;
  } catch (const sfb::Error& e) {
    error = e.what();
  } catch (const std::bad_alloc&) {
    error = fmt::format(
        "out of memory while {} (the estimate before it passed); give each rank more memory or "
        "make the job smaller",
        stage);
  }
  std::vector<std::string> errors;
  {
    auto guard = waiting_on_peers(stage);
    if (!mpi.any(!error.empty())) return true;
    errors = mpi.gather(sfb::excerpt(error, 4000));
    comm_failed = mpi.any(comm);
  }
  report_errors(errors);
  return false;
}

void Job::claim_outputs() {
  if (rank() != 0) return;
  const auto& out = cfg.output;
  const bool cnn = cfg.job.mode == sfb::JobMode::kMgwfbp;
  // Every file this job writes, registered by key: two keys naming one file would overwrite each
  // other (a profile CSV over the summary), so that is refused before anything is written.
  const OutputFile files[] = {{"output.metrics", out.metrics},
                              {"output.summary", out.summary},
                              {"output.model", out.model},
                              {"checkpoint.path", cfg.checkpoint.path},
                              {"output.trace", cnn ? out.trace : ""},
                              {"output.profile", cnn ? out.profile : ""},
                              {"config.resolved.toml (the record of the run)", "config.resolved.toml", true},
                              {"plan.json (the settings sfbd resolved)", "plan.json", true},
                              {"--find-lr's table", find_lr ? "lr_search.csv" : ""},
                              {"--find-lr's plot", find_lr ? "lr_search.png" : ""},
                              {"--find-lr's gnuplot script", find_lr ? "lr_search.gp" : ""}};
  std::map<std::string, std::string> by_path;  // absolute path -> key
  std::set<std::string> records;               // the run records' absolute paths
  // Each directory written into, with the key that first names it (output.dir first).
  std::vector<std::pair<std::string, std::string>> dirs = {
      {std::filesystem::absolute(out.dir).lexically_normal().string(), "output.dir"}};
  // --profile's file (relative to the working directory, not output.dir) is claimed like any output:
  // it may not be another output or a live job's file, and its directory must take a file.
  if (!profile_path.empty()) {
    const auto path = std::filesystem::absolute(profile_path).lexically_normal();
    by_path.emplace(path.string(), "--profile");
    if (path.parent_path().string() != dirs.front().first) dirs.emplace_back(path.parent_path().string(), "--profile");
  }
  for (const auto& [key, file, run_record] : files) {
    if (file.empty()) continue;
    const auto path = std::filesystem::absolute(out.path(file)).lexically_normal();
    if (run_record) records.insert(path.string());
    const auto [it, fresh] = by_path.emplace(path.string(), key);
    if (!fresh)
      throw sfb::InvalidArgument(
          fmt::format("{} and {} are the same file, {}: one would overwrite the other; give each its own name",
                      it->second, key, path.string()));
    const std::string dir = path.parent_path().string();
    if (std::none_of(dirs.begin(), dirs.end(), [&](const auto& d) { return d.first == dir; }))
      dirs.emplace_back(dir, key);
  }
  if (check_only) {
    sfb::check_writable_directory(out.dir, "output.dir");
    return;
  }
  try {
    sfb::create_directories(out.dir);
  } catch (const sfb::InvalidArgument& e) {
    throw sfb::InvalidArgument(fmt::format("output.dir: {}", e.what()));
  }
  lock_directories(dirs, output_locks);
  for (const auto& [path, key] : by_path)
    if (!records.count(path)) sfb::prepare_output_file(path, key);
  claimed = std::move(by_path);
}

void Job::claim_output(const std::string& path, const std::string& key) {
  if (rank() != 0) return;
  const auto abs = std::filesystem::absolute(path).lexically_normal().string();
  if (const auto it = claimed.find(abs); it != claimed.end())
    throw sfb::InvalidArgument(
        fmt::format("{} and {} are the same file, {}: one would overwrite the other; give "
                    "each its own name",
                    it->second, key, abs));
  if (!resume_path.empty()) {
    std::error_code ec;
    const bool same = abs == std::filesystem::absolute(resume_path).lexically_normal().string() ||
                      std::filesystem::equivalent(abs, resume_path, ec);
    SFB_CHECK(!same,
              "{} is {}, the checkpoint this run resumes from: writing it would destroy the checkpoint; "
              "rename output.trace",
              key, abs);
  }
  if (!check_only) sfb::prepare_output_file(abs, key);
  claimed.emplace(abs, key);
}

bool write_output(const sfb::Config& cfg, const std::string& what, const std::function<void()>& write) {
  try {
    write();
    return true;
  } catch (const sfb::Error& e) {
    const auto ckpt = cfg.output.path(cfg.checkpoint.path);
    spdlog::error("{} not written: {}{}", what, e.what(),
                  ckpt.empty() ? "" : fmt::format("; the last checkpoint written, {}, is intact", ckpt));
    return false;
  }
}

void Job::record_config() const {
  if (rank() != 0 || check_only) return;
  sfb::write_file_atomic(cfg.output.path("config.resolved.toml"), cfg.resolved_toml());
  sfb::Json plan = sfb::Json::array();
  for (const auto& d : decisions)
    plan.push_back({{"key", d.key}, {"given", d.given}, {"resolved", d.resolved}, {"why", d.why}});
  sfb::write_file_atomic(cfg.output.path("plan.json"), sfb::Json{{"decisions", plan}}.dump(2) + "\n");
}

void Job::decide(const std::string& why, const std::function<void(sfb::Config&)>& change) {
  const sfb::Config before = cfg;
  change(cfg);
  for (const auto& doc : sfb::config_key_docs()) {
    const std::string was = sfb::config_value(before, doc.key), now = sfb::config_value(cfg, doc.key);
    if (was == now) continue;
    std::erase_if(decisions, [&](const Decision& d) { return d.key == doc.key; });
    const std::string given = sfb::config_value(parsed, doc.key);
    if (given != now) decisions.push_back({doc.key, given, now, why});
    if (rank() == 0) spdlog::debug("plan: {} = {} ({})", doc.key, now, why);
  }
}

sfb::comm::AllreduceFactory allreduce_factory(const sfb::Config& cfg) {
  return cfg.comm.collectives == sfb::Collectives::kMpi ? sfb::comm::mpi_allreduce_factory()
                                                        : sfb::comm::AllreduceFactory{};
}

}  // namespace sfbd
