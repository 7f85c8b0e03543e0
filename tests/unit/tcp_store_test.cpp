// runtime/tcp_store.h: rank 0 serves, every rank sets and gets across
// processes (fork), gets wait for keys set later, the unique-id exchange of
// Communicator::create, and the errors: a key nobody sets, a store nobody
// serves, a bad MASTER_PORT.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "runtime/collective.h"
#include "runtime/tcp_store.h"
#include "support/error.h"

namespace spora {
namespace {

int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t n = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &n);
  ::close(fd);
  return ntohs(a.sin_port);
}

// Runs `child(rank)` in `n` - 1 forked processes (ranks 1..n-1) and
// `parent()` here (rank 0); true when every child exited 0.
template <class Child, class Parent>
bool with_ranks(int n, Child child, Parent parent) {
  std::vector<pid_t> pids;
  for (int r = 1; r < n; ++r) {
    const pid_t pid = fork();
    if (pid == 0) {
      int code = 1;
      try {
        code = child(r) ? 0 : 1;
      } catch (const std::exception& e) {
        std::fprintf(stderr, "rank %d: %s\n", r, e.what());
      }
      _exit(code);
    }
    pids.push_back(pid);
  }
  parent();
  bool ok = true;
  for (pid_t p : pids) {
    int st = 0;
    waitpid(p, &st, 0);
    ok = ok && WIFEXITED(st) && WEXITSTATUS(st) == 0;
  }
  return ok;
}

TEST(TcpStore, ThreeProcessesSetAndGetEachOthersKeys) {
  const int port = free_port();
  const bool children_ok = with_ranks(
      3,
      [&](int r) {
        TcpStore s("127.0.0.1", port, false, 20000);
        s.set("from/" + std::to_string(r), "hello from " + std::to_string(r));
        const bool ok = s.get("from/0") == std::string("rank 0 says hi\0with a zero", 26) &&
                        s.get("from/" + std::to_string(3 - r)) == "hello from " + std::to_string(3 - r);
        s.set("read/" + std::to_string(r), "");
        return ok;
      },
      [&] {
        TcpStore s("127.0.0.1", port, true, 20000);
        s.set("from/0", std::string("rank 0 says hi\0with a zero", 26));  // bytes, not C strings
        EXPECT_EQ(s.get("from/1"), "hello from 1");
        EXPECT_EQ(s.get("from/2"), "hello from 2");
        // Serve until both children have read everything they wait for.
        s.get("read/1");
        s.get("read/2");
      });
  EXPECT_TRUE(children_ok);
}

TEST(TcpStore, UniqueIdOfRankZeroReachesEveryRank) {
  const int port = free_port();
  auto make = [](spora_comm_id_t* id) {
    for (size_t i = 0; i < sizeof id->bytes; ++i) id->bytes[i] = static_cast<uint8_t>(i * 7 + 3);
  };
  const bool children_ok = with_ranks(
      4,
      [&](int r) {
        TcpStore s("127.0.0.1", port, false, 20000);
        const spora_comm_id_t id = exchange_unique_id(s, "test", r, 4, [](spora_comm_id_t*) {
          throw Error(Code::kInternal, "only rank 0 makes the id");
        });
        spora_comm_id_t want{};
        for (size_t i = 0; i < sizeof want.bytes; ++i) want.bytes[i] = static_cast<uint8_t>(i * 7 + 3);
        return std::memcmp(id.bytes, want.bytes, sizeof want.bytes) == 0;
      },
      [&] {
        TcpStore s("127.0.0.1", port, true, 20000);
        const spora_comm_id_t id = exchange_unique_id(s, "test", 0, 4, make);  // returns once all have read it
        EXPECT_EQ(id.bytes[1], 10);
      });
  EXPECT_TRUE(children_ok);
}

TEST(TcpStore, ErrorsNameTheKeyTheAddressAndTheSetting) {
  const int port = free_port();
  {
    TcpStore s("127.0.0.1", port, true, 200);
    try {
      s.get("never/set");
      FAIL() << "no error";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), Code::kTimeout);
      EXPECT_NE(std::string(e.what()).find("no rank set 'never/set' within 200 ms (store at 127.0.0.1:" +
                                           std::to_string(port) + ")"),
                std::string::npos)
          << e.what();
    }
  }
  try {
    TcpStore c("127.0.0.1", free_port(), false, 300);
    FAIL() << "connected to nothing";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Code::kUnavailable);
    EXPECT_NE(std::string(e.what()).find("cannot reach rank 0's store"), std::string::npos) << e.what();
  }
  setenv("MASTER_ADDR", "127.0.0.1", 1);
  setenv("MASTER_PORT", "http", 1);
  EXPECT_THROW(TcpStore::from_environment(1), Error);
  unsetenv("MASTER_PORT");
  EXPECT_EQ(TcpStore::from_environment(1), nullptr);  // no store configured
  unsetenv("MASTER_ADDR");
}

}  // namespace
}  // namespace spora
