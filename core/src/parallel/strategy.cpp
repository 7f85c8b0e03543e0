#include "parallel/strategy.h"

#include <cctype>

#include <fmt/format.h>

#include "support/error.h"

namespace spora::parallel {
namespace {

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : s) {
    if (c == sep) {
      out.push_back(cur);
      cur.clear();
    } else if (!std::isspace(static_cast<unsigned char>(c))) {
      cur += c;
    }
  }
  out.push_back(cur);
  return out;
}

bool is_count(const std::string& t) {
  if (t.empty()) return false;
  for (char c : t)
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  return true;
}

}  // namespace

std::string strategy_text(const std::string& strategy) {
  std::string s = "(";
  const std::vector<std::string> ins = split(strategy, ';');
  for (size_t i = 0; i < ins.size(); ++i) {
    const std::vector<std::string> dims = split(ins[i], ',');
    s += (i ? ", (" : "(");
    for (size_t d = 0; d < dims.size(); ++d) s += (d ? ", " : "") + dims[d];
    s += dims.size() == 1 ? ",)" : ")";
  }
  return s + (ins.size() == 1 ? ",)" : ")");
}

std::vector<TensorLayout> parse_strategy(const ir::Graph& g, const ir::Node& n, const std::string& strategy,
                                         const Mesh& mesh) {
  const std::string op = n.op ? n.op->name : "node";
  auto bad = [&](const std::string& why) {
    throw Error(Code::kInvalidArgument,
                ir::with_loc(fmt::format("[{}] strategy {}: {}", op, strategy_text(strategy), why), n.loc));
  };
  const std::vector<std::string> ins = split(strategy, ';');
  if (ins.size() != n.inputs.size())
    bad(fmt::format("gives {} input strategies but the op has {} inputs", ins.size(), n.inputs.size()));
  std::vector<TensorLayout> out;
  for (size_t i = 0; i < ins.size(); ++i) {
    const Shape& s = g.meta(n.inputs[i]).shape;
    const std::vector<std::string> dims = s.rank == 0 && ins[i].empty() ? std::vector<std::string>{} : split(ins[i], ',');
    if (static_cast<int>(dims.size()) != s.rank)
      bad(fmt::format("input {} has {} dims (shape {}) but its strategy gives {}", i, s.rank, s.str(), dims.size()));
    TensorLayout l = TensorLayout::replicated(s.rank);
    uint32_t used = 0;
    for (int d = 0; d < s.rank; ++d) {
      const std::string& t = dims[static_cast<size_t>(d)];
      int axis = kReplicated;
      if (is_count(t)) {
        const int64_t k = std::stoll(t);
        if (k == 0) bad(fmt::format("input {} dim {}: a dim cannot be cut into 0 blocks", i, d));
        if (k > 1) {
          for (int a = 0; a < mesh.axes() && axis == kReplicated; ++a)
            if (mesh.shape[static_cast<size_t>(a)] == k && !(used & (1u << a))) axis = a;
          if (axis == kReplicated)
            bad(fmt::format("input {} dim {} is cut into {} blocks, but no free axis of mesh {} has {} devices", i, d,
                            k, mesh.str(), k));
        }
      } else {
        axis = mesh.axis_named(t);
        if (axis < 0) bad(fmt::format("input {} dim {}: mesh {} has no axis named '{}'", i, d, mesh.str(), t));
      }
      if (axis == kReplicated) continue;
      if (used & (1u << axis))
        bad(fmt::format("input {} cuts two dims over mesh axis {}", i, axis));
      const int64_t k = mesh.shape[static_cast<size_t>(axis)];
      if (s.dims[d] % k != 0)
        bad(fmt::format("input {} dim {} of size {} (shape {}) does not divide into {} blocks", i, d, s.dims[d],
                        s.str(), k));
      used |= 1u << axis;
      l.dims[static_cast<size_t>(d)] = axis;
    }
    out.push_back(l);
  }
  return out;
}

}  // namespace spora::parallel
