// A user's sharding strategy for one op (MindSpore's Primitive.shard): per
// input, per dim, how many blocks the dim is cut into ("4,1;1,1") or the
// name of the mesh axis that cuts it ("dp,1;1,mp"); inputs are separated by
// ';', dims by ','. docs/parallel.md.
#pragma once
#include <string>
#include <vector>

#include "ir/graph.h"
#include "ir/sharding.h"
#include "parallel/mesh.h"

namespace spora::parallel {

// The layouts `strategy` asks of node n's inputs. A count of 1 replicates
// the dim; a count k > 1 maps to the first mesh axis of size k not already
// cutting another dim of that input; a name maps to that axis. Errors
// (kInvalidArgument) name the op, the strategy, the user's line and the
// numbers: a count that no axis has, a dim that does not divide, a wrong
// number of inputs or dims.
std::vector<TensorLayout> parse_strategy(const ir::Graph& g, const ir::Node& n, const std::string& strategy,
                                         const Mesh& mesh);

// "((4, 1), (1, 1))": the strategy as the user wrote it, for messages.
std::string strategy_text(const std::string& strategy);

}  // namespace spora::parallel
