// Collectives through the public C API over the mpi plugin, run under
// `mpirun -np 2` (and as a lone MPI singleton). Every rank computes what
// each collective must produce from the same generator the other ranks fed
// in, without any communication, and compares.
#include <gtest/gtest.h>
#include <spora/spora.h>
#include <spora/spora.hpp>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

spora_context_t* g_ctx = nullptr;
spora_communicator_t* g_world = nullptr;
int32_t g_rank = 0, g_size = 1;
spora_device_t* g_cpu = nullptr;

#define OK(call) ASSERT_EQ((call), SPORA_OK) << spora_last_error()

const spora_dtype_t kDtypes[] = {SPORA_DTYPE_F32, SPORA_DTYPE_F64, SPORA_DTYPE_F16, SPORA_DTYPE_BF16,
                                 SPORA_DTYPE_I32, SPORA_DTYPE_I64, SPORA_DTYPE_U8,  SPORA_DTYPE_BOOL};
const spora_reduce_op_t kOps[] = {SPORA_REDUCE_SUM, SPORA_REDUCE_PROD, SPORA_REDUCE_MAX, SPORA_REDUCE_MIN,
                                  SPORA_REDUCE_AVG};

size_t esize(spora_dtype_t t) {
  switch (t) {
    case SPORA_DTYPE_F64: case SPORA_DTYPE_I64: return 8;
    case SPORA_DTYPE_F32: case SPORA_DTYPE_I32: return 4;
    case SPORA_DTYPE_F16: case SPORA_DTYPE_BF16: return 2;
    default: return 1;
  }
}

