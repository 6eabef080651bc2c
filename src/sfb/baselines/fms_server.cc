#include "sfb/baselines/fms_server.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <optional>
#include <vector>

#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include "sfb/baselines/ps_codec.h"
#include "sfb/core/error.h"
#include "sfb/core/timer.h"

namespace sfb::baselines {

FmsServer::FmsServer(const FmsConfig& cfg, double peer_timeout_s, comm::Transport& transport, int64_t rows,
                     int64_t cols, runtime::ModelProx prox)
    : peer_timeout_s_(peer_timeout_s), t_(transport), prox_(std::move(prox)), S_(static_cast<int>(cfg.servers)) {
  P_ = t_.size() - S_;
  s_ = t_.rank() - P_;
  SFB_CHECK(P_ >= 1 && s_ >= 0 && s_ < S_, "rank {} of {} is not one of the {} parameter servers", t_.rank(), t_.size(),
            S_);
  blocks_ = ps_blocks(rows, cols, s_, S_);
  row_begin_ = blocks_.begin;
  rows_.resize(blocks_.end - blocks_.begin, cols);
  init_block_.assign(static_cast<size_t>(blocks_.count()), 0);
  block_next_.assign(static_cast<size_t>(blocks_.count()), 0);
}

// "workers 1, 3 (block 4 of clock 7)": the oldest pushes the server waits for.
std::string FmsServer::missing_pushes() const {
  std::vector<int> missing;
  int64_t clock = version_, block = 0;
  if (!block_next_.empty() && !prox_.prox) {
    block = std::min_element(block_next_.begin(), block_next_.end()) - block_next_.begin();
    clock = block_next_[static_cast<size_t>(block)];
  }
  const auto slot = pushes_.find(clock);
  for (int p = 0; p < P_; ++p) {
    bool pushed = false;
    if (slot != pushes_.end()) {
      if (prox_.prox) {  // the whole clock: a worker is missing when any of its blocks is
        pushed = true;
        for (const auto& b : slot->second.block)
          pushed = pushed && !b.empty() && !b[static_cast<size_t>(p)].data.empty();
      } else {
        const auto& b = slot->second.block[static_cast<size_t>(block)];
        pushed = !b.empty() && !b[static_cast<size_t>(p)].data.empty();
      }
    }
    if (!bye_[static_cast<size_t>(p)] && !pushed) missing.push_back(p);
  }
  return fmt::format("workers {} (block {} of clock {})", fmt::join(missing, ", "), block, clock);
}

// What the server waits for: rank 0's INIT (and which workers have not said BYE, once some have),
// the other servers' rows of a general prox's clock, or the oldest pushes.
std::string FmsServer::waiting_for() const {
  if (version_ < 0) {
    std::vector<int> no_bye;
    for (int p = 0; p < P_; ++p)
      if (!bye_[static_cast<size_t>(p)]) no_bye.push_back(p);
    return fmt::format("worker rank 0's INIT ({} of {} blocks of its initial rows in){}", init_blocks_, blocks_.count(),
                       byes_ > 0 ? fmt::format("; no BYE from workers {}", fmt::join(no_bye, ", ")) : "");
  }
  if (gathering_) {
    std::vector<int> missing;
    const auto got = shards_.find(version_);
    for (int s = 0; s < S_; ++s)
      if (s != s_ && (got == shards_.end() || got->second.empty() || got->second[static_cast<size_t>(s)].data.empty()))
        missing.push_back(P_ + s);
    return fmt::format("the rows of servers {}", fmt::join(missing, ", "));
  }
  return missing_pushes();
}

void FmsServer::check_timeout(double limit_s) const {
  if (last_progress_.seconds() <= limit_s) return;
  throw CommError(fmt::format("server rank {}: nothing for {} s ({}) at version {}; waiting for {}", t_.rank(), limit_s,
                              limit_s > peer_timeout_s_ ? "the first message's allowance" : "runtime.peer_timeout_s",
                              version_, waiting_for()));
}

// Rank 0's initial rows, block by block (each once); the server starts at version h.clock with the last.
void FmsServer::on_init(comm::Message& m, const PsHeader& h) {
  const int64_t b = blocks_.block_of(h.row_begin, h.rows);
  if (m.src != 0 || version_ >= 0 || b < 0 || h.cols != rows_.cols() || init_block_[static_cast<size_t>(b)])
    throw CommError(
        fmt::format("server rank {}: INIT from rank {} of rows [{}, {}) x {}; only rank 0 sends this "
                    "server's rows [{}, {}) x {}, in blocks of {} rows, each once, before training",
                    t_.rank(), m.src, h.row_begin, h.row_begin + h.rows, h.cols, blocks_.begin, blocks_.end,
                    rows_.cols(), blocks_.rows_per_block));
  std::copy(ps_payload(m.data), ps_payload(m.data) + h.rows * h.cols,
            rows_.data() + (h.row_begin - row_begin_) * h.cols);
  init_block_[static_cast<size_t>(b)] = 1;
  t_.send(0, comm::kTagPs, encode_ps(PsType::kInitAck, h.clock, h.row_begin, 0, 0, nullptr));  // rank 0's window
  if (++init_blocks_ < blocks_.count()) return;
  version_ = h.clock;
  block_next_.assign(static_cast<size_t>(blocks_.count()), version_);
  spdlog::info("parameter server {}: rows [{}, {}) x {} in {} blocks from version {}", s_, row_begin_, blocks_.end,
               rows_.cols(), blocks_.count(), version_);
}

void FmsServer::on_push(comm::Message& m, const PsHeader& h) {
  if (version_ < 0) {
    // PUSH messages that arrive before rank 0's INIT (no order holds across senders) wait.
    early_.push_back(std::move(m));
    return;
  }
  const int64_t b = blocks_.block_of(h.row_begin, h.rows);
  const int64_t next = b >= 0 && !prox_.prox ? block_next_[static_cast<size_t>(b)] : version_;
  if (b < 0 || h.cols != rows_.cols() || h.clock < next)
    throw CommError(
        fmt::format("server rank {}: PUSH from rank {} of rows [{}, {}) x {} clock {}; this server holds "
                    "rows [{}, {}) x {} in blocks of {} rows, at version {}",
                    t_.rank(), m.src, h.row_begin, h.row_begin + h.rows, h.cols, h.clock, row_begin_,
                    row_begin_ + rows_.rows(), rows_.cols(), blocks_.rows_per_block, next));
  auto& c = pushes_[h.clock];
  if (c.block.empty()) {
    c.block.resize(static_cast<size_t>(blocks_.count()));
    c.count.assign(static_cast<size_t>(blocks_.count()), 0);
  }
  auto& slot = c.block[static_cast<size_t>(b)];
  slot.resize(static_cast<size_t>(P_));
  if (!slot[static_cast<size_t>(m.src)].data.empty())
    throw CommError(
        fmt::format("server rank {}: second PUSH of block {} of clock {} from rank {}", t_.rank(), b, h.clock, m.src));
  slot[static_cast<size_t>(m.src)] = std::move(m);
  if (++c.count[static_cast<size_t>(b)] == P_) ++c.complete;
  if (prox_.prox)
    publish_complete_clocks();
  else
    apply_ready_blocks(b);
}

void FmsServer::on_shard(comm::Message& m, const PsHeader& h) {
  const int from = m.src - P_;
  if (version_ < 0 && prox_.prox) {
    early_.push_back(std::move(m));  // another server may be a clock ahead of rank 0's INIT to this one
    return;
  }
  if (!prox_.prox || version_ < 0 || h.clock < version_ || h.cols != rows_.cols())
    throw CommError(
        fmt::format("server rank {}: unexpected SHARD of clock {} ({} columns) from server rank {} at "
                    "version {}",
                    t_.rank(), h.clock, h.cols, m.src, version_));
  auto& slot = shards_[h.clock];
  slot.resize(static_cast<size_t>(S_));
  if (!slot[static_cast<size_t>(from)].data.empty())
    throw CommError(fmt::format("server rank {}: second SHARD of clock {} from rank {}", t_.rank(), h.clock, m.src));
  slot[static_cast<size_t>(from)] = std::move(m);
  publish_complete_clocks();
}

// Adds clock `clock`'s pushes of block b in worker-rank order, each followed by the scaling prox.
void FmsServer::apply_block(int64_t clock, int64_t b) {
  Stopwatch sw;
  auto& slot = pushes_[clock].block[static_cast<size_t>(b)];
  const int64_t r0 = blocks_.block_begin(b) - row_begin_, n = blocks_.block_rows(b);
  auto rows = rows_.middleRows(r0, n);
  for (const auto& pm : slot) {
    const ConstMatrixMap push(ps_payload(pm.data), n, rows_.cols());
    if (prox_.scale)
      rows = static_cast<float>(prox_.scale(clock)) * (rows + push);
    else
      rows += push;
  }
  std::vector<comm::Message>().swap(slot);
  st_.apply_s += sw.seconds();
}

// Block b's rows of `version` to every worker.
void FmsServer::publish_block(int64_t version, int64_t b) {
  const int64_t r0 = blocks_.block_begin(b) - row_begin_, n = blocks_.block_rows(b);
  auto buf = std::make_shared<const comm::Bytes>(
      encode_ps(PsType::kPull, version, blocks_.block_begin(b), n, rows_.cols(), rows_.data() + r0 * rows_.cols()));
  for (int p = 0; p < P_; ++p) t_.send_shared(p, comm::kTagPs, buf);
}

// Pipelined (no general prox): applies and publishes block b for every clock whose pushes of it are
// complete, in clock order; a clock whose every block is published is a new version.
void FmsServer::apply_ready_blocks(int64_t b) {
  auto& next = block_next_[static_cast<size_t>(b)];
  for (;;) {
    const auto it = pushes_.find(next);
    if (it == pushes_.end() || it->second.count[static_cast<size_t>(b)] < P_) return;
    apply_block(next, b);
    publish_block(next + 1, b);
    if (++it->second.applied == blocks_.count()) {
      pushes_.erase(it);
      ++st_.clocks;
    }
    ++next;
    version_ = *std::min_element(block_next_.begin(), block_next_.end());
  }
}

// With S > 1: once every other server's rows of version_ are here, assembles W, applies the
// general prox once per worker's batch and keeps this server's rows. False while rows are missing.
bool FmsServer::gathered_prox() {
  auto& got = shards_[version_];
  int have = 0;
  for (const auto& m : got) have += m.data.empty() ? 0 : 1;
  if (have < S_ - 1) return false;
  int64_t J = row_begin_ + rows_.rows();
  for (const auto& m : got)
    if (!m.data.empty()) {
      const PsHeader h = decode_ps_header(m.data, m.src);
      J = std::max(J, h.row_begin + h.rows);
    }
  whole_.resize(J, rows_.cols());
  whole_.middleRows(row_begin_, rows_.rows()) = rows_;
  for (const auto& m : got)
    if (!m.data.empty()) {
      const PsHeader h = decode_ps_header(m.data, m.src);
      whole_.middleRows(h.row_begin, h.rows) = ConstMatrixMap(ps_payload(m.data), h.rows, h.cols);
    }
  shards_.erase(version_);
  for (int p = 0; p < P_; ++p) prox_.prox(view(whole_), version_);
  rows_ = whole_.middleRows(row_begin_, rows_.rows());
  return true;
}

// A model with a general prox: applies complete clocks in order (every block of every worker), each
// in worker-rank order with the proximal step, and publishes every new version block by block.
void FmsServer::publish_complete_clocks() {
  for (;;) {
    if (gathering_) {
      Stopwatch sw;
      const bool done = gathered_prox();
      st_.apply_s += sw.seconds();
      if (!done) return;
      gathering_ = false;
    } else {
      const auto c = pushes_.find(version_);
      if (c == pushes_.end() || c->second.complete < blocks_.count()) return;
      for (int64_t b = 0; b < blocks_.count(); ++b) apply_block(version_, b);
      pushes_.erase(c);
      if (S_ > 1) {
        auto buf = std::make_shared<const comm::Bytes>(
            encode_ps(PsType::kShard, version_, row_begin_, rows_.rows(), rows_.cols(), rows_.data()));
        for (int s = 0; s < S_; ++s)
          if (s != s_) t_.send_shared(P_ + s, comm::kTagPs, buf);
        gathering_ = true;
        continue;
      }
      Stopwatch sw;
      for (int p = 0; p < P_; ++p) prox_.prox(view(rows_), version_);
      st_.apply_s += sw.seconds();
    }
    ++version_;
    ++st_.clocks;
    for (int64_t b = 0; b < blocks_.count(); ++b) publish_block(version_, b);
  }
}

void FmsServer::handle(comm::Message& m) {
  if (m.tag != comm::kTagPs || m.src >= P_ + S_ || m.src == t_.rank())
    throw CommError(fmt::format("server rank {}: unexpected message ({}) from rank {} at version {}; waiting for {}",
                                t_.rank(), comm::tag_name(m.tag), m.src, version_, waiting_for()));
  const PsHeader h = decode_ps_header(m.data, m.src);
  if ((m.src >= P_) != (h.type == PsType::kShard))
    throw CommError(fmt::format("server rank {}: message of type {} from {} rank {}", t_.rank(),
                                static_cast<uint32_t>(h.type), m.src >= P_ ? "server" : "worker", m.src));
  switch (h.type) {
    case PsType::kShard: return on_shard(m, h);
    case PsType::kInit: return on_init(m, h);
    case PsType::kPush: return on_push(m, h);
    case PsType::kBye:
      if (!bye_[static_cast<size_t>(m.src)]) {
        bye_[static_cast<size_t>(m.src)] = 1;
        ++byes_;
      }
      return;
    case PsType::kPull:
    case PsType::kInitAck:
      throw CommError(fmt::format("server rank {}: {} from worker rank {}", t_.rank(),
                                  h.type == PsType::kPull ? "PULL" : "INIT_ACK", m.src));
  }
}

ServerStats FmsServer::run(double first_message_s) {
  bye_.assign(static_cast<size_t>(P_), 0);
  last_progress_.reset();
  double limit_s = std::max(peer_timeout_s_, first_message_s);
  Backoff backoff;
  while (byes_ < P_) {
    std::optional<comm::Message> m;
    if (version_ >= 0 && !early_.empty()) {
      m = std::move(early_.back());
      early_.pop_back();
    } else {
      m = t_.try_recv();
    }
    if (!m) {
      check_timeout(limit_s);
      // Blocks until a message arrives (a transport that cannot wait is polled): a server has
      // nothing else to wait on, and polling took about half of a 1/8-core host's budget.
      if (!t_.wait_for_message(SteadyClock::now() + std::chrono::milliseconds(50))) backoff.idle();
      continue;
    }
    backoff.reset();
    last_progress_.reset();
    limit_s = peer_timeout_s_;
    handle(*m);
  }
  t_.flush();
  st_.traffic = t_.total_counters();
  return st_;
}

}  // namespace sfb::baselines
