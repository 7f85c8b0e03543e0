#include "passes/host_eval.h"

#include <atomic>

#include "passes/target.h"
#include "support/log.h"

namespace spora::passes {
namespace {
std::atomic<const Evaluator*> g_evaluator{nullptr};
std::atomic<const Target*> g_target{nullptr};
}  // namespace

int set_default_evaluator(const Evaluator* e) {
  g_evaluator = e;
  return 0;
}
const Evaluator* default_evaluator() { return g_evaluator; }

int set_default_target(const Target* t) {
  g_target = t;
  return 0;
}
const Target& default_target() {
  static const Target none;
  const Target* t = g_target;
  return t ? *t : none;
}

std::optional<std::vector<HostValue>> evaluate_node(const Evaluator& ev, const ir::Node& n,
                                                    const std::vector<HostValue>& inputs, const char* pass) {
  std::string why;
  auto out = ev.evaluate(*n.op, inputs, n.attrs, n.outputs.size(), &why);
  if (!out) logger().debug("[{}] not evaluating {}: {}", pass, n.op->name, why);
  return out;
}

}  // namespace spora::passes
