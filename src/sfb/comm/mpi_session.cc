#include "sfb/comm/mpi_session.h"

#include <mpi.h>

#include <algorithm>

#include "sfb/comm/transport/mpi.h"
#include "sfb/core/error.h"

namespace sfb::comm {

MpiSession::MpiSession(int& argc, char**& argv, Threads threads) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, threads == Threads::kMultiple ? MPI_THREAD_MULTIPLE : MPI_THREAD_SERIALIZED, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
  MPI_Comm local;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &local);
  MPI_Comm_rank(local, &local_rank_);
  MPI_Comm_size(local, &ranks_on_host_);
  MPI_Comm_free(&local);
}

MpiSession::~MpiSession() { finalize(); }

void MpiSession::finalize() {
  if (finalized_) return;
  finalized_ = true;
  MPI_Finalize();
}

std::unique_ptr<Transport> MpiSession::make_transport(const TransportOptions& opt) const {
  if (opt.kind == TransportKind::kMpi) return make_mpi_transport(MPI_COMM_WORLD);
  SFB_ENFORCE(opt.kind == TransportKind::kTcp, "transport {} (resolve \"auto\" first)", opt.kind);
  TcpOptions tcp;
  tcp.interface = opt.interface;
  tcp.connect_timeout_s = opt.connect_timeout_s;
  tcp.secret = opt.secret;
  tcp.congestion = opt.congestion;
  return make_tcp_transport(bootstrap(), tcp);
}

Bootstrap MpiSession::bootstrap() const {
  return {rank_, size_, [](const Bytes& mine) {
            int size = 0;
            MPI_Comm_size(MPI_COMM_WORLD, &size);
            const int len = static_cast<int>(mine.size());
            std::vector<int> lens(static_cast<size_t>(size)), offsets(static_cast<size_t>(size));
            SFB_MPI_CALL(MPI_Allgather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, MPI_COMM_WORLD));
            for (size_t r = 1; r < lens.size(); ++r) offsets[r] = offsets[r - 1] + lens[r - 1];
            Bytes all(static_cast<size_t>(offsets.back() + lens.back()));
            SFB_MPI_CALL(MPI_Allgatherv(mine.data(), len, MPI_BYTE, all.data(), lens.data(), offsets.data(), MPI_BYTE,
                                        MPI_COMM_WORLD));
            std::vector<Bytes> out;
            for (size_t r = 0; r < lens.size(); ++r)
              out.emplace_back(all.begin() + offsets[r], all.begin() + offsets[r] + lens[r]);
            return out;
          }};
}

std::vector<int64_t> MpiSession::allgather(int64_t value) const {
  std::vector<int64_t> all(static_cast<size_t>(size_));
  SFB_MPI_CALL(MPI_Allgather(&value, 1, MPI_INT64_T, all.data(), 1, MPI_INT64_T, MPI_COMM_WORLD));
  return all;
}

void MpiSession::barrier() const { SFB_MPI_CALL(MPI_Barrier(MPI_COMM_WORLD)); }

double MpiSession::max(double value) const {
  double out = 0;
  SFB_MPI_CALL(MPI_Allreduce(&value, &out, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD));
  return out;
}

bool MpiSession::any(bool flag) const {
  int mine = flag ? 1 : 0, any = 0;
  SFB_MPI_CALL(MPI_Allreduce(&mine, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD));
  return any != 0;
}

std::vector<std::string> MpiSession::gather(const std::string& value) const {
  const int len = static_cast<int>(value.size());
  std::vector<int> lens(rank_ == 0 ? static_cast<size_t>(size_) : 0), offsets(lens.size());
  SFB_MPI_CALL(MPI_Gather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, 0, MPI_COMM_WORLD));
  std::string all;
  if (rank_ == 0) {
    for (size_t r = 1; r < lens.size(); ++r) offsets[r] = offsets[r - 1] + lens[r - 1];
    all.resize(static_cast<size_t>(offsets.back() + lens.back()));
  }
  SFB_MPI_CALL(
      MPI_Gatherv(value.data(), len, MPI_CHAR, all.data(), lens.data(), offsets.data(), MPI_CHAR, 0, MPI_COMM_WORLD));
  std::vector<std::string> out;
  for (size_t r = 0; r < lens.size(); ++r)
    out.push_back(all.substr(static_cast<size_t>(offsets[r]), static_cast<size_t>(lens[r])));
  return out;
}

int MpiSession::broadcast(int value, int root) const {
  SFB_MPI_CALL(MPI_Bcast(&value, 1, MPI_INT, root, MPI_COMM_WORLD));
  return value;
}

void MpiSession::abort(int code) const {
  MPI_Abort(MPI_COMM_WORLD, code);
  std::abort();  // MPI_Abort does not return; this keeps [[noreturn]] honest if it does
}

std::vector<TimedSize> MpiSession::measure_allreduce(const MpiAllreduceBench& opt) const {
  SFB_CHECK(opt.min_bytes >= 4 && opt.max_bytes >= opt.min_bytes && opt.repeats >= 1,
            "benchmark sizes must satisfy 4 <= min <= max, got {}..{}", opt.min_bytes, opt.max_bytes);
  std::vector<float> in(static_cast<size_t>(opt.max_bytes / 4), 1.0f), out(in.size());
  std::vector<TimedSize> samples;
  for (int64_t bytes = opt.min_bytes; bytes <= opt.max_bytes; bytes *= 2) {
    const int count = static_cast<int>(bytes / 4);
    for (int i = 0; i < opt.warmup; ++i)
      SFB_MPI_CALL(MPI_Allreduce(in.data(), out.data(), count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD));
    std::vector<double> times;
    for (int i = 0; i < opt.repeats; ++i) {
      SFB_MPI_CALL(MPI_Barrier(MPI_COMM_WORLD));
      const double t0 = MPI_Wtime();
      SFB_MPI_CALL(MPI_Allreduce(in.data(), out.data(), count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD));
      double dt = MPI_Wtime() - t0, slowest = 0;
      SFB_MPI_CALL(MPI_Allreduce(&dt, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD));
      times.push_back(slowest * 1e6);
    }
    std::nth_element(times.begin(), times.begin() + static_cast<ptrdiff_t>(times.size() / 2), times.end());
    samples.push_back({bytes, times[times.size() / 2]});
  }
  return samples;
}

}  // namespace sfb::comm
