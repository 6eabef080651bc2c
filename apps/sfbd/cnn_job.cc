// job.mode = "mgwfbp": data-parallel CNN training with merged all-reduces (sfb/cnn/executor.h).
#include <fmt/format.h>

#include "job.h"
#include "report.h"
#include "sfb/cnn/executor.h"
#include "sfb/cnn/replanner.h"
#include "sfb/comm/mpi_collectives.h"
#include "sfb/comm/setup_collectives.h"
#include "sfb/core/error.h"
#include "sfb/core/files.h"
#include "sfb/io/load_data.h"
#include "sfb/mgwfbp/profile.h"

namespace sfbd {

namespace {

// Outputs, data and memory, checked on every rank; false when any rank found bad input.
bool set_up(Job& job, sfb::io::LoadedData& data) {
  const auto& cfg = job.cfg;
  return job.all_ok("agreeing that the data loaded", [&] {
    SFB_CHECK(cfg.sfb.staleness == 0, "job.mode = \"mgwfbp\" is synchronous S-SGD: sfb.staleness must be 0, got {}",
              cfg.sfb.consistency_name());
    sfb::cnn::check_planner(cfg.mgwfbp);
    job.claim_outputs();
    const int64_t available = sfb::available_memory_bytes(job.mpi.ranks_on_host());
    sfb::io::data_memory(cfg.data, job.rank(), job.ranks(), job.rank() == 0).check(available, "loading the data");
    data = sfb::io::load_data(cfg.data, cfg.job.seed, job.rank(), job.ranks(), job.rank() == 0);
    sfb::cnn::cnn_memory(cfg, data.train).check(sfb::available_memory_bytes(job.mpi.ranks_on_host()), "this CNN");
  });
}

}  // namespace

bool check_cnn(Job& job) {
  sfb::io::LoadedData data;
  if (!set_up(job, data)) return false;
  // The network spec against the data's shape, as the executor builds it.
  return job.all_ok("checking the network", [&] { sfb::cnn::make_network(job.cfg.cnn, data.train); });
}

int run_cnn(Job& job) {
  const auto& cfg = job.cfg;
  sfb::io::LoadedData data;
  if (!set_up(job, data)) return kExitBadInput;
  job.cfg.stop.max_clocks = cfg.stop.clock_limit(data.total_train, job.ranks() * cfg.optimizer.minibatch);
  job.record_config();  // as in sfb mode: with the clock limit stop.max_epochs gives
  sfb::cnn::ExecutorResult r;
  try {
    sfb::cnn::ExecutorHooks hooks;
    if (cfg.comm.collectives == "mpi") hooks.allreduce = sfb::comm::mpi_allreduce_factory();
    sfb::cnn::Executor ex(cfg, *job.transport, data.train, job.rank() == 0 ? &data.test : nullptr, std::move(hooks),
                          job.mpi.local_rank());
    r = ex.run();
  } catch (const sfb::InvalidArgument& e) {
    // Raised alike on every rank before training (network spec, shapes).
    if (job.rank() == 0) fmt::print(stderr, "sfbd: error: {}\n", e.what());
    return kExitBadInput;
  }
  const auto sums = sfb::comm::allgather_i64(*job.transport, static_cast<int64_t>(r.checksum));
  if (job.rank() == 0) {
    const sfb::Json summary = cnn_summary(cfg, r, job.ranks(), sums);
    print_cnn_table(cfg, r, job.ranks(), summary["checksums_equal"].get<bool>());
    if (const auto path = cfg.output.path(cfg.output.summary); !path.empty())
      sfb::write_file_atomic(path, sfb::to_document(summary));
    // The live profile (none when the run ended before planning), for mgwfbp-plan at other sizes.
    if (const auto path = cfg.output.path(cfg.output.profile); !path.empty() && r.profile.size() > 0)
      sfb::mgwfbp::write_profile_csv(
          path, r.profile,
          fmt::format("measured by sfbd ({}, {} ranks, batch {} per rank); t_f is not per layer: the whole forward "
                      "pass took {:.0f} us\nmgwfbp-plan --profile {} --forward-ms {:.3f} --network "
                      "ab:{:.3f},{:.6g},{:.3f},{:.6g} "
                      "--nodes {}",
                      cfg.source, job.ranks(), cfg.optimizer.minibatch, r.profile.forward_us, path,
                      r.profile.forward_us / 1e3, r.cost.a_us, r.cost.b_us_per_byte, r.cost.ag_a_us,
                      r.cost.ag_b_us_per_byte, job.ranks()));
  }
  return r.diverged_at >= 0 ? kExitDiverged : kExitOk;
}

}  // namespace sfbd
