#include "runtime/tcp_store.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>

#include "support/error.h"

namespace spora {
namespace {

using clock_type = std::chrono::steady_clock;

bool send_all(int fd, const void* p, size_t n) {
  const char* c = static_cast<const char*>(p);
  while (n > 0) {
    const ssize_t k = ::send(fd, c, n, MSG_NOSIGNAL);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return false;
    c += k;
    n -= static_cast<size_t>(k);
  }
  return true;
}

bool recv_all(int fd, void* p, size_t n) {
  char* c = static_cast<char*>(p);
  while (n > 0) {
    const ssize_t k = ::recv(fd, c, n, 0);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return false;
    c += k;
    n -= static_cast<size_t>(k);
  }
  return true;
}

void put_u32(std::vector<char>& m, uint32_t v) {
  for (int i = 0; i < 4; ++i) m.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

bool get_u32(int fd, uint32_t* v) {
  unsigned char b[4];
  if (!recv_all(fd, b, 4)) return false;
  *v = static_cast<uint32_t>(b[0]) | (static_cast<uint32_t>(b[1]) << 8) | (static_cast<uint32_t>(b[2]) << 16) |
       (static_cast<uint32_t>(b[3]) << 24);
  return true;
}

constexpr uint32_t kMaxBytes = 64u << 20;  // keys and values: ids and small metadata, never tensors

}  // namespace

// Rank 0's side: a listening socket, one thread per connection, the map.
struct TcpStore::Server {
  int listen_fd = -1;
  int64_t timeout_ms = 0;
  std::atomic<bool> stop{false};
  std::mutex mu;
  std::condition_variable cv;
  std::map<std::string, std::string> data;
  std::vector<int> clients;
  std::vector<std::thread> threads;
  std::thread acceptor;

  int active = 0;  // connections being served
  std::condition_variable idle;

  void serve(int fd) {
    handle(fd);
    std::lock_guard<std::mutex> lock(mu);
    --active;
    idle.notify_all();
  }

  void handle(int fd) {
    for (;;) {
      unsigned char op = 0;
      uint32_t klen = 0;
      if (!recv_all(fd, &op, 1) || !get_u32(fd, &klen) || klen > kMaxBytes) return;
      std::string key(klen, '\0');
      if (!recv_all(fd, key.data(), klen)) return;
      if (op == 1) {
        uint32_t vlen = 0;
        if (!get_u32(fd, &vlen) || vlen > kMaxBytes) return;
        std::string value(vlen, '\0');
        if (!recv_all(fd, value.data(), vlen)) return;
        {
          std::lock_guard<std::mutex> lock(mu);
          data[key] = std::move(value);
        }
        // Answer before waking the waiters: rank 0 may end the store as
        // soon as the last rank's key is seen.
        const unsigned char ok = 0;
        const bool sent = send_all(fd, &ok, 1);
        cv.notify_all();
        if (!sent) return;
      } else if (op == 2) {
        std::string value;
        unsigned char status = 1;
        {
          std::unique_lock<std::mutex> lock(mu);
          const bool found = cv.wait_for(lock, std::chrono::milliseconds(timeout_ms),
                                         [&] { return stop.load() || data.count(key) > 0; });
          if (found && data.count(key)) {
            value = data[key];
            status = 0;
          }
        }
        std::vector<char> reply(1, static_cast<char>(status));
        put_u32(reply, static_cast<uint32_t>(value.size()));
        reply.insert(reply.end(), value.begin(), value.end());
        if (!send_all(fd, reply.data(), reply.size())) return;
      } else {
        return;
      }
    }
  }

  void accept_loop() {
    while (!stop.load()) {
      const int fd = ::accept(listen_fd, nullptr, nullptr);
      if (fd < 0) {
        if (errno == EINTR) continue;
        return;  // closed by the destructor
      }
      std::lock_guard<std::mutex> lock(mu);
      if (stop.load()) {
        ::close(fd);
        return;
      }
      clients.push_back(fd);
      ++active;
      threads.emplace_back([this, fd] { serve(fd); });
    }
  }