// Small integers (and halves of them after AVG) are exact in every dtype,
// so every result is compared exactly.
uint16_t to_f16(double v) {  // exact for the values used here
  if (v == 0) return 0;
  uint16_t sign = v < 0 ? 0x8000 : 0;
  int e = 0;
  const double m = std::frexp(std::fabs(v), &e);  // v = m * 2^e, m in [0.5, 1)
  return sign | static_cast<uint16_t>((e - 1 + 15) << 10) | static_cast<uint16_t>(std::lround((m * 2 - 1) * 1024));
}
double from_f16(uint16_t h) {
  const int e = (h >> 10) & 0x1f, m = h & 0x3ff;
  const double v = e == 0 ? std::ldexp(m, -24) : std::ldexp(1.0 + m / 1024.0, e - 15);
  return (h & 0x8000) ? -v : v;
}
uint16_t to_bf16(double v) {
  const float f = static_cast<float>(v);
  uint32_t x;
  std::memcpy(&x, &f, 4);
  return static_cast<uint16_t>(x >> 16);  // exact for these values
}
double from_bf16(uint16_t h) {
  const uint32_t x = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

void put(std::vector<char>& buf, spora_dtype_t t, size_t i, double v) {
  char* p = buf.data() + i * esize(t);
  switch (t) {
    case SPORA_DTYPE_F32: { float x = static_cast<float>(v); std::memcpy(p, &x, 4); break; }
    case SPORA_DTYPE_F64: std::memcpy(p, &v, 8); break;
    case SPORA_DTYPE_F16: { uint16_t x = to_f16(v); std::memcpy(p, &x, 2); break; }
    case SPORA_DTYPE_BF16: { uint16_t x = to_bf16(v); std::memcpy(p, &x, 2); break; }
    case SPORA_DTYPE_I32: { int32_t x = static_cast<int32_t>(v); std::memcpy(p, &x, 4); break; }
    case SPORA_DTYPE_I64: { int64_t x = static_cast<int64_t>(v); std::memcpy(p, &x, 8); break; }
    default: { uint8_t x = static_cast<uint8_t>(v); std::memcpy(p, &x, 1); break; }
  }
}
double get(const std::vector<char>& buf, spora_dtype_t t, size_t i) {
  const char* p = buf.data() + i * esize(t);
  switch (t) {
    case SPORA_DTYPE_F32: { float x; std::memcpy(&x, p, 4); return x; }
    case SPORA_DTYPE_F64: { double x; std::memcpy(&x, p, 8); return x; }
    case SPORA_DTYPE_F16: { uint16_t x; std::memcpy(&x, p, 2); return from_f16(x); }
    case SPORA_DTYPE_BF16: { uint16_t x; std::memcpy(&x, p, 2); return from_bf16(x); }
    case SPORA_DTYPE_I32: { int32_t x; std::memcpy(&x, p, 4); return x; }
    case SPORA_DTYPE_I64: { int64_t x; std::memcpy(&x, p, 8); return static_cast<double>(x); }
    default: { uint8_t x; std::memcpy(&x, p, 1); return x; }
  }
}

// What rank r contributes at element i: 1..5 (0/1 for bool; some negative
// values for signed types so that min/max/avg see signs).
double value(spora_dtype_t t, int r, size_t i) {
  if (t == SPORA_DTYPE_BOOL) return ((i + static_cast<size_t>(r)) % 3) == 0 ? 1 : 0;
  double v = static_cast<double>((i * 7 + static_cast<size_t>(r) * 3) % 5 + 1);
  if (t != SPORA_DTYPE_U8 && (i + static_cast<size_t>(r)) % 4 == 1) v = -v;
  return v;
}

double reduce(spora_dtype_t t, spora_reduce_op_t op, size_t i, int size) {
  double acc = value(t, 0, i);
  for (int r = 1; r < size; ++r) {
    const double v = value(t, r, i);
    switch (op) {
      case SPORA_REDUCE_SUM: case SPORA_REDUCE_AVG: acc = t == SPORA_DTYPE_BOOL ? (acc || v) : acc + v; break;
      case SPORA_REDUCE_PROD: acc = t == SPORA_DTYPE_BOOL ? (acc && v) : acc * v; break;
      case SPORA_REDUCE_MAX: acc = std::max(acc, v); break;
      case SPORA_REDUCE_MIN: acc = std::min(acc, v); break;
    }
  }
  if (t == SPORA_DTYPE_U8) acc = static_cast<double>(static_cast<uint8_t>(static_cast<int64_t>(acc)));  // wraps
  if (op == SPORA_REDUCE_AVG) {
    const bool integer = t == SPORA_DTYPE_I32 || t == SPORA_DTYPE_I64 || t == SPORA_DTYPE_U8;
    acc = integer ? std::trunc(acc / size) : acc / size;
  }
  return acc;
}

spora_tensor_t* make(spora_dtype_t t, int64_t n, const std::vector<char>* data) {
  spora_tensor_t* out = nullptr;
  const int64_t shape[1] = {n};
  EXPECT_EQ(spora_tensor_create(g_cpu, t, shape, 1, data ? data->data() : nullptr, data ? data->size() : 0, &out),
            SPORA_OK)
      << spora_last_error();
  return out;
}
std::vector<char> read(const spora_tensor_t* t, size_t bytes) {
  std::vector<char> out(bytes);
  EXPECT_EQ(spora_tensor_read(t, out.data(), bytes), SPORA_OK) << spora_last_error();
  return out;
}
std::vector<char> filled(spora_dtype_t t, size_t n, int rank, size_t offset = 0) {
  std::vector<char> b(n * esize(t));
  for (size_t i = 0; i < n; ++i) put(b, t, i, value(t, rank, offset + i));
  return b;
}

std::string dt(spora_dtype_t t) {
  static const char* names[] = {"?", "f32", "f64", "f16", "bf16", "i32", "i64", "u8", "bool"};
  return names[t];
}

constexpr size_t kN = 1001;  // odd, and more than one cache line of every dtype

TEST(MpiCollectives, AllReduceEveryDtypeAndOp) {
  for (spora_dtype_t t : kDtypes) {
    for (spora_reduce_op_t op : kOps) {
      for (bool in_place : {false, true}) {
        SCOPED_TRACE(dt(t) + " op " + std::to_string(op) + (in_place ? " in place" : ""));
        std::vector<char> mine = filled(t, kN, g_rank);
        spora_tensor_t* in = make(t, kN, &mine);
        spora_tensor_t* out = in_place ? in : make(t, kN, nullptr);
        const spora_status_t st = spora_comm_all_reduce(g_world, in, out, op);
        if (t == SPORA_DTYPE_BOOL && op == SPORA_REDUCE_AVG) {
          EXPECT_EQ(st, SPORA_ERROR_UNIMPLEMENTED);
          EXPECT_NE(std::string(spora_last_error()).find("avg of bool"), std::string::npos) << spora_last_error();
        } else {
          ASSERT_EQ(st, SPORA_OK) << spora_last_error();
          const std::vector<char> got = read(out, kN * esize(t));
          size_t bad = 0;
          for (size_t i = 0; i < kN; ++i)
            if (get(got, t, i) != reduce(t, op, i, g_size) && bad++ < 3)
              ADD_FAILURE() << "element " << i << ": " << get(got, t, i) << " != " << reduce(t, op, i, g_size);
          EXPECT_EQ(bad, 0u);
        }
        if (!in_place) spora_tensor_free(out);
        spora_tensor_free(in);
      }
    }
  }
}

// From 256 KiB the mpi plugin reduces as a ring of point-to-point steps
// (mpi_ring.cpp) instead of MPI_Iallreduce: the same exact results for
// every dtype and op, with a count no rank count divides (unequal chunks).
TEST(MpiCollectives, AllReduceLargeBuffersAsARing) {
  constexpr size_t kBig = 300007;  // >= 256 KiB for every dtype but u8/bool at 1 byte: those take 300 KB
  for (spora_dtype_t t : kDtypes) {
    for (spora_reduce_op_t op : kOps) {
      if (t == SPORA_DTYPE_BOOL && op == SPORA_REDUCE_AVG) continue;
      for (bool in_place : {false, true}) {
        SCOPED_TRACE(dt(t) + " op " + std::to_string(op) + (in_place ? " in place" : ""));
        std::vector<char> mine = filled(t, kBig, g_rank);
        spora_tensor_t* in = make(t, kBig, &mine);
        spora_tensor_t* out = in_place ? in : make(t, kBig, nullptr);
        ASSERT_EQ(spora_comm_all_reduce(g_world, in, out, op), SPORA_OK) << spora_last_error();
        const std::vector<char> got = read(out, kBig * esize(t));
        size_t bad = 0;
        for (size_t i = 0; i < kBig; ++i)
          if (get(got, t, i) != reduce(t, op, i, g_size) && bad++ < 3)
            ADD_FAILURE() << "element " << i << ": " << get(got, t, i) << " != " << reduce(t, op, i, g_size);
        EXPECT_EQ(bad, 0u);
        if (!in_place) spora_tensor_free(out);
        spora_tensor_free(in);
      }
    }
  }
}

// max and min of a NaN and a number: MPI's own ops keep one operand of an
// unordered pair, so op(a, b) and op(b, a) differ there. Every rank must
// still hold the same bits (a rank that reduced in the other order would
// disagree with its peers), small buffers (2 ranks swap whole buffers) and
// large ones (the ring) alike.
TEST(MpiCollectives, AllReduceRanksAgreeOnNaNs) {
  for (size_t n : {size_t{1001}, size_t{300007}}) {
    // Below 256 KiB more than 2 ranks use MPI_Iallreduce, whose order is MPI's.
    if (n == 1001 && g_size > 2) continue;
    for (spora_dtype_t t : {SPORA_DTYPE_F32, SPORA_DTYPE_F64, SPORA_DTYPE_BF16}) {
      for (spora_reduce_op_t op : {SPORA_REDUCE_MAX, SPORA_REDUCE_MIN}) {
        SCOPED_TRACE(dt(t) + " op " + std::to_string(op) + " n " + std::to_string(n));
        std::vector<char> mine = filled(t, n, g_rank);
        for (size_t i = static_cast<size_t>(g_rank) % 3; i < n; i += 3) put(mine, t, i, std::nan(""));
        spora_tensor_t* x = make(t, static_cast<int64_t>(n), &mine);
        ASSERT_EQ(spora_comm_all_reduce(g_world, x, x, op), SPORA_OK) << spora_last_error();
        spora_tensor_t* all = make(t, static_cast<int64_t>(n) * g_size, nullptr);
        ASSERT_EQ(spora_comm_all_gather(g_world, x, all), SPORA_OK) << spora_last_error();
        const std::vector<char> got = read(all, n * static_cast<size_t>(g_size) * esize(t));
        const size_t row = n * esize(t);
        for (int r = 1; r < g_size; ++r)
          EXPECT_EQ(std::memcmp(got.data(), got.data() + static_cast<size_t>(r) * row, row), 0)
              << "rank " << r << " holds other bits than rank 0";
        // Where no rank put a NaN the result is the plain max / min.
        for (size_t i = 0; i < n; ++i) {
          bool nan = false;
          for (int r = 0; r < g_size; ++r) nan = nan || i % 3 == static_cast<size_t>(r) % 3;
          if (!nan && get(got, t, i) != reduce(t, op, i, g_size)) {
            ADD_FAILURE() << "element " << i << ": " << get(got, t, i) << " != " << reduce(t, op, i, g_size);
            break;
          }
        }
        spora_tensor_free(all);
        spora_tensor_free(x);
      }
    }
  }
}

TEST(MpiCollectives, AllGatherEveryDtype) {
  for (spora_dtype_t t : kDtypes) {
    SCOPED_TRACE(dt(t));
    std::vector<char> mine = filled(t, kN, g_rank);
    spora_tensor_t* in = make(t, kN, &mine);
    spora_tensor_t* out = make(t, kN * static_cast<size_t>(g_size), nullptr);
    OK(spora_comm_all_gather(g_world, in, out));
    const std::vector<char> got = read(out, kN * static_cast<size_t>(g_size) * esize(t));
    for (int r = 0; r < g_size; ++r)
      for (size_t i = 0; i < kN; ++i) ASSERT_EQ(get(got, t, r * kN + i), value(t, r, i)) << "rank " << r << " i " << i;
    spora_tensor_free(in);
    spora_tensor_free(out);
  }
}

TEST(MpiCollectives, ReduceScatterEveryDtypeAndOp) {
  for (spora_dtype_t t : kDtypes) {
    for (spora_reduce_op_t op : kOps) {
      if (t == SPORA_DTYPE_BOOL && op == SPORA_REDUCE_AVG) continue;
      SCOPED_TRACE(dt(t) + " op " + std::to_string(op));
      const size_t total = kN * static_cast<size_t>(g_size);
      std::vector<char> mine = filled(t, total, g_rank);
      spora_tensor_t* in = make(t, static_cast<int64_t>(total), &mine);
      spora_tensor_t* out = make(t, kN, nullptr);
      OK(spora_comm_reduce_scatter(g_world, in, out, op));
      const std::vector<char> got = read(out, kN * esize(t));
      for (size_t i = 0; i < kN; ++i)
        ASSERT_EQ(get(got, t, i), reduce(t, op, static_cast<size_t>(g_rank) * kN + i, g_size)) << "i " << i;
      spora_tensor_free(in);
      spora_tensor_free(out);
    }
  }
}

TEST(MpiCollectives, BroadcastFromEveryRoot) {
  for (spora_dtype_t t : kDtypes) {
    for (int root = 0; root < g_size; ++root) {
      SCOPED_TRACE(dt(t) + " root " + std::to_string(root));
      std::vector<char> mine = filled(t, kN, g_rank);
      spora_tensor_t* x = make(t, kN, &mine);
      OK(spora_comm_broadcast(g_world, x, root));
      const std::vector<char> got = read(x, kN * esize(t));
      for (size_t i = 0; i < kN; ++i) ASSERT_EQ(get(got, t, i), value(t, root, i)) << "i " << i;
      spora_tensor_free(x);
    }
  }
}

TEST(MpiCollectives, AllToAllEveryDtype) {
  for (spora_dtype_t t : kDtypes) {
    SCOPED_TRACE(dt(t));
    const size_t total = kN * static_cast<size_t>(g_size);
    std::vector<char> mine = filled(t, total, g_rank);
    spora_tensor_t* in = make(t, static_cast<int64_t>(total), &mine);
    spora_tensor_t* out = make(t, static_cast<int64_t>(total), nullptr);
    OK(spora_comm_all_to_all(g_world, in, out));
    const std::vector<char> got = read(out, total * esize(t));
    // Block r of my output is block <my rank> of rank r's input.
    for (int r = 0; r < g_size; ++r)
      for (size_t i = 0; i < kN; ++i)
        ASSERT_EQ(get(got, t, r * kN + i), value(t, r, static_cast<size_t>(g_rank) * kN + i)) << "r " << r;
    spora_tensor_free(in);
    spora_tensor_free(out);
  }
}

TEST(MpiCollectives, SendRecvRing) {
  if (g_size < 2) GTEST_SKIP() << "needs 2 ranks";
  for (spora_dtype_t t : kDtypes) {
    SCOPED_TRACE(dt(t));
    const int next = (g_rank + 1) % g_size, prev = (g_rank + g_size - 1) % g_size;
    std::vector<char> mine = filled(t, kN, g_rank);
    spora_tensor_t* x = make(t, kN, &mine);
    spora_tensor_t* y = make(t, kN, nullptr);
    // Even ranks send first, odd ranks receive first: no deadlock.
    if (g_rank % 2 == 0) {
      OK(spora_comm_send(g_world, x, next));
      OK(spora_comm_recv(g_world, y, prev));
    } else {
      OK(spora_comm_recv(g_world, y, prev));
      OK(spora_comm_send(g_world, x, next));
    }
    const std::vector<char> got = read(y, kN * esize(t));
    for (size_t i = 0; i < kN; ++i) ASSERT_EQ(get(got, t, i), value(t, prev, i));
    spora_tensor_free(x);
    spora_tensor_free(y);
  }
}

TEST(MpiCollectives, SplitReversesRanks) {
  spora_communicator_t* rev = nullptr;
  OK(spora_comm_split(g_world, 0, -g_rank, &rev));
  ASSERT_NE(rev, nullptr);
  int32_t r = -1, s = -1;
  OK(spora_comm_rank(rev, &r, &s));
  EXPECT_EQ(s, g_size);
  EXPECT_EQ(r, g_size - 1 - g_rank);
  // A communicator that leaves this rank out: NULL, no error.
  spora_communicator_t* none = nullptr;
  OK(spora_comm_split(g_world, g_rank == 0 ? -1 : 1, 0, &none));
  EXPECT_EQ(none == nullptr, g_rank == 0);
  // Gather over the reversed communicator: rank-major in the new order.
  std::vector<char> mine = filled(SPORA_DTYPE_I32, 3, g_rank);
  spora_tensor_t* in = make(SPORA_DTYPE_I32, 3, &mine);
  spora_tensor_t* out = make(SPORA_DTYPE_I32, 3 * g_size, nullptr);
  OK(spora_comm_all_gather(rev, in, out));
  const std::vector<char> got = read(out, 12 * static_cast<size_t>(g_size));
  for (int nr = 0; nr < g_size; ++nr)
    for (size_t i = 0; i < 3; ++i) EXPECT_EQ(get(got, SPORA_DTYPE_I32, nr * 3 + i), value(SPORA_DTYPE_I32, g_size - 1 - nr, i));
  spora_tensor_free(in);
  spora_tensor_free(out);
  spora_comm_free(none);
  spora_comm_free(rev);
  OK(spora_comm_barrier(g_world));
}

TEST(MpiCollectives, BadInput) {
  spora_tensor_t* x = make(SPORA_DTYPE_F32, 4, nullptr);
  spora_tensor_t* y = make(SPORA_DTYPE_F32, 5, nullptr);
  spora_tensor_t* z = make(SPORA_DTYPE_I32, 4, nullptr);
  EXPECT_EQ(spora_comm_all_reduce(nullptr, x, x, SPORA_REDUCE_SUM), SPORA_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(spora_last_error()).find("spora_comm_all_reduce"), std::string::npos) << spora_last_error();
  EXPECT_EQ(spora_comm_all_reduce(g_world, x, y, SPORA_REDUCE_SUM), SPORA_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(spora_last_error()).find("4 elements but output has 5"), std::string::npos) << spora_last_error();
  EXPECT_EQ(spora_comm_all_reduce(g_world, x, z, SPORA_REDUCE_SUM), SPORA_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(spora_comm_all_reduce(g_world, x, x, static_cast<spora_reduce_op_t>(42)), SPORA_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(spora_comm_all_gather(g_world, x, x), g_size == 1 ? SPORA_OK : SPORA_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(spora_comm_broadcast(g_world, x, g_size), SPORA_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(spora_last_error()).find("root"), std::string::npos) << spora_last_error();
  EXPECT_EQ(spora_comm_send(g_world, x, g_rank), SPORA_ERROR_INVALID_ARGUMENT);
  spora_communicator_t* c = nullptr;
  EXPECT_EQ(spora_comm_create(g_ctx, "foo", -1, -1, &c), SPORA_ERROR_NOT_FOUND);
  {
    const std::string msg = spora_last_error();  // other collective plugins may be loaded too (nccl)
    EXPECT_NE(msg.find("unknown collective backend 'foo'; loaded: "), std::string::npos) << msg;
    EXPECT_NE(msg.find("mpi"), std::string::npos) << msg;
  }
  EXPECT_EQ(spora_comm_create(g_ctx, "mpi", 0, g_size + 1, &c), SPORA_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(spora_last_error()).find("does not match the MPI job"), std::string::npos) << spora_last_error();
  EXPECT_EQ(spora_comm_create(g_ctx, "mpi", 0, 0, &c), SPORA_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(spora_comm_create(nullptr, "mpi", 0, 1, &c), SPORA_ERROR_INVALID_ARGUMENT);
  if (g_size > 1) {
    // Every rank claims rank 0: a collective check, every rank fails.
    EXPECT_EQ(spora_comm_create(g_ctx, "mpi", 0, g_size, &c), SPORA_ERROR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(spora_last_error()).find("not each of 0.."), std::string::npos) << spora_last_error();
  }
  EXPECT_EQ(c, nullptr);
  spora_tensor_free(x);
  spora_tensor_free(y);
  spora_tensor_free(z);
  OK(spora_comm_barrier(g_world));
}

// Rank 0 waits in an all_reduce rank 1 has not joined: it fails with a
// timeout naming the collective. Afterwards rank 1 joins, so that MPI's
// abandoned request completes and the job can end cleanly.
TEST(MpiCollectives, TimeoutWhenARankNeverJoins) {
  if (g_size < 2) GTEST_SKIP() << "needs 2 ranks";
  spora_communicator_t* c = nullptr;
  OK(spora_comm_create(g_ctx, "mpi", g_rank, g_size, &c));
  std::vector<char> mine = filled(SPORA_DTYPE_F32, 16, g_rank);
  spora_tensor_t* x = make(SPORA_DTYPE_F32, 16, &mine);
  if (g_rank == 0) {
    OK(spora_comm_set_timeout(c, 300));
    const auto t0 = std::chrono::steady_clock::now();
    EXPECT_EQ(spora_comm_all_reduce(c, x, x, SPORA_REDUCE_SUM), SPORA_ERROR_TIMEOUT);
    const std::string msg = spora_last_error();
    EXPECT_NE(msg.find("all_reduce(sum) timed out after 300 ms"), std::string::npos) << msg;
    EXPECT_NE(msg.find("backend mpi"), std::string::npos) << msg;
    EXPECT_GE(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(300));
    // The communicator is unusable now; later calls fail at once.
    EXPECT_EQ(spora_comm_barrier(c), SPORA_ERROR_ABORTED);
    EXPECT_NE(std::string(spora_last_error()).find("unusable"), std::string::npos) << spora_last_error();
    OK(spora_comm_barrier(g_world));  // tells rank 1 to join now
  } else {
    OK(spora_comm_barrier(g_world));
    if (g_rank == 1) OK(spora_comm_all_reduce(c, x, x, SPORA_REDUCE_SUM));
  }
  OK(spora_comm_barrier(g_world));
  spora_tensor_free(x);
  spora_comm_free(c);
}

// The defect this guards against: a collective abandoned by a timeout still
// owns the buffers it was handed (MPI cannot cancel it), and used to get
// them freed as the error unwound; when the late rank joined, MPI wrote the
// result into memory the allocator had meanwhile given to new tensors. The
// core now keeps an abandoned call's buffers forever (collective.cpp,
// "quarantine"), so tensors made after the timeout keep their values.
TEST(MpiCollectives, AbandonedBuffersAreNeverReusedByNewTensors) {
  if (g_size < 2) GTEST_SKIP() << "needs 2 ranks";
  constexpr int64_t kN = 4096;
  spora_communicator_t* c = nullptr;
  OK(spora_comm_create(g_ctx, "mpi", g_rank, g_size, &c));
  std::vector<char> mine = filled(SPORA_DTYPE_F32, kN, g_rank + 1);
  spora_tensor_t* x = make(SPORA_DTYPE_F32, kN, &mine);
  std::vector<spora_tensor_t*> fresh;
  std::vector<char> pattern(kN * 4);
  for (int64_t i = 0; i < kN; ++i) put(pattern, SPORA_DTYPE_F32, static_cast<size_t>(i), -7.0);
  if (g_rank == 0) {
    OK(spora_comm_set_timeout(c, 200));
    EXPECT_EQ(spora_comm_all_reduce(c, x, x, SPORA_REDUCE_SUM), SPORA_ERROR_TIMEOUT);
    spora_tensor_free(x);  // the user drops the tensor after the error
    x = nullptr;
    for (int k = 0; k < 8; ++k) fresh.push_back(make(SPORA_DTYPE_F32, kN, &pattern));  // same size: reuse bait
    OK(spora_comm_barrier(g_world));  // now rank 1 joins, completing the abandoned request
  } else {
    OK(spora_comm_barrier(g_world));
    if (g_rank == 1) OK(spora_comm_all_reduce(c, x, x, SPORA_REDUCE_SUM));
  }
  OK(spora_comm_barrier(g_world));  // MPI progresses rank 0's abandoned request here
  OK(spora_comm_barrier(g_world));
  for (spora_tensor_t* t : fresh) {
    EXPECT_EQ(read(t, kN * 4), pattern) << "a tensor made after the timeout was overwritten by the late all_reduce";
    spora_tensor_free(t);
  }
  if (x) spora_tensor_free(x);
  spora_comm_free(c);
}

// comm_abort from another thread ends a wait that has no timeout.
TEST(MpiCollectives, AbortFromAnotherThread) {
  if (g_size < 2) GTEST_SKIP() << "needs 2 ranks";
  spora_communicator_t* c = nullptr;
  OK(spora_comm_create(g_ctx, "mpi", g_rank, g_size, &c));
  OK(spora_comm_set_timeout(c, -1));
  spora_tensor_t* x = make(SPORA_DTYPE_F64, 8, nullptr);
  if (g_rank == 0) {
    std::atomic<int> status{-1};
    std::string msg;
    std::thread blocked([&] {
      status = spora_comm_all_reduce(c, x, x, SPORA_REDUCE_MAX);
      msg = spora_last_error();
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    EXPECT_EQ(status.load(), -1);  // still waiting for rank 1
    OK(spora_comm_abort(c));
    blocked.join();
    EXPECT_EQ(status.load(), SPORA_ERROR_ABORTED);
    EXPECT_NE(msg.find("aborted while all_reduce(max) was waiting"), std::string::npos) << msg;
    EXPECT_EQ(spora_comm_all_reduce(c, x, x, SPORA_REDUCE_MAX), SPORA_ERROR_ABORTED);
    OK(spora_comm_barrier(g_world));
  } else {
    OK(spora_comm_barrier(g_world));
    if (g_rank == 1) OK(spora_comm_all_reduce(c, x, x, SPORA_REDUCE_MAX));
  }
  OK(spora_comm_barrier(g_world));
  spora_tensor_free(x);
  spora_comm_free(c);
}

// Graph mode: all_reduce inside a compiled graph, and its gradient. Each
// rank runs y = all_reduce_sum(x_r * w), loss = sum(y). The forward value
// is sum_r x_r * w (computed here from the generator). The bprop of a sum
// all_reduce all-reduces the adjoint: dy = 1 on every rank becomes `size`,
// so rank r's gradient with respect to w is size * x_r.
TEST(MpiCollectives, GraphAllReduceAndItsGradient) {
  int64_t group = 0;
  OK(spora_comm_id(g_world, &group));
  const int64_t n = 37;
  spora_graph_t* g = nullptr;
  OK(spora_graph_create("dp", &g));
  spora_value_t x = 0, w = 0, xw = 0, y = 0, loss = 0;
  size_t nout = 0;
  OK(spora_graph_add_input(g, "x", SPORA_DTYPE_F64, &n, 1, &x));
  OK(spora_graph_add_weight(g, "w", SPORA_DTYPE_F64, &n, 1, &w));
  spora_value_t in2[2] = {x, w};
  OK(spora_graph_add_op(g, "mul", in2, 2, nullptr, __FILE__, __LINE__, &xw, 1, &nout));
  spora_attrs_t* a = nullptr;
  OK(spora_attrs_create(&a));
  OK(spora_attrs_set_int(a, "group", group));
  OK(spora_attrs_set_string(a, "op", "sum"));
  OK(spora_graph_add_op(g, "all_reduce", &xw, 1, a, __FILE__, __LINE__, &y, 1, &nout));
  OK(spora_graph_add_op(g, "sum", &y, 1, nullptr, __FILE__, __LINE__, &loss, 1, &nout));
  spora_value_t outs[2] = {loss, y};
  OK(spora_graph_set_outputs(g, outs, 2));
  spora_graph_t* gg = nullptr;
  OK(spora_graph_grad(g, &w, 1, 0, &gg));
  spora_executable_t* exe = nullptr;
  OK(spora_graph_compile(gg, g_cpu, &exe));

  std::vector<char> xs = filled(SPORA_DTYPE_F64, static_cast<size_t>(n), g_rank);
  std::vector<char> ws(static_cast<size_t>(n) * 8);
  for (int64_t i = 0; i < n; ++i) put(ws, SPORA_DTYPE_F64, static_cast<size_t>(i), 0.5 + static_cast<double>(i % 3));
  spora_tensor_t* xt = make(SPORA_DTYPE_F64, n, &xs);
  spora_tensor_t* wt = make(SPORA_DTYPE_F64, n, &ws);
  spora_tensor_t* params[2] = {xt, wt};
  for (int run = 0; run < 2; ++run) {  // the second run reuses the plan
    spora_tensor_t* res[3] = {nullptr, nullptr, nullptr};
    OK(spora_executable_run(exe, params, 2, res, 3));
    const std::vector<char> lv = read(res[0], 8), yv = read(res[1], static_cast<size_t>(n) * 8),
                            gv = read(res[2], static_cast<size_t>(n) * 8);
    double want_loss = 0;
    for (int64_t i = 0; i < n; ++i) {
      double sx = 0;
      for (int r = 0; r < g_size; ++r) sx += value(SPORA_DTYPE_F64, r, static_cast<size_t>(i));
      const double wi = get(ws, SPORA_DTYPE_F64, static_cast<size_t>(i));
      EXPECT_DOUBLE_EQ(get(yv, SPORA_DTYPE_F64, static_cast<size_t>(i)), sx * wi) << "y " << i;
      EXPECT_DOUBLE_EQ(get(gv, SPORA_DTYPE_F64, static_cast<size_t>(i)),
                       g_size * value(SPORA_DTYPE_F64, g_rank, static_cast<size_t>(i)))
          << "grad " << i;
      want_loss += sx * wi;
    }
    EXPECT_NEAR(get(lv, SPORA_DTYPE_F64, 0), want_loss, 1e-12);
    for (auto* t : res) spora_tensor_free(t);
  }
  // A group that names no live communicator fails naming the op and line.
  spora_attrs_t* bad = nullptr;
  OK(spora_attrs_create(&bad));
  OK(spora_attrs_set_int(bad, "group", group + 1000));
  spora_graph_t* g2 = nullptr;
  OK(spora_graph_create("bad", &g2));
  spora_value_t x2 = 0, y2 = 0;
  OK(spora_graph_add_input(g2, "x", SPORA_DTYPE_F64, &n, 1, &x2));
  const int line = __LINE__ + 1;
  OK(spora_graph_add_op(g2, "all_reduce", &x2, 1, bad, "train.py", line, &y2, 1, &nout));
  OK(spora_graph_set_outputs(g2, &y2, 1));
  spora_executable_t* exe2 = nullptr;
  OK(spora_graph_compile(g2, g_cpu, &exe2));
  spora_tensor_t* r2 = nullptr;
  EXPECT_EQ(spora_executable_run(exe2, &xt, 1, &r2, 1), SPORA_ERROR_NOT_FOUND);
  const std::string msg = spora_last_error();
  EXPECT_NE(msg.find("no live communicator has id"), std::string::npos) << msg;
  EXPECT_NE(msg.find("train.py:" + std::to_string(line)), std::string::npos) << msg;
  spora_executable_free(exe2);
  spora_graph_free(g2);
  spora_attrs_free(bad);
  spora_tensor_free(xt);
  spora_tensor_free(wt);
  spora_executable_free(exe);
  spora_graph_free(gg);
  spora_graph_free(g);
  spora_attrs_free(a);
}

// comm_init with ranks other than MPI's: the communicator is ordered by the
// ranks the processes passed.
TEST(MpiCollectives, CreateWithPermutedRanks) {
  spora_communicator_t* c = nullptr;
  const int32_t mine = g_size - 1 - g_rank;
  OK(spora_comm_create(g_ctx, "mpi", mine, g_size, &c));
  int32_t r = -1, s = -1;
  OK(spora_comm_rank(c, &r, &s));
  EXPECT_EQ(r, mine);
  EXPECT_EQ(s, g_size);
  std::vector<char> v = filled(SPORA_DTYPE_I64, 2, mine);  // keyed by the new rank
  spora_tensor_t* in = make(SPORA_DTYPE_I64, 2, &v);
  spora_tensor_t* out = make(SPORA_DTYPE_I64, 2 * g_size, nullptr);
  OK(spora_comm_all_gather(c, in, out));
  const std::vector<char> got = read(out, 16 * static_cast<size_t>(g_size));
  for (int k = 0; k < g_size; ++k)
    for (size_t i = 0; i < 2; ++i) EXPECT_EQ(get(got, SPORA_DTYPE_I64, k * 2 + i), value(SPORA_DTYPE_I64, k, i));
  spora_tensor_free(in);
  spora_tensor_free(out);
  spora_comm_free(c);
}

// The C++ wrapper (spora.hpp) over the same calls.
TEST(MpiCollectives, CppWrapper) {
  spora::Context ctx;
  spora::Communicator c(ctx, "mpi");
  EXPECT_EQ(c.rank(), g_rank);
  EXPECT_EQ(c.size(), g_size);
  EXPECT_GT(c.id(), 0);
  c.set_timeout(60000);
  spora::Tensor x = spora::Tensor::from<double>(ctx.device("cpu"), {3}, {1.0 + g_rank, 2.0, -3.0 * g_rank});
  c.all_reduce(x, x, SPORA_REDUCE_MAX);
  const std::vector<double> got = x.read<double>();
  EXPECT_EQ(got, (std::vector<double>{static_cast<double>(g_size), 2.0, 0.0}));
  c.barrier();
}

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (spora_context_create(&g_ctx) != SPORA_OK || spora_device_find(g_ctx, "cpu", &g_cpu) != SPORA_OK) {
    std::fprintf(stderr, "setup failed: %s\n", spora_last_error());
    return 1;
  }
  if (spora_comm_create(g_ctx, "mpi", -1, -1, &g_world) != SPORA_OK) {
    std::fprintf(stderr, "spora_comm_create(mpi) failed: %s\n", spora_last_error());
    return 1;
  }
  spora_comm_rank(g_world, &g_rank, &g_size);
  // A failing rank must not leave the others waiting forever.
  spora_comm_set_timeout(g_world, 60000);
  const int rc = RUN_ALL_TESTS();
  spora_comm_free(g_world);
  spora_context_free(g_ctx);
  return rc;
}
