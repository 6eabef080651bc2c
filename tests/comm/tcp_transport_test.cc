// The TCP transport (comm/transport/tcp.h) between threads of this process over loopback: full
// duplex, no head-of-line blocking between sources, bounded unpolled memory with back-pressure,
// bounded waits, and what a peer that leaves looks like. The transport-agnostic behaviour (every
// message once, in order, counters, the set-up collectives) runs in transport_test.cc on TCP too.
#include <sys/stat.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "sfb/comm/transport/tcp.h"
#include "sfb/comm/transport/tcp_connect.h"
#include "sfb/core/error.h"
#include "sfb/core/thread_group.h"
#include "testing/rank_threads.h"
#include "testing/tcp_intruder.h"

namespace sfb::comm {
namespace {

using ::testing::HasSubstr;

Bytes pattern(size_t n, int seed) {
  Bytes b(n);
  uint32_t x = 2654435761u * static_cast<uint32_t>(seed + 1);
  for (size_t i = 0; i < n; ++i) {
    x = x * 1664525u + 1013904223u;
    b[i] = static_cast<std::byte>(x >> 24);
  }
  return b;
}

TEST(TcpTransport, LargeMessagesCrossBothWaysAtOnceIntact) {
  // Every rank sends 24 MiB to every other at the same time: nothing deadlocks, every byte arrives.
  // The I/O thread that moved them has spent CPU time (own_threads_cpu_seconds; in-process: none).
  const size_t n = size_t{24} << 20;
  testing::run_tcp_ranks(3, [&](Transport& t) {
    const double io_before = t.own_threads_cpu_seconds();
    auto mine = std::make_shared<const Bytes>(pattern(n, t.rank()));
    for (int q = 0; q < t.size(); ++q)
      if (q != t.rank()) t.send_shared(q, kTagReduce, mine);
    for (int i = 0; i < t.size() - 1; ++i) {
      const Message m = t.recv(kTagReduce);
      EXPECT_TRUE(m.data == pattern(n, m.src)) << "from rank " << m.src;
    }
    t.flush();
    EXPECT_GT(t.own_threads_cpu_seconds(), io_before);
  });
  EXPECT_EQ(make_inproc_group(2)[0]->own_threads_cpu_seconds(), 0);
}

TEST(TcpTransport, ASmallMessageIsNotHeldUpByAnotherRanksLargeOne) {
  // Rank 1 streams 256 MiB to rank 0; rank 2 then sends 8 bytes. Rank 0 gets rank 2's message while
  // rank 1's is still on its way (a transport that receives one source at a time delivers it after).
  const size_t big = size_t{256} << 20;
  std::atomic<bool> big_sent{false};
  testing::run_tcp_ranks(3, [&](Transport& t) {
    if (t.rank() == 1) {
      t.send_shared(0, kTagSf, std::make_shared<const Bytes>(big, std::byte{7}));
      big_sent.store(true);
      t.flush();
    } else if (t.rank() == 2) {
      while (!big_sent.load()) std::this_thread::yield();
      t.send(0, kTagControl, Bytes(8, std::byte{2}));
    } else {
      const Message first = t.recv(kTagControl);
      EXPECT_EQ(first.src, 2);
      EXPECT_FALSE(t.try_recv(kTagSf).has_value()) << "the large message was complete before the small one";
      const Message second = t.recv(kTagSf);
      EXPECT_EQ(second.data.size(), big);
    }
    t.barrier();
  });
}

TEST(TcpTransport, AWaitReturnsForAMessageOrAWakeAndOtherwiseSleepsToItsDeadline) {
  // The communication thread blocks in wait_for_message() and its producers wake() it (comm_thread.cc):
  // a wake from another thread, before or during the wait, ends it long before its deadline with no
  // message; a wake is used up by one wait; a message ends a wait too.
  using std::chrono::seconds;
  testing::run_tcp_ranks(2, [&](Transport& t) {
    if (t.rank() == 0) {
      const auto waited = [&](SteadyClock::duration d) {
        const auto t0 = SteadyClock::now();
        EXPECT_TRUE(t.wait_for_message(t0 + d));
        return SteadyClock::now() - t0;
      };
      std::thread waker([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        t.wake();
      });
      EXPECT_LT(waited(seconds(120)), seconds(60)) << "a wake during the wait did not end it";
      waker.join();
      EXPECT_FALSE(t.try_recv().has_value());
      t.wake();
      EXPECT_LT(waited(seconds(120)), seconds(60)) << "a wake before the wait did not end it";
      EXPECT_GE(waited(std::chrono::milliseconds(30)), std::chrono::milliseconds(30)) << "a used wake ended a wait";
      t.send(1, kTagControl, Bytes(1, std::byte{1}));  // rank 1 answers
      EXPECT_LT(waited(seconds(120)), seconds(60)) << "a message did not end the wait";
      EXPECT_TRUE(t.try_recv(kTagControl).has_value());
    } else {
      t.send(0, kTagControl, t.recv(kTagControl).data);
    }
    t.barrier();
  });
}

TEST(TcpTransport, UnpolledMessagesAreBoundedAndHoldTheSenderBack) {
  // Rank 0 polls nothing for a while: with 1 MiB allowed unpolled, rank 1's 64 x 1 MiB cannot all
  // leave (its flush times out naming rank 0); once rank 0 polls, every message arrives in order.
  TcpOptions opt;
  opt.max_unpolled_bytes = 1 << 20;
  auto group = testing::make_tcp_group(2, opt);
  Transport& rx = *group[0];
  Transport& tx = *group[1];
  for (int i = 0; i < 64; ++i) tx.send(0, kTagSf, pattern(1 << 20, i));
  tx.set_peer_timeout(0.5);
  try {
    tx.flush();
    ADD_FAILURE() << "64 MiB left although the receiver polled nothing";
  } catch (const CommError& e) {
    EXPECT_THAT(e.what(), HasSubstr("sends to ranks 0 still pending after 0.5 s"));
  }
  for (int i = 0; i < 64; ++i) {
    const Message m = rx.recv(kTagSf);
    ASSERT_TRUE(m.data == pattern(1 << 20, i)) << "message " << i;
  }
  tx.set_peer_timeout(30);
  tx.flush();
  testing::close_group(group);
}

TEST(TcpTransport, APeerThatLeavesIsNamedAndSendsToItFail) {
  auto group = testing::make_tcp_group(2);
  group[1]->set_peer_timeout(0.2);  // its close does not wait long for rank 0's side
  group[1].reset();
  Transport& t = *group[0];
  const auto deadline = SteadyClock::now() + std::chrono::seconds(10);
  while (!t.peer_gone(1) && SteadyClock::now() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_TRUE(t.peer_gone(1));
  EXPECT_THAT([&] { t.send(1, kTagSf, Bytes(4)); },
              ::testing::ThrowsMessage<CommError>(HasSubstr("rank 1, which has closed its connection")));
  t.set_peer_timeout(0.2);
  EXPECT_THAT([&] { t.recv(kTagSf); },
              ::testing::ThrowsMessage<CommError>(HasSubstr("ranks 1 have closed their connections")));
  group[0]->set_peer_timeout(0.2);
  group[0].reset();
}

TEST(TcpTransport, ConnectsOverLoopbackWithoutAnInterfaceAndNamesTheRoute) {
  // No comm.interface: ranks in one network namespace find each other over loopback.
  testing::ThreadBootstrap boot(2);
  std::vector<std::unique_ptr<Transport>> group(2);
  {
    ThreadGroup threads;
    for (int r = 0; r < 2; ++r)
      threads.spawn([&, r] { group[static_cast<size_t>(r)] = make_tcp_transport(boot.for_rank(r), TcpOptions{}); });
    threads.join();
  }
  EXPECT_THAT(dynamic_cast<TcpTransport&>(*group[0]).describe_peer(1), HasSubstr("127.0.0.1:"));
  group[1]->send(0, kTagSf, Bytes(3, std::byte{9}));
  EXPECT_EQ(group[0]->recv(kTagSf).data, Bytes(3, std::byte{9}));
  testing::close_group(group);
}

TEST(TcpTransport, AnUnknownInterfaceIsABadConfigNamingIt) {
  EXPECT_THAT([] { tcp::local_addresses("nosuch0"); },
              ::testing::ThrowsMessage<InvalidArgument>(HasSubstr("comm.interface = \"nosuch0\"")));
  EXPECT_EQ(tcp::local_addresses("127.0.0.1").size(), 1u);
}

TEST(TcpTransport, TheCongestionControlIsSetOnEveryConnectionOrRefusedByName) {
  EXPECT_THAT([] { check_congestion("nosuch_cc"); },
              ::testing::ThrowsMessage<InvalidArgument>(
                  ::testing::AllOf(HasSubstr("comm.tcp_congestion = \"nosuch_cc\""), HasSubstr("this kernel has"))));
  EXPECT_THAT([] { check_congestion("cu bic"); },
              ::testing::ThrowsMessage<InvalidArgument>(HasSubstr("not a congestion control's name")));
  EXPECT_NO_THROW(check_congestion(""));
  EXPECT_NO_THROW(check_congestion("reno"));  // always built in
  TcpOptions opt;
  opt.congestion = "reno";
  testing::ThreadBootstrap boot(3);
  auto group = testing::make_tcp_group(3, opt, boot);
  for (int r = 0; r < 3; ++r)
    for (int q = 0; q < 3; ++q)
      if (q != r) EXPECT_EQ(dynamic_cast<TcpTransport&>(*group[static_cast<size_t>(r)]).congestion_of(q), "reno");
  testing::close_group(group);
}

TEST(TcpTransport, OnlyTheJobsRanksGetInWhileIntrudersHoldTheDoor) {
  // Before any rank connects, an intruder holds idle and slowly dripping connections on every
  // listener, forges a handshake to every accepting rank, floods rank 0 beyond what it handshakes
  // at once, and replays rank 1's recorded handshake to rank 0. Rank 0 reading them one at a time
  // (10 s each) would miss the 15 s set-up.
  const int P = 4;
  testing::Intruder intruder({});
  testing::IntrudedBootstrap boot(P, intruder, /*replay=*/true);
  TcpOptions opt;
  opt.interface = "";  // one network namespace: every rank listens on loopback only
  opt.connect_timeout_s = 15;
  auto group = testing::make_tcp_group(P, opt, boot);
  for (int q = 0; q < P; ++q)
    EXPECT_THAT(dynamic_cast<TcpTransport&>(*group[static_cast<size_t>(q)]).describe_peer((q + 1) % P),
                HasSubstr("127.0.0.1:"));
  ThreadGroup threads;
  for (int r = 0; r < P; ++r)
    threads.spawn([&, r] {
      Transport& t = *group[static_cast<size_t>(r)];
      for (int q = 0; q < P; ++q)
        if (q != r) t.send(q, kTagSf, pattern(1000, r));
      for (int i = 0; i < P - 1; ++i) {
        const auto m = t.recv(kTagSf);
        EXPECT_EQ(m.data, pattern(1000, m.src));
      }
    });
  threads.join();
  const auto until = SteadyClock::now() + std::chrono::seconds(10);
  while (intruder.forged_refused() < intruder.forged() && SteadyClock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(intruder.forged(), P - 1);
  EXPECT_EQ(intruder.forged_refused(), intruder.forged());
  // Rank 1 reached rank 0 through a man in the middle that replayed its hello and finish to rank 0
  // on a connection of its own: refused (a fresh nonce), while the relayed connection carried the job.
  EXPECT_TRUE(boot.replay_refused());
  testing::close_group(group);
}

TEST(TcpTransport, RanksWithDifferentSecretsNeverConnect) {
  testing::ThreadBootstrap boot(2);
  std::vector<std::string> errors(2);
  ThreadGroup threads;
  for (int r = 0; r < 2; ++r)
    threads.spawn([&, r] {
      TcpOptions opt;
      opt.interface = "127.0.0.1";
      opt.connect_timeout_s = 1.5;
      opt.secret = r == 0 ? "the first secret, 32 bytes long." : "the other secret, 32 bytes long.";
      try {
        make_tcp_transport(boot.for_rank(r), opt);
      } catch (const CommError& e) {
        errors[static_cast<size_t>(r)] = e.what();
      }
    });
  threads.join();
  EXPECT_THAT(errors[1], HasSubstr("does not prove this job's key"));
  EXPECT_THAT(errors[1], HasSubstr("comm.secret_file"));
  EXPECT_THAT(errors[0], HasSubstr("ranks 1 did not connect"));
  // The connector saw the wrong MAC and hung up: all the acceptor can tell is a half-done handshake.
  EXPECT_THAT(errors[0], HasSubstr("refused meanwhile: 127.0.0.1"));
}

TEST(TcpTransport, ASecretFileMustBePrivateAndLongEnough) {
  const auto dir = std::filesystem::temp_directory_path() / ("sfb_secret_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const auto write = [&](const std::string& name, const std::string& bytes, mode_t mode) {
    const auto p = (dir / name).string();
    std::ofstream(p) << bytes;
    ::chmod(p.c_str(), mode);
    return p;
  };
  const std::string good = std::string(32, 'k');
  EXPECT_EQ(read_secret_file(write("ok", good, 0600)), good);
  EXPECT_THAT([&] { read_secret_file(write("shared", good, 0644)); },
              ::testing::ThrowsMessage<InvalidArgument>(HasSubstr("chmod 600")));
  EXPECT_THAT([&] { read_secret_file(write("short", "abc", 0600)); },
              ::testing::ThrowsMessage<InvalidArgument>(HasSubstr("3 bytes")));
  EXPECT_THAT([&] { read_secret_file((dir / "none").string()); },
              ::testing::ThrowsMessage<InvalidArgument>(HasSubstr("comm.secret_file = \"")));
  EXPECT_THAT([&] { read_secret_file(dir.string()); },
              ::testing::ThrowsMessage<InvalidArgument>(HasSubstr("not a regular file")));
  std::filesystem::remove_all(dir);
}

TEST(TcpTransport, BarrierWaitsForEveryRank) {
  std::atomic<int> arrived{0};
  testing::run_tcp_ranks(4, [&](Transport& t) {
    if (t.rank() == 3) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    arrived.fetch_add(1);
    t.barrier();
    EXPECT_EQ(arrived.load(), 4);
    t.barrier();
  });
}

}  // namespace
}  // namespace sfb::comm
