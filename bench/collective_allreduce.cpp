// spora_comm_all_reduce (C API -> collective plugin "mpi") against raw
// MPI_Allreduce on the same data in the same mpirun job, f32 sum, in place,
// from 4 KiB to 64 MiB. Run:
//   mpirun -np 2 --oversubscribe build/bin/bench_collective_allreduce
//          [--from BYTES] [--to BYTES] [--rounds N] [--no-iallreduce]
// (sizes step by 4x from --from to --to; --rounds fixes every size's rounds,
// else 200 up to 256 KiB, 40 up to 4 MiB, 20 above; --no-iallreduce leaves
// the third column out, timing the first two alone).
// Rank 0 prints per size: the median time of each and their ratio
// (spora / raw; 1.00 = no overhead). A third column times what the plugin
// does underneath -- MPI_Iallreduce polled with MPI_Test, which is what
// lets every call time out or be aborted -- to separate the cost of
// non-blocking MPI from the cost of Spora's own layers.
#include <mpi.h>
#include <spora/spora.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

#define CHECK(call)                                                             \
  do {                                                                          \
    if ((call) != SPORA_OK) {                                                   \
      std::fprintf(stderr, "%s failed: %s\n", #call, spora_last_error());       \
      MPI_Abort(MPI_COMM_WORLD, 1);                                             \
    }                                                                           \
  } while (0)

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);  // the plugin reuses this MPI
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  spora_context_t* ctx = nullptr;
  spora_device_t* cpu = nullptr;
  spora_communicator_t* comm = nullptr;
  size_t from = 4096, to = size_t{64} << 20;
  int fixed_rounds = 0;
  bool polled = true;  // also time polled MPI_Iallreduce
  for (int i = 1; i < argc; ++i) {
    const bool has_value = i + 1 < argc;
    if (has_value && std::strcmp(argv[i], "--from") == 0) from = std::strtoull(argv[++i], nullptr, 10);
    else if (has_value && std::strcmp(argv[i], "--to") == 0) to = std::strtoull(argv[++i], nullptr, 10);
    else if (has_value && std::strcmp(argv[i], "--rounds") == 0) fixed_rounds = std::atoi(argv[++i]);
    else if (std::strcmp(argv[i], "--no-iallreduce") == 0) polled = false;
    else {
      if (rank == 0)
        std::fprintf(stderr, "usage: %s [--from BYTES] [--to BYTES] [--rounds N] [--no-iallreduce]\n", argv[0]);
      MPI_Finalize();
      return 2;
    }
  }
  if (from < 4 || from > to || fixed_rounds < 0) {
    if (rank == 0) std::fprintf(stderr, "%s: need 4 <= --from <= --to and --rounds >= 0\n", argv[0]);
    MPI_Finalize();
    return 2;
  }
  CHECK(spora_context_create(&ctx));
  CHECK(spora_device_find(ctx, "cpu", &cpu));
  CHECK(spora_comm_create(ctx, "mpi", rank, size, &comm));
  if (rank == 0)
    std::printf("all_reduce f32 sum, in place, %d ranks: median of each size's rounds\n%10s %8s %12s %12s %8s %14s %8s\n",
                size, "bytes", "rounds", "spora us", "raw us", "ratio", "raw Iallr us", "ratio");
  for (size_t bytes = from; bytes <= to; bytes *= 4) {
    const int64_t n = static_cast<int64_t>(bytes / 4);
    std::vector<float> host(static_cast<size_t>(n), 1.0f);
    // The tensor wraps `host`: all three calls reduce the same memory, so
    // none finds its buffer warmer in cache than the others do.
    spora_tensor_t* t = nullptr;
    CHECK(spora_tensor_wrap(cpu, SPORA_DTYPE_F32, &n, 1, host.data(), nullptr, nullptr, &t));
    const int rounds = fixed_rounds > 0 ? fixed_rounds : bytes <= (256u << 10) ? 200 : bytes <= (4u << 20) ? 40 : 20;
    std::vector<double> ts, tr, tn;
    // Interleaved, after one warm-up each, so drift hits all alike; round i
    // runs the calls in permutation i % 3! (i % 2 with two calls), so that
    // each call follows each other one equally often: the call before
    // changes the next one's time. With a fixed order (spora always right
    // after MPI_Iallreduce) and a buffer of its own, the same plugin read
    // 1.11-1.39 at 16 MiB where this reads 0.92-0.97.
    CHECK(spora_comm_all_reduce(comm, t, t, SPORA_REDUCE_SUM));
    MPI_Allreduce(MPI_IN_PLACE, host.data(), static_cast<int>(n), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    for (int i = 0; i < rounds; ++i) {
      static const int kOrders[6][3] = {{0, 1, 2}, {0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0}};
      static const int kPairs[2][3] = {{0, 1, -1}, {1, 0, -1}};
      const int* order = polled ? kOrders[i % 6] : kPairs[i % 2];
      for (int j = 0; j < (polled ? 3 : 2); ++j) {
        const int which = order[j];
        MPI_Barrier(MPI_COMM_WORLD);
        const double t0 = now();
        if (which == 0) {
          CHECK(spora_comm_all_reduce(comm, t, t, SPORA_REDUCE_SUM));
        } else if (which == 1) {
          MPI_Allreduce(MPI_IN_PLACE, host.data(), static_cast<int>(n), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        } else {
          MPI_Request req;
          MPI_Iallreduce(MPI_IN_PLACE, host.data(), static_cast<int>(n), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &req);
          for (int done = 0; !done;) MPI_Test(&req, &done, MPI_STATUS_IGNORE);
        }
        (which == 0 ? ts : which == 1 ? tr : tn).push_back(now() - t0);
      }
    }
    const double s = median(ts) * 1e6, r = median(tr) * 1e6, nb = polled ? median(tn) * 1e6 : 0.0;
    if (rank == 0 && polled)
      std::printf("%10zu %8d %12.1f %12.1f %8.2f %14.1f %8.2f\n", bytes, rounds, s, r, s / r, nb, s / nb);
    else if (rank == 0)
      std::printf("%10zu %8d %12.1f %12.1f %8.2f %14s %8s\n", bytes, rounds, s, r, s / r, "-", "-");
    spora_tensor_free(t);
  }
  spora_comm_free(comm);
  spora_context_free(ctx);
  MPI_Finalize();
  return 0;
}
