#pragma once
// Measures the profile of the SFB engine's predictor (sfb/predict/scheme_model.h) on the live job,
// before training (sfbd --profile FILE, and comm.scheme = "auto"): every rank at once, so ranks
// sharing cores contend as they will in training, each time the slowest rank's median:
//   sf_s          the model's compute_sf on K samples of this rank's partition (a model instance of
//                 its own, so a model with state, such as SDCA's duals, trains from the start after)
//   apply         the update applier on 1 and on m copies of the batch (m = min(P, 8), at least 2):
//                 the fit apply_fixed_s + m apply_batch_s
//   form_dense_s  the baselines' dense update U^T V of the batch (ProfileRequest::form_dense: sfbd
//                 passes baselines::dense_update; this layer does not see the baselines)
//   add_dense_s   W += a J x D update (what the all-reduce baseline adds, FMS's servers add per shard)
//   link          every rank sends M bytes to every other at once and receives theirs, as the SFB
//                 communication thread does, at M = 16 KiB, B / 4 and B (B the batch's encoded
//                 bytes, at least 1 MiB, at most 16 MiB): T(M) = a + (P - 1) M b fitted per rank
//   engine        the engine itself (runtime::Worker) for repeats + 4 clocks of SFB full broadcast, and
//                 of the all-reduce baseline when the caller can make its exchange: the steady
//                 clock, the compute thread's SF computation and the update thread's apply (the
//                 anchors of predict/scheme_model.h)
//   allreduce     sfb's all-reduce (comm/allreduce.h) of 4 J D / 4 and 4 J D bytes (4 J D at least
//                 1 MiB, at most 32 MiB): T(M) = A + B M
// A fit whose slope noise made non-positive (an idle, fast link) falls back to the largest size's
// time per byte with no start-up.
// ranks_on_host counts the ranks on this machine's kernel (its boot id): the netns cluster's "hosts"
// are one machine's cores.
// It costs 2 (repeats + 4) engine clocks and `repeats` SF computations, dense updates and adds, 2
// repeats applies, 3 (repeats + 1) broadcast rounds and 2 (repeats + 1) all-reduces: seconds to a
// minute for the large models it is meant for.
#include <functional>

#include "sfb/api/model.h"
#include "sfb/comm/transport.h"
#include "sfb/core/config.h"
#include "sfb/core/sf_batch.h"
#include "sfb/io/dataset.h"
#include "sfb/predict/scheme_model.h"
#include "sfb/runtime/exchange.h"

namespace sfb::runtime {

struct ProfileRequest {
  const Config* cfg = nullptr;
  comm::Transport* transport = nullptr;  // every rank takes part; nothing else may use it meanwhile
  api::Model* model = nullptr;           // a fresh instance: compute_sf is called on it
  const io::Dataset* train = nullptr;    // this rank's partition
  int workers = 0;
  int ranks_on_host = 1;  // MPI's ranks on this host (the fallback without a boot id)
  int cores = 1;
  int repeats = 3;
  // Forms the dense J x D update of a batch in a layout, as the baselines do (null: not measured).
  std::function<void(const SfBatch&, Layout, Matrix&)> form_dense;
  // The all-reduce baseline's exchange, to time a few of its clocks in the engine (null: not timed).
  std::function<std::unique_ptr<Exchange>()> make_allreduce_exchange;
};

// Every rank returns the same profile (the slowest rank's times).
predict::SchemeProfile measure_scheme_profile(const ProfileRequest& req);

}  // namespace sfb::runtime
