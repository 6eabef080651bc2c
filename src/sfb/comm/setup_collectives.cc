#include "sfb/comm/setup_collectives.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "sfb/core/bytes.h"
#include "sfb/core/error.h"

namespace sfb::comm {
namespace {

Bytes pack(std::span<const int64_t> v) {
  ByteWriter w(v.size_bytes());
  w.put_array(v);
  return w.take();
}

std::vector<int64_t> unpack(const Message& m, size_t expected, int me) {
  if (m.data.size() != expected * 8)
    throw CommError(fmt::format("rank {}: collective message from rank {} has {} bytes, expected {}", me, m.src,
                                m.data.size(), expected * 8));
  std::vector<int64_t> v(expected);
  ByteReader r(m.data, "collective message", ByteReader::Source::kMessage);
  r.get_array(v.data(), expected, "values");
  return v;
}

}  // namespace

std::vector<int64_t> allgather_i64(Transport& t, int64_t value) {
  const int p = t.size();
  const int me = t.rank();
  std::vector<int64_t> all(static_cast<size_t>(p));
  all[static_cast<size_t>(me)] = value;
  // Gather at rank 0, then rank 0 sends the full vector to everyone.
  if (me == 0) {
    for (int i = 1; i < p; ++i) {
      Message m = t.recv(kTagCollective);
      all[static_cast<size_t>(m.src)] = unpack(m, 1, me)[0];
    }
    const Bytes b = pack(all);
    for (int i = 1; i < p; ++i) t.send(i, kTagCollective, b);
  } else {
    const int64_t v[1] = {value};
    t.send(0, kTagCollective, pack(v));
    Message m = t.recv(kTagCollective);
    if (m.src != 0) throw CommError(fmt::format("rank {}: collective reply from rank {}, expected 0", me, m.src));
    all = unpack(m, static_cast<size_t>(p), me);
  }
  return all;
}

Bytes broadcast_bytes(Transport& t, int root, std::span<const std::byte> data) {
  if (t.rank() == root) {
    auto shared = std::make_shared<const Bytes>(data.begin(), data.end());
    for (int q = 0; q < t.size(); ++q)
      if (q != root) t.send_shared(q, kTagCollective, shared);
    return *shared;
  }
  Message m = t.recv(kTagCollective);
  if (m.src != root)
    throw CommError(fmt::format("rank {}: broadcast from rank {}, expected rank {}", t.rank(), m.src, root));
  return std::move(m.data);
}

void check_all_equal(Transport& t, uint64_t value, const std::string& what) {
  check_values_equal(allgather_i64(t, static_cast<int64_t>(value)), what);
}

void check_values_equal(std::span<const int64_t> all, const std::string& what) {
  std::vector<std::string> bad;
  for (size_t r = 1; r < all.size(); ++r) {
    if (all[r] != all[0]) bad.push_back(fmt::format("rank {} has {:016x}", r, static_cast<uint64_t>(all[r])));
  }
  if (!bad.empty())
    throw InvalidArgument(
        fmt::format("{} differs between ranks: rank 0 has {:016x}, {}; every rank must run "
                    "the same config and binary",
                    what, static_cast<uint64_t>(all[0]), fmt::join(bad, ", ")));
}

}  // namespace sfb::comm
