#include <cstring>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "sfb/comm/setup_collectives.h"
#include "sfb/comm/transport/prefix.h"
#include "sfb/core/error.h"
#include "testing/rank_threads.h"

namespace sfb::comm {
namespace {

Bytes payload(int src, int dst, size_t n) {
  Bytes b(n);
  for (size_t i = 0; i < n; ++i) b[i] = static_cast<std::byte>((src * 31 + dst * 7 + i) & 0xff);
  return b;
}

// Every transport-agnostic test runs on the in-process transport and on TCP over loopback.
class Ranks : public ::testing::TestWithParam<std::tuple<std::string, int>> {
 protected:
  template <typename Fn>
  void run(Fn fn) {
    testing::run_ranks_on(std::get<0>(GetParam()), std::get<1>(GetParam()), fn);
  }
  int ranks() const { return std::get<1>(GetParam()); }
};

TEST_P(Ranks, AllToAllDeliversEveryMessageAndCounts) {
  const int p = ranks();
  const std::vector<size_t> sizes = {0, 1, 1001};
  run([&](Transport& t) {
    for (int dst = 0; dst < p; ++dst)
      for (size_t n : sizes) t.send(dst, kTagSf, payload(t.rank(), dst, n));
    std::vector<int> got(static_cast<size_t>(p), 0);
    for (int i = 0; i < p * static_cast<int>(sizes.size()); ++i) {
      Message m = t.recv(kTagSf);
      // FIFO per sender: the i-th message from a sender has the i-th size.
      EXPECT_EQ(m.data, payload(m.src, t.rank(), sizes[static_cast<size_t>(got[m.src]++)]));
    }
    t.barrier();
    for (int q = 0; q < p; ++q) {
      EXPECT_EQ(t.counters(q).msgs_sent, 3);
      EXPECT_EQ(t.counters(q).bytes_sent, 1002);
      EXPECT_EQ(t.counters(q).bytes_received, 1002);
    }
    EXPECT_FALSE(t.try_recv().has_value());
  });
}

TEST_P(Ranks, AllgatherAndEqualityCheck) {
  const int p = ranks();
  run([&](Transport& t) {
    const auto all = allgather_i64(t, 100 + t.rank());
    for (int r = 0; r < p; ++r) EXPECT_EQ(all[r], 100 + r);
    check_all_equal(t, 42, "value");
    if (p > 1) {
      try {
        check_all_equal(t, t.rank() == p - 1 ? 7 : 42, "the config");
        ADD_FAILURE() << "mismatch not detected";
      } catch (const InvalidArgument& e) {
        EXPECT_THAT(e.what(), ::testing::HasSubstr(fmt::format("rank {} has 0000000000000007", p - 1)));
      }
    }
  });
}

INSTANTIATE_TEST_SUITE_P(Transport, Ranks,
                         ::testing::Combine(::testing::Values("inproc", "tcp"), ::testing::Values(1, 2, 3, 4, 7)),
                         [](const auto& info) {
                           return std::get<0>(info.param) + std::to_string(std::get<1>(info.param));
                         });

TEST(Transport, TaggedReceiveStashesOtherTags) {
  testing::run_ranks(2, [](Transport& t) {
    if (t.rank() == 0) {
      const std::byte a[1] = {std::byte{1}}, b[1] = {std::byte{2}};
      t.send(1, kTagSf, a);
      t.send(1, kTagCollective, b);
    } else {
      const Message c = t.recv(kTagCollective);
      EXPECT_EQ(c.data[0], std::byte{2});
      const auto s = t.try_recv();
      ASSERT_TRUE(s.has_value());
      EXPECT_EQ(s->tag, kTagSf);
      EXPECT_EQ(s->data[0], std::byte{1});
    }
  });
}

TEST(Transport, BadDestinationIsACommError) {
  auto g = make_inproc_group(2);
  EXPECT_THROW(g[0]->send(2, kTagSf, {}), CommError);
  EXPECT_THROW(g[0]->send(-1, kTagSf, {}), CommError);
}

// The first 3 of 4 ranks as a transport of their own: collectives and a barrier among them while
// rank 3 waits; a message from rank 3 meanwhile is an error naming it; rank 3 cannot be in it.
TEST(PrefixTransport, TheFirstRanksMeasureAmongThemselves) {
  std::vector<std::vector<int64_t>> got(3);
  testing::run_ranks(4, [&](Transport& t) {
    if (t.rank() == 3) {
      EXPECT_THAT(
          [&] { PrefixTransport bad(t, 3); },
          ::testing::ThrowsMessage<InvalidArgument>(::testing::HasSubstr("first 3 of 4 ranks cannot serve rank 3")));
      t.recv(kTagControl);  // released once the others are done
      t.send(0, kTagSf, {});
      return;
    }
    PrefixTransport w(t, 3);
    EXPECT_EQ(w.size(), 3);
    EXPECT_EQ(w.rank(), t.rank());
    got[static_cast<size_t>(t.rank())] = allgather_i64(w, 10 + t.rank());
    w.barrier();
    if (t.rank() != 0) return;
    t.send(3, kTagControl, {});
    EXPECT_THAT([&] { w.recv(kTagSf); },
                ::testing::ThrowsMessage<CommError>(::testing::HasSubstr("from rank 3, outside the first 3 ranks")));
  });
  for (const auto& g : got) EXPECT_EQ(g, (std::vector<int64_t>{10, 11, 12}));
}

}  // namespace
}  // namespace sfb::comm
