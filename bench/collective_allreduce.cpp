// spora_comm_all_reduce (C API -> collective plugin "mpi") against raw
// MPI_Allreduce on the same data in the same mpirun job, f32 sum, in place,
// from 4 KiB to 64 MiB. Run:
//   mpirun -np 2 --oversubscribe build/bin/bench_collective_allreduce
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
  CHECK(spora_context_create(&ctx));
  CHECK(spora_device_find(ctx, "cpu", &cpu));
  CHECK(spora_comm_create(ctx, "mpi", rank, size, &comm));
  if (rank == 0)
    std::printf("all_reduce f32 sum, in place, %d ranks: median of each size's rounds\n%10s %8s %12s %12s %8s %14s %8s\n",
                size, "bytes", "rounds", "spora us", "raw us", "ratio", "raw Iallr us", "ratio");
  for (size_t bytes = 4096; bytes <= (size_t{64} << 20); bytes *= 4) {
    const int64_t n = static_cast<int64_t>(bytes / 4);
    std::vector<float> host(static_cast<size_t>(n), 1.0f);
    spora_tensor_t* t = nullptr;
    CHECK(spora_tensor_create(cpu, SPORA_DTYPE_F32, &n, 1, host.data(), bytes, &t));
    const int rounds = bytes <= (256u << 10) ? 200 : bytes <= (4u << 20) ? 40 : 8;
    std::vector<double> ts, tr, tn;
    // Interleaved, after one warm-up each, so drift hits both alike.
    CHECK(spora_comm_all_reduce(comm, t, t, SPORA_REDUCE_SUM));
    MPI_Allreduce(MPI_IN_PLACE, host.data(), static_cast<int>(n), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    for (int i = 0; i < rounds; ++i) {
      MPI_Barrier(MPI_COMM_WORLD);
      double t0 = now();
      CHECK(spora_comm_all_reduce(comm, t, t, SPORA_REDUCE_SUM));
      ts.push_back(now() - t0);
      MPI_Barrier(MPI_COMM_WORLD);
      t0 = now();
      MPI_Allreduce(MPI_IN_PLACE, host.data(), static_cast<int>(n), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      tr.push_back(now() - t0);
      MPI_Barrier(MPI_COMM_WORLD);
      t0 = now();
      MPI_Request req;
      MPI_Iallreduce(MPI_IN_PLACE, host.data(), static_cast<int>(n), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &req);
      for (int done = 0; !done;) MPI_Test(&req, &done, MPI_STATUS_IGNORE);
      tn.push_back(now() - t0);
    }
    const double s = median(ts) * 1e6, r = median(tr) * 1e6, nb = median(tn) * 1e6;
    if (rank == 0) std::printf("%10zu %8d %12.1f %12.1f %8.2f %14.1f %8.2f\n", bytes, rounds, s, r, s / r, nb, s / nb);
    spora_tensor_free(t);
  }
  spora_comm_free(comm);
  spora_context_free(ctx);
  MPI_Finalize();
  return 0;
}
