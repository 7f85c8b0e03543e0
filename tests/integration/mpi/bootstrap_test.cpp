// A device backend's unique id under plain mpirun (no store): rank 0's id
// reaches every rank through the mpi backend (exchange_unique_id_over),
// as NCCL started by mpirun needs. Run with 2 and 3 ranks.
#include <gtest/gtest.h>

#include <cstring>

#include "runtime/collective.h"
#include "runtime/context.h"

namespace spora {
namespace {

TEST(CommBootstrap, RankZerosIdReachesEveryRankOverMpi) {
  Context ctx;
  auto boot = Communicator::create(ctx, "mpi", -1, -1);
  ASSERT_GE(boot->size(), 2) << "run under mpirun -np 2 or more";
  int calls = 0;
  for (int round = 0; round < 3; ++round) {
    const spora_comm_id_t id = exchange_unique_id_over(*boot, [&](spora_comm_id_t* out) {
      ++calls;
      for (size_t i = 0; i < sizeof out->bytes; ++i) out->bytes[i] = static_cast<uint8_t>(255 - i - round);
    });
    // Every byte, including 0xff ones whose int32 words are negative.
    for (size_t i = 0; i < sizeof id.bytes; ++i)
      ASSERT_EQ(id.bytes[i], static_cast<uint8_t>(255 - i - round)) << "rank " << boot->rank() << " byte " << i;
  }
  EXPECT_EQ(calls, boot->rank() == 0 ? 3 : 0);  // only rank 0 makes ids
}

}  // namespace
}  // namespace spora