  ~Server() {
    ::shutdown(listen_fd, SHUT_RDWR);
    ::close(listen_fd);
    std::vector<std::thread> ts;
    {
      // The other ranks hang up when they are done with the store; give
      // them a moment before cutting them off (a rank may still be reading
      // its last answer).
      std::unique_lock<std::mutex> lock(mu);
      idle.wait_for(lock, std::chrono::seconds(5), [&] { return active == 0; });
      stop.store(true);
    }
    cv.notify_all();
    if (acceptor.joinable()) acceptor.join();
    {
      std::lock_guard<std::mutex> lock(mu);
      for (int fd : clients) ::shutdown(fd, SHUT_RDWR);
      ts.swap(threads);
    }
    for (std::thread& t : ts) t.join();
    for (int fd : clients) ::close(fd);
  }
};

TcpStore::TcpStore(const std::string& host, int port, bool serve, int64_t timeout_ms)
    : where_(host + ":" + std::to_string(port)), timeout_ms_(timeout_ms) {
  if (port <= 0 || port > 65535)
    fail(Code::kInvalidArgument, "[store] MASTER_PORT must be a TCP port (1..65535), got {}", port);
  if (serve) {
    auto s = std::make_unique<Server>();
    s->timeout_ms = timeout_ms;
    s->listen_fd = ::socket(AF_INET, SOCK_STREAM, 0);
    if (s->listen_fd < 0) fail(Code::kUnavailable, "[store] socket: {}", std::strerror(errno));
    const int one = 1;
    ::setsockopt(s->listen_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_ANY);
    addr.sin_port = htons(static_cast<uint16_t>(port));
    if (::bind(s->listen_fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || ::listen(s->listen_fd, 128) != 0) {
      const std::string why = std::strerror(errno);
      ::close(s->listen_fd);
      fail(Code::kUnavailable, "[store] rank 0 cannot listen on port {} ({}): set MASTER_PORT to a free port", port,
           why);
    }
    Server* raw = s.get();
    s->acceptor = std::thread([raw] { raw->accept_loop(); });
    server_ = std::move(s);
  }
  // Connect (rank 0 to itself), retrying while the server starts.
  addrinfo hints{}, *res = nullptr;
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  const int rc = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res);
  if (rc != 0) fail(Code::kUnavailable, "[store] cannot resolve MASTER_ADDR '{}': {}", host, gai_strerror(rc));
  const auto deadline = clock_type::now() + std::chrono::milliseconds(timeout_ms);
  std::string last = "no attempt";
  while (fd_ < 0) {
    const int fd = ::socket(res->ai_family, res->ai_socktype, res->ai_protocol);
    if (fd >= 0 && ::connect(fd, res->ai_addr, res->ai_addrlen) == 0) {
      fd_ = fd;
      break;
    }
    last = std::strerror(errno);
    if (fd >= 0) ::close(fd);
    if (clock_type::now() >= deadline) {
      ::freeaddrinfo(res);
      fail(Code::kUnavailable, "[store] cannot reach rank 0's store at {} after {} ms ({}): is rank 0 running, and "
           "do MASTER_ADDR/MASTER_PORT name it?", where_, timeout_ms, last);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ::freeaddrinfo(res);
  const int one = 1;
  ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  timeval tv{};  // a guard past the server's own wait: a dead server must not hang a get
  tv.tv_sec = static_cast<time_t>(timeout_ms / 1000 + 10);
  ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
}

TcpStore::~TcpStore() {
  if (fd_ >= 0) {
    ::shutdown(fd_, SHUT_RDWR);
    ::close(fd_);
  }
  server_.reset();
}

void TcpStore::request(const std::vector<char>& msg, std::string* reply) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!send_all(fd_, msg.data(), msg.size()))
    fail(Code::kUnavailable, "[store] lost the connection to {} ({})", where_, std::strerror(errno));
  unsigned char status = 0;
  if (!recv_all(fd_, &status, 1))
    fail(Code::kUnavailable, "[store] no answer from {} ({})", where_, std::strerror(errno));
  if (!reply) return;
  uint32_t n = 0;
  if (!get_u32(fd_, &n) || n > kMaxBytes) fail(Code::kUnavailable, "[store] a bad answer from {}", where_);
  reply->assign(n, '\0');
  if (!recv_all(fd_, reply->data(), n)) fail(Code::kUnavailable, "[store] a cut answer from {}", where_);
  if (status != 0) reply->clear();
  if (status != 0) throw Error(Code::kTimeout, "timeout");  // caller names the key
}

void TcpStore::set(const std::string& key, const std::string& value) {
  if (key.size() > kMaxBytes || value.size() > kMaxBytes)
    fail(Code::kInvalidArgument, "[store] key or value of '{}' over {} bytes", key, kMaxBytes);
  std::vector<char> m(1, 1);
  put_u32(m, static_cast<uint32_t>(key.size()));
  m.insert(m.end(), key.begin(), key.end());
  put_u32(m, static_cast<uint32_t>(value.size()));
  m.insert(m.end(), value.begin(), value.end());
  request(m, nullptr);
}

std::string TcpStore::get(const std::string& key) {
  std::vector<char> m(1, 2);
  put_u32(m, static_cast<uint32_t>(key.size()));
  m.insert(m.end(), key.begin(), key.end());
  std::string value;
  try {
    request(m, &value);
  } catch (const Error& e) {
    if (e.code() != Code::kTimeout) throw;
    fail(Code::kTimeout, "[store] no rank set '{}' within {} ms (store at {})", key, timeout_ms_, where_);
  }
  return value;
}

std::unique_ptr<TcpStore> TcpStore::from_environment(int32_t rank) {
  const char* addr = std::getenv("MASTER_ADDR");
  const char* port = std::getenv("MASTER_PORT");
  if (!addr || !port) return nullptr;
  char* end = nullptr;
  const long p = std::strtol(port, &end, 10);
  if (*end != '\0') fail(Code::kInvalidArgument, "[store] MASTER_PORT='{}' is not a port number", port);
  int64_t timeout = 300000;
  if (const char* t = std::getenv("SPORA_STORE_TIMEOUT_MS")) {
    const long long v = std::strtoll(t, &end, 10);
    if (*end != '\0' || v <= 0)
      fail(Code::kInvalidArgument, "[store] SPORA_STORE_TIMEOUT_MS='{}' is not a positive number of ms", t);
    timeout = v;
  }
  return std::make_unique<TcpStore>(addr, static_cast<int>(p), rank == 0, timeout);
}

}  // namespace spora
