// A key-value store across the processes of a job, over TCP (PyTorch's
// TCPStore, MindSpore's scheduler node): rank 0 serves it at MASTER_ADDR:
// MASTER_PORT, every rank (rank 0 too) sets and gets byte strings by key; a
// get waits until some rank has set the key. It is how ranks that share no
// launcher agree on a collective backend's unique id (NCCL's ncclUniqueId):
// rank 0 makes it, the others read it (Communicator::create).
//
// Wire format, little-endian: request = op (u8: 1 set, 2 get), key length
// (u32), key, then for set the value length (u32) and value; reply to get =
// status (u8: 0 found, 1 timed out), value length (u32), value. Each client
// holds one connection; the server runs one thread per connection.
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace spora {

class TcpStore {
 public:
  // Rank 0 listens on `port` (on every interface) and connects to itself;
  // the others connect to host:port, retrying until `timeout_ms` passes.
  // Errors (kUnavailable) name the address and what failed.
  TcpStore(const std::string& host, int port, bool serve, int64_t timeout_ms);
  ~TcpStore();
  TcpStore(const TcpStore&) = delete;
  TcpStore& operator=(const TcpStore&) = delete;

  void set(const std::string& key, const std::string& value);
  // Waits until the key is set (by any rank) or the timeout passes
  // (kTimeout naming the key and the address).
  std::string get(const std::string& key);

  // The store of this job from MASTER_ADDR / MASTER_PORT (rank 0 serves),
  // or null when they are not set. Timeout: SPORA_STORE_TIMEOUT_MS, default
  // 300000.
  static std::unique_ptr<TcpStore> from_environment(int32_t rank);

 private:
  struct Server;
  void request(const std::vector<char>& msg, std::string* reply);
  std::string where_;
  int64_t timeout_ms_;
  int fd_ = -1;
  std::mutex mu_;  // one request at a time on the connection
  std::unique_ptr<Server> server_;
};

}  // namespace spora
