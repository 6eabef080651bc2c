#include "lr_search.h"

#include <algorithm>
#include <cmath>
#include <string>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "../gnuplot.h"
#include "lr_policy.h"
#include "sfb/core/files.h"
#include "sfb/core/timer.h"

namespace sfbd {

LrHoldout lr_holdout(const Job& job, const sfb::io::Dataset& train) {
  LrHoldout h;
  const int64_t m = std::min(job.cfg.eval.train_sample, train.n / 5);
  if (job.rank() != 0 || m <= 0) return h;
  h.rows = train.row_range(train.n - m, train.n, train.name + " (held out by the learning-rate search)");
  h.train_rows = train.n - m;
  return h;
}

namespace {

sfb::Json number_or_null(double v, bool ok) { return ok && std::isfinite(v) ? sfb::Json(sfb::sig(v, 8)) : nullptr; }

sfb::Json score_json(const sfb::LrScore& s) {
  return {{"held_out_accuracy", number_or_null(s.quality, s.quality >= 0)},
          {"held_out_objective", number_or_null(s.objective, true)}};
}

std::string describe(const sfb::LrScore& s) {
  return s.quality >= 0 ? fmt::format("held-out accuracy {:.2f}%, objective {:.6g}", 100 * s.quality, s.objective)
                        : fmt::format("held-out objective {:.6g}", s.objective);
}

}  // namespace

std::optional<int> resolve_lr(Job& job, int64_t start_clock, const char* unit, const LrHoldout& held,
                              const LrTrialFn& trial, sfb::Json& record) {
  const auto& opt = job.cfg.optimizer;
  const int64_t to_go = job.cfg.stop.max_clocks - start_clock;
  const int64_t clocks = sfb::lr_trial_clocks(opt, to_go);
  if (job.rank() == 0)
    spdlog::info("optimizer.lr = \"auto\": searching the learning rate ({} {} per candidate of the run's {})", clocks,
                 unit, to_go);
  // Rank 0 judges the trials; with no rows held out it judges them on its training rows.
  const bool on_training_rows = job.rank() == 0 && held.rows.n == 0;
  if (on_training_rows)
    spdlog::warn(
        "optimizer.lr = \"auto\": rank 0 holds too few rows to hold any out (eval.train_sample and a fifth of its "
        "partition): the candidates are judged on rows they train on, which favours a rate that memorises them; "
        "give the job more data or set optimizer.lr");
  const auto level = spdlog::get_level();
  spdlog::set_level(spdlog::level::off);  // the trials' own progress lines and divergence errors
  sfb::Stopwatch took;
  sfb::LrScore start;  // every trial's first evaluation: the start's
  const auto found = sfb::search_lr([&](double lr) {
    const auto [first, last] = trial(sfb::lr_trial_optimizer(opt, lr, start_clock, to_go, clocks), clocks);
    start = first;
    return last;
  });
  spdlog::set_level(level);
  record = {{"clocks_each", clocks},
            {"unit", unit},
            {"run_clocks", to_go},
            {"judged_by", on_training_rows           ? "training objective (no rows could be held out)"
                          : found.score.quality >= 0 ? "held-out accuracy"
                                                     : "held-out objective"},
            {"held_out_rows", held.rows.n},
            {"seconds", sfb::fixed(took.seconds(), 3)},
            {"start", score_json(start)},
            {"chosen", found.chosen},
            {"tried", sfb::Json::array()}};
  for (const auto& t : found.tried) {
    sfb::Json one = score_json(t.score);
    one["lr"] = t.lr;
    record["tried"].push_back(std::move(one));
  }
  if (!std::isfinite(found.score.objective) || !(found.score.objective < start.objective)) {
    if (job.rank() == 0)
      spdlog::error(
          "optimizer.lr = \"auto\": no rate from 1e-4 to 1e4 lowered the held-out objective ({:.6g}) in {} "
          "{}; set optimizer.lr",
          start.objective, clocks, unit);
    return kExitDiverged;
  }
  job.decide("optimizer.lr = \"auto\": the rate search's choice", [&](sfb::Config& c) {
    c.optimizer.lr = found.chosen;
    c.optimizer.lr_auto = false;
  });
  if (job.rank() == 0)
    spdlog::info("optimizer.lr = \"auto\": {:.4g} ({} after {} {}, from {}; {} candidates in {:.1f} s)", found.chosen,
                 describe(found.score), clocks, unit, describe(start), found.tried.size(), took.seconds());
  return std::nullopt;
}

bool reuse_checkpoint_lr(Job& job, double lr, const std::string& path, sfb::Json& record) {
  const auto& opt = job.cfg.optimizer;
  if (!opt.lr_auto || job.find_lr || !(lr > 0)) return false;
  job.decide("optimizer.lr = \"auto\": the rate the resumed checkpoint's job chose", [&](sfb::Config& c) {
    c.optimizer.lr = lr;
    c.optimizer.lr_auto = false;
  });
  record = {{"chosen", lr}, {"from_checkpoint", path}, {"tried", sfb::Json::array()}};
  if (job.rank() == 0)
    spdlog::info("optimizer.lr = \"auto\": {:.4g}, the rate the job that wrote {} chose (not searched again)", lr,
                 path);
  return true;
}

int report_lr_search(Job& job, const sfb::Json& record) {
  if (job.rank() != 0) return kExitOk;
  const auto& j = record;
  const auto cell = [](const sfb::Json& v) { return v.is_number() ? v.dump() : std::string("n/a"); };
  std::string csv = "lr,held_out_objective,held_out_accuracy\n";
  fmt::print(
      "# optimizer.lr = \"auto\" search: {} {} per candidate (of the run's {}), judged by {}; at the start: "
      "objective {}, accuracy {}\n| lr | held-out objective | held-out accuracy |\n|---|---|---|\n",
      j["clocks_each"].get<int64_t>(), j["unit"].get<std::string>(), j["run_clocks"].get<int64_t>(),
      j["judged_by"].get<std::string>(), cell(j["start"]["held_out_objective"]), cell(j["start"]["held_out_accuracy"]));
  for (const auto& t : j["tried"]) {
    const auto o = t["held_out_objective"], a = t["held_out_accuracy"];
    fmt::print("| {:.4g} | {} | {} |\n", t["lr"].get<double>(), o.is_number() ? o.dump() : "inf (diverged)", cell(a));
    csv += fmt::format("{},{},{}\n", t["lr"].get<double>(), o.is_number() ? o.dump() : "nan",
                       a.is_number() ? a.dump() : "nan");
  }
  fmt::print("chosen: optimizer.lr = {:.4g}\n", j["chosen"].get<double>());
  const auto path = job.cfg.output.path("lr_search.csv"), png = job.cfg.output.path("lr_search.png");
  const bool ok = write_output(job.cfg, path, [&] { sfb::write_file_atomic(path, csv); });
  const auto gp = job.cfg.output.path("lr_search.gp");
  write_output(job.cfg, gp, [&] {
    sfb::write_file_atomic(
        gp,
        "set terminal pngcairo size 800,500 noenhanced\nset output ARG1\nset datafile separator ','\n"
        "set logscale x\nset logscale y\nset xlabel 'optimizer.lr'\nset ylabel 'held-out objective after the "
        "trial'\nset y2label 'held-out accuracy'\nset y2tics\nset grid\n"
        "plot ARG2 every ::1 using 1:2 with points pt 7 title 'objective', ARG2 every ::1 using 1:3 axes x1y2 "
        "with points pt 5 title 'accuracy'\n");
  });
  if (sfb_tools::run_gnuplot(gp, {png, path}) == 0) fmt::print("wrote {} and {}\n", path, png);
  return ok ? kExitOk : kExitFailed;
}

}  // namespace sfbd
