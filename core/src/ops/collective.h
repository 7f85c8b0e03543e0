// The collective ops' vocabulary, shared by their definitions (ops) and the
// communicators that run them (runtime): which ops a scheduler runs through
// a communicator, and the reduce-op names of their "op" attribute.
#pragma once
#include <cstdint>
#include <string>

namespace spora {

struct OpDef;

// Ops the scheduler runs through a communicator instead of a device kernel
// (all_reduce, all_gather, reduce_scatter).
bool is_collective_op(const OpDef& op);

// "sum", "prod", "max", "min", "mean"/"avg" -> SPORA_REDUCE_*; throws
// kInvalidArgument naming `who` otherwise.
int32_t reduce_op_from_name(const std::string& name, const std::string& who);
const char* reduce_op_name(int32_t op);

}  // namespace spora
