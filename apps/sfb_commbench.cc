// sfb-commbench: times the collectives and exchanges every scheme of sfb runs on, on the live job
// (run under mpirun, on the hosts to measure), against Open MPI's MPI_Allreduce on the same ranks.
//
//   mpirun -np 4 sfb-commbench [--transport tcp|mpi] [--interface eth0] [--tcp-congestion cubic]
//                              [--ops a,b,...]
//                              [--min-bytes 65536] [--max-bytes 268435456] [--repeats 5] [--out bench.csv]
//   mpirun -np 5 sfb-commbench --ops fms --fms-servers 1       (4 workers and 1 parameter server)
//
// Ops (each at every size M from --min-bytes doubling to --max-bytes):
//   mpi_allreduce  MPI_Allreduce of M bytes of floats (MPI_COMM_WORLD, Open MPI's tuned choice)
//   allreduce      sfb's rank-order all-reduce of M bytes (comm/allreduce.h) on the transport
//   allgather      the CNN factor groups' SF all-gather: every rank's M bytes of factors to every rank
//   broadcast      SFB's broadcast: every rank sends one M-byte SF batch (one buffer) to all others
//                  and decodes theirs, as the worker's communication thread does
//   pingpong       rank 0 sends M bytes to rank 1 and gets them back, 10 times per repetition (the
//                  time / 20 is the one-way latency of an M-byte message)
//   fms            one FMS clock: every worker pushes its M-byte update (its rows to each server),
//                  the servers (the real FmsServer) add them and every worker pulls M bytes of W back
// Each time is the slowest rank's, the median of --repeats after one warm-up; the CSV has
// op,ranks,workers,servers,bytes,median_us,min_us,max_us,sent_per_rank (mean bytes a rank sent).
// scripts/comm-bench.sh runs it on the netns cluster next to iperf3 and turns it into a table.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include "cli_exit.h"

#include "sfb/baselines/fms_exchange.h"
#include "sfb/baselines/fms_server.h"
#include "sfb/comm/allreduce.h"
#include "sfb/comm/channel.h"
#include "sfb/comm/mpi_collectives.h"
#include "sfb/comm/mpi_session.h"
#include "sfb/comm/sf_allgather.h"
#include "sfb/comm/sf_codec.h"
#include "sfb/comm/transport/tcp.h"
#include "sfb/core/error.h"
#include "sfb/core/files.h"
#include "sfb/core/memory.h"
#include "sfb/core/strings.h"
#include "sfb/core/timer.h"

