#include "sfb/cnn/grad_comm.h"

#include "sfb/cnn/call_ids.h"

namespace sfb::cnn {

GradientCommunicator::GradientCommunicator(comm::Transport& t, Network& net, OnAllreduce hook,
                                           comm::AllreduceFactory allreduce)
    : t_(t),
      net_(net),
      hook_(std::move(hook)),
      reduce_ch_(t, comm::kTagReduce),
      sf_ch_(t, comm::kTagSf),
      allreduce_(allreduce ? allreduce(reduce_ch_, t.size()) : comm::make_rank_order_allreduce(reduce_ch_, t.size())),
      allgather_(sf_ch_) {
  ready_q_.set_capacity(1 << 16);
  // Also wakes a training thread in wait() when this thread fails (after the error is recorded).
  thread_.on_abort([this] {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
      cv_.notify_all();
    }
    ready_q_.try_push(-1);
    ready_q_.abort();
  });
  thread_.spawn([this] { loop(); });
}

GradientCommunicator::~GradientCommunicator() {
  thread_.abort();
  try {
    thread_.join();
  } catch (...) {
    // The error was reported by wait(), or the executor is unwinding from another one.
  }
}

SteadyClock::time_point GradientCommunicator::begin(int64_t iter, const mgwfbp::Plan& plan,
                                                    const comm::LinkCost& cost) {
  // The plan says which layers go as factors; the network tells its layers and backend (they skip
  // their parameter gradients and keep their factors for this thread).
  std::vector<char> sf(static_cast<size_t>(net_.param_layers()), 0);
  for (const auto& g : plan)
    for (int p = g.lo; p <= g.hi; ++p) sf[static_cast<size_t>(p)] = g.sf ? 1 : 0;
  net_.set_factor_layers(sf);
  std::lock_guard lock(mu_);
  groups_done_ = 0;
  group_records_.clear();
  plan_ = plan;
  cost_ = cost;
  iter_start_ = SteadyClock::now();
  iter_ = iter;
  cv_.notify_all();
  return iter_start_;
}

void GradientCommunicator::wait() {
  std::unique_lock lock(mu_);
  cv_.wait(lock, [&] { return thread_.error() || groups_done_ == static_cast<int>(plan_.size()); });
  if (auto e = thread_.error()) std::rethrow_exception(e);
}

std::vector<GroupRecord> GradientCommunicator::group_records() const {
  std::lock_guard lock(mu_);
  return group_records_;
}

void GradientCommunicator::loop() {
  std::vector<float> buf;
  std::vector<char> ready(static_cast<size_t>(net_.param_layers()));
  int64_t served = -1;
  for (;;) {
    int64_t iter;
    mgwfbp::Plan plan;
    comm::LinkCost cost;
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [&] { return stop_ || iter_ > served; });
      if (stop_) return;
      iter = iter_;
      plan = plan_;
      cost = cost_;
    }
    served = iter;
    allreduce_->set_cost(cost);  // only this thread runs the engine
    serve(iter, plan, ready, buf);
  }
}

void GradientCommunicator::serve(int64_t iter, const mgwfbp::Plan& plan, std::vector<char>& ready,
                                 std::vector<float>& buf) {
  std::fill(ready.begin(), ready.end(), 0);
  for (size_t g = 0; g < plan.size(); ++g) {
    const mgwfbp::Group grp = plan[g];
    // Layers become ready in backward order: wait for the group's last-ready layer.
    while (!ready[static_cast<size_t>(grp.lo)]) {
      int p = -1;
      ready_q_.pop(p);
      if (p < 0) throw tbb::user_abort();  // shutdown
      ready[static_cast<size_t>(p)] = 1;
    }
    if (hook_) hook_(iter, static_cast<int>(g), grp, ready);
    GroupRecord rec;
    rec.sf = grp.sf;
    rec.start_us = us_since(iter_start_, SteadyClock::now());
    const int64_t sent = t_.total_counters().bytes_sent;  // only this thread sends during an iteration
    const int64_t id = group_call_id(iter, static_cast<int64_t>(g));
    if (grp.sf)
      allgather_group(grp, id);
    else
      allreduce_group(grp, id, buf);
    rec.bytes_sent = t_.total_counters().bytes_sent - sent;
    rec.end_us = us_since(iter_start_, SteadyClock::now());
    std::lock_guard lock(mu_);
    group_records_.push_back(rec);
    ++groups_done_;
    cv_.notify_all();
  }
}

void GradientCommunicator::allreduce_group(const mgwfbp::Group& grp, int64_t id, std::vector<float>& buf) {
  const float inv = 1.0f / static_cast<float>(t_.size());
  buf.clear();
  for (int p = grp.hi; p >= grp.lo; --p)
    for (Matrix* gm : net_.param_layer(p).grads()) buf.insert(buf.end(), gm->data(), gm->data() + gm->size());
  allreduce_->run(buf, id);
  size_t o = 0;
  for (int p = grp.hi; p >= grp.lo; --p)
    for (Matrix* gm : net_.param_layer(p).grads())
      for (Eigen::Index i = 0; i < gm->size(); ++i) gm->data()[i] = buf[o++] * inv;
}

void GradientCommunicator::allgather_group(const mgwfbp::Group& grp, int64_t id) {
  std::vector<SfBatch> mine;
  for (int p = grp.hi; p >= grp.lo; --p) mine.push_back(factor_batch(net_.factors(p)));
  const auto all = allgather_.run(std::move(mine), id);
  const float inv = 1.0f / static_cast<float>(t_.size());
  std::vector<const SfBatch*> layer(all.size());
  for (int p = grp.hi, k = 0; p >= grp.lo; --p, ++k) {
    for (size_t r = 0; r < all.size(); ++r) layer[r] = &all[r][static_cast<size_t>(k)];
    const auto gs = net_.param_layer(p).grads();
    rebuild_gradient(layer, inv, *gs[0], *gs[1], scratch_);
  }
}

}  // namespace sfb::cnn