namespace {

using sfb::comm::Transport;

struct Options {
  std::string transport = "tcp", interface, congestion, ops = "mpi_allreduce,allreduce,allgather,broadcast", out;
  int64_t min_bytes = 64 << 10, max_bytes = int64_t{256} << 20;
  int repeats = 5, servers = 0;
  double link_a_us = -1, link_b_us = -1;  // the all-reduce's cost model (default: its own)
  sfb::comm::AllreduceOptions allreduce;
};

// One op at one size: prepare (untimed), then run() once per repetition.
struct Op {
  std::function<void(int64_t bytes)> prepare;
  std::function<void(int64_t rep)> run;
};

// An SF batch of about `bytes` on the wire: K = 32 rows of u (J) and v (D) with J = D.
sfb::SfBatch batch_of(int64_t bytes, int rank) {
  sfb::SfBatch b;
  b.count = 32;
  b.J = b.D = static_cast<int32_t>(std::max<int64_t>(1, (bytes - 56) / (4 * 2 * b.count)));
  b.sender = rank;
  b.u = sfb::Matrix::Constant(b.count, b.J, 0.5f);
  b.v = sfb::Matrix::Constant(b.count, b.D, 0.25f);
  return b;
}

Op mpi_allreduce_op(std::vector<float>& buf, std::unique_ptr<sfb::comm::Allreduce>& engine, int ranks) {
  return {[&buf, &engine, ranks](int64_t bytes) {
            if (!engine) engine = std::make_unique<sfb::comm::MpiAllreduce>(ranks);
            buf.assign(static_cast<size_t>(bytes / 4), 1.0f);
          },
          [&buf, &engine](int64_t rep) { engine->run(buf, rep); }};
}

Op allreduce_op(std::vector<float>& buf, sfb::comm::RankOrderAllreduce& ar, int64_t& id) {
  return {[&buf](int64_t bytes) { buf.assign(static_cast<size_t>(bytes / 4), 1.0f); },
          [&buf, &ar, &id](int64_t) { ar.run(buf, id++); }};
}

Op allgather_op(sfb::SfBatch& mine, sfb::comm::SfAllgather& ag, int rank, int64_t& id) {
  return {[&mine, rank](int64_t bytes) { mine = batch_of(bytes, rank); },
          [&mine, &ag, &id](int64_t) { ag.run({mine}, id++); }};
}

// What the SFB worker does with its batch of a clock: encode once, the same buffer to every peer;
// and with its peers' batches: decode each.
Op broadcast_op(Transport& t, sfb::SfBatch& mine, int64_t& clock) {
  return {[&mine, &t](int64_t bytes) { mine = batch_of(bytes, t.rank()); },
          [&mine, &t, &clock](int64_t) {
            mine.clock = clock++;
            auto buf = std::make_shared<const sfb::Bytes>(sfb::comm::encode_sf_batch(mine));
            for (int q = 1; q < t.size(); ++q) t.send_shared((t.rank() + q) % t.size(), sfb::comm::kTagSf, buf);
            for (int i = 0; i < t.size() - 1; ++i) {
              const auto m = t.recv(sfb::comm::kTagSf);
              sfb::comm::decode_sf_batch(m.data, {m.src, mine.J, mine.D});
            }
          }};
}

// One FMS run of R + 1 clocks at one size (W = bytes of floats, D = 4096 columns): the servers run
// sfb's FmsServer, the workers FmsExchange's push and its pull assembly, BSP. Rank 0 times clocks
// 1..R (clock 0 warms up) and reports the mean per clock; the workers' clocks follow each other as
// in training (a clock starts once the previous version is complete).
double fms_clock_us(Transport& t, int workers, int servers, int64_t bytes, int repeats) {
  const int64_t D = 4096, J = std::max<int64_t>(servers, bytes / (4 * D));
  if (t.rank() >= workers) {
    sfb::FmsConfig cfg;
    cfg.servers = servers;
    sfb::baselines::FmsServer(cfg, t.peer_timeout_s(), t, J, D).run();
    return 0;
  }
  const sfb::Matrix W0 = sfb::Matrix::Zero(J, D);
  // One rank-one update (K = 1): each pushed block is formed from the factors as in training.
  auto batch = std::make_shared<sfb::SfBatch>();
  batch->count = 1;
  batch->J = static_cast<int32_t>(J);
  batch->D = static_cast<int32_t>(D);
  batch->u = sfb::Matrix::Constant(1, J, 1e-3f);
  batch->v = sfb::Matrix::Constant(1, D, 1.0f);
  int64_t versions = 0;
  sfb::runtime::ExchangeHost host;
  host.transport = &t;
  host.workers = workers;
  host.J = static_cast<int32_t>(J);
  host.D = static_cast<int32_t>(D);
  host.initial_W = &W0;
  host.deliver = [&](sfb::runtime::DenseUpdatePtr item) { versions += item->last ? 1 : 0; };
  host.fail = [](std::exception_ptr e) { std::rethrow_exception(e); };
  sfb::baselines::FmsExchange ex(servers, false, false);  // no prox: the pipelined servers
  ex.start(host);
  sfb::Stopwatch sw;
  for (int64_t c = 0; c <= repeats; ++c) {
    if (c == 1) sw.reset();
    batch->clock = c;
    ex.push(batch);
    while (versions <= c) ex.on_message(t.recv(sfb::comm::kTagPs));
  }
  const double us = sw.seconds() * 1e6 / repeats;
  ex.finish();
  return us;
}

// Rank 0 sends M bytes to rank 1, which sends them back: half the round trip (the one-way time).
Op pingpong_op(Transport& t, sfb::Bytes& msg) {
  return {[&msg](int64_t bytes) { msg.assign(static_cast<size_t>(bytes), std::byte{1}); },
          [&msg, &t](int64_t) {
            for (int i = 0; i < 10; ++i) {
              if (t.rank() == 0) {
                t.send(1, sfb::comm::kTagCollective, msg);
                t.recv(sfb::comm::kTagCollective);
              } else if (t.rank() == 1) {
                t.send(0, sfb::comm::kTagCollective, t.recv(sfb::comm::kTagCollective).data);
              }
            }
          }};
}

struct Row {
  std::string op;
  int64_t bytes = 0;
  double median_us = 0, min_us = 0, max_us = 0, sent_per_rank = 0;
};

Row time_op(const std::string& name, Op& op, int64_t bytes, const Options& o, const sfb::comm::MpiSession& mpi,
            Transport& t, bool timed_here) {
  op.prepare(bytes);
  std::vector<double> times;
  int64_t sent = 0;
  for (int rep = -1; rep < o.repeats; ++rep) {
    mpi.barrier();
    const int64_t before = t.total_counters().bytes_sent;
    const auto t0 = sfb::SteadyClock::now();
    if (timed_here) op.run(rep + 1);
    const double us = std::chrono::duration<double, std::micro>(sfb::SteadyClock::now() - t0).count();
    const double slowest = mpi.max(timed_here ? us : 0.0);
    if (rep >= 0) {
      times.push_back(slowest);
      sent += t.total_counters().bytes_sent - before;
    }
  }
  Row r{name, bytes};
  std::sort(times.begin(), times.end());
  r.median_us = times[times.size() / 2];
  r.min_us = times.front();
  r.max_us = times.back();
  // Every rank's mean bytes per call, averaged over the ranks.
  const double mine = static_cast<double>(sent) / o.repeats;
  r.sent_per_rank = mine;  // rank 0 reports its own; the bound is computed from the pattern
  return r;
}

void add_options(CLI::App& app, Options& o) {
  app.add_option("--transport", o.transport, "tcp | mpi (comm.transport)")->check(CLI::IsMember({"tcp", "mpi"}));
  app.add_option("--interface", o.interface, "comm.interface for tcp");
  app.add_option("--tcp-congestion", o.congestion, "comm.tcp_congestion for tcp (\"\": the host's default)");
  app.add_option("--ops", o.ops, "mpi_allreduce,allreduce,allgather,broadcast,fms");
  const auto bytes = sfb_tools::Integer<int64_t>(4, int64_t{1} << 34);
  app.add_option("--min-bytes", o.min_bytes, "Smallest size (bytes)")->check(bytes);
  app.add_option("--max-bytes", o.max_bytes, "Largest size (bytes)")->check(bytes);
  app.add_option("--repeats", o.repeats, "Timed repetitions per size (median kept)")
      ->check(sfb_tools::Integer<int>(1, 1000000));
  app.add_option("--fms-servers", o.servers, "Parameter-server ranks (the last S) for the fms op")
      ->check(sfb_tools::Integer<int>(0, 1 << 20));
  app.add_option("--out", o.out, "CSV file (rank 0)");
  app.add_option("--min-segment-bytes", o.allreduce.min_segment_bytes, "allreduce: smallest segment (bytes)")
      ->check(bytes);
  app.add_option("--max-segment-bytes", o.allreduce.max_segment_bytes, "allreduce: largest segment (bytes)")
      ->check(bytes);
  app.add_option("--window-bytes", o.allreduce.window_bytes, "allreduce: bytes in flight per owner")->check(bytes);
  app.add_option("--link-a-us", o.link_a_us, "allreduce: the start-up a of its algorithm choice (us)")
      ->check(sfb_tools::Finite(0, 1e9));
  app.add_option("--link-b-us", o.link_b_us, "allreduce: the b of its algorithm choice (us per byte)")
      ->check(sfb_tools::Finite(1e-12, 1e6));
}

int run(int argc, char** argv) {
  CLI::App app{"sfb-commbench: sfb's collectives and exchanges against MPI_Allreduce, on the live job"};
  Options o;
  add_options(app, o);
  sfb::comm::MpiSession mpi(argc, argv, sfb::comm::MpiSession::Threads::kMultiple);
  spdlog::set_level(spdlog::level::warn);
  if (const auto code = sfb_tools::parse_args(app, argc, argv, mpi.rank() == 0)) return *code;
  if (!o.out.empty()) sfb::prepare_output_file(o.out, "--out");  // every rank: all exit 2 alike
  SFB_CHECK(o.max_bytes >= o.min_bytes, "--max-bytes {} is below --min-bytes {}", o.max_bytes, o.min_bytes);
  SFB_CHECK(o.allreduce.max_segment_bytes >= o.allreduce.min_segment_bytes,
            "--max-segment-bytes {} is below --min-segment-bytes {}", o.allreduce.max_segment_bytes,
            o.allreduce.min_segment_bytes);
  SFB_CHECK(o.servers >= 0 && o.servers < mpi.size(), "--fms-servers {} of {} ranks", o.servers, mpi.size());
  sfb::comm::TransportOptions topt;
  topt.kind = *sfb::choice_named<sfb::TransportKind>(o.transport);  // tcp or mpi: checked by its option
  topt.interface = o.interface;
  topt.congestion = o.congestion;
  if (topt.kind == sfb::TransportKind::kTcp) sfb::comm::check_congestion(topt.congestion);
  auto t = mpi.make_transport(topt);
  const int workers = mpi.size() - o.servers;
  const bool worker = mpi.rank() < workers;
  sfb::comm::TransportChannel reduce_ch(*t, sfb::comm::kTagReduce), sf_ch(*t, sfb::comm::kTagSf);
  // Server ranks take no part in the collectives (they serve the fms op).
  auto ar = std::make_unique<sfb::comm::RankOrderAllreduce>(reduce_ch, worker ? workers : mpi.size(), o.allreduce);
  sfb::comm::SfAllgather ag(sf_ch);
  std::unique_ptr<sfb::comm::Allreduce> mpi_ar;
  std::vector<float> buf;
  sfb::SfBatch batch;
  int64_t id = 0;
  std::map<std::string, Op> ops;
  ops["mpi_allreduce"] = mpi_allreduce_op(buf, mpi_ar, workers);
  if (o.link_a_us >= 0 || o.link_b_us >= 0) {
    sfb::comm::LinkCost c;
    if (o.link_a_us >= 0) c.a_us = o.link_a_us;
    if (o.link_b_us >= 0) c.b_us_per_byte = o.link_b_us;
    ar->set_cost(c);
  }
  ops["allreduce"] = allreduce_op(buf, *ar, id);
  ops["allgather"] = allgather_op(batch, ag, t->rank(), id);
  ops["broadcast"] = broadcast_op(*t, batch, id);
  sfb::Bytes ping;
  ops["pingpong"] = pingpong_op(*t, ping);
  std::string csv = "op,ranks,workers,servers,bytes,median_us,min_us,max_us,sent_per_rank\n";
  for (const auto& name : sfb::split_trimmed(o.ops, ',')) {
    SFB_CHECK(ops.count(name) || (name == "fms" && o.servers > 0), "--ops: unknown op \"{}\"{}", name,
              name == "fms" ? " (needs --fms-servers)" : "");
    for (int64_t bytes = o.min_bytes; bytes <= o.max_bytes; bytes *= 2) {
      Row r{name, bytes};
      if (name == "fms") {
        mpi.barrier();
        const int64_t before = t->total_counters().bytes_sent;
        r.median_us = r.min_us = r.max_us = fms_clock_us(*t, workers, o.servers, bytes, o.repeats);
        r.sent_per_rank = static_cast<double>(t->total_counters().bytes_sent - before) / (o.repeats + 1);
        mpi.barrier();
      } else {
        // Only the workers take part in the collectives; server ranks wait at the barriers.
        r = time_op(name, ops[name], bytes, o, mpi, *t, worker);
      }
      if (mpi.rank() != 0) continue;
      const std::string line = fmt::format("{},{},{},{},{},{:.1f},{:.1f},{:.1f},{:.0f}\n", r.op, mpi.size(), workers,
                                           o.servers, r.bytes, r.median_us, r.min_us, r.max_us, r.sent_per_rank);
      csv += line;
      std::fputs(line.c_str(), stdout);
      std::fflush(stdout);
    }
  }
  t->flush();
  mpi.barrier();
  t.reset();
  if (mpi.rank() == 0 && !o.out.empty()) sfb::write_file_atomic(o.out, csv);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  sfb::reuse_large_allocations();
  try {
    return run(argc, argv);
  } catch (const sfb::InvalidArgument& e) {
    std::fprintf(stderr, "sfb-commbench: error: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sfb-commbench: %s\n", e.what());
    return 1;
  }
}
