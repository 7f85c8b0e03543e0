#include "sched/plan_cache.h"

#include <cmath>
#include <cstdlib>

#include "passes/shape_inference.h"
#include "support/error.h"
#include "support/log.h"

namespace spora::sched {

struct PlanCache::Entry {
  std::vector<TensorMeta> signature;  // per param, in binding order
  std::unique_ptr<Executable> plan;
};

namespace {

bool same(const std::vector<TensorMeta>& a, const std::vector<TensorMeta>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].dtype != b[i].dtype || a[i].shape != b[i].shape) return false;
  return true;
}

}  // namespace

size_t plan_cache_capacity() {
  const char* s = std::getenv("SPORA_PLAN_CACHE");
  if (!s || !*s) return 8;
  char* end = nullptr;
  const double v = std::strtod(s, &end);
  if (end == s || *end != '\0' || !std::isfinite(v) || v < 1 || v > 1e6 || v != std::floor(v))
    fail(Code::kInvalidArgument, "[graph] SPORA_PLAN_CACHE='{}' is not a plan count between 1 and 1000000", s);
  return static_cast<size_t>(v);
}

PlanCache::PlanCache(const ir::Graph& graph, Device* device)
    : graph_(graph), device_(device), capacity_(plan_cache_capacity()) {
  for (size_t id = 0; id < graph_.nodes().size(); ++id) {
    const ir::NodeKind k = graph_.nodes()[id].kind;
    if (k == ir::NodeKind::kInput || k == ir::NodeKind::kWeight) param_nodes_.push_back(static_cast<int32_t>(id));
  }
  Entry e;
  for (int32_t id : param_nodes_) e.signature.push_back(graph_.node(id).outputs[0]);
  e.plan = std::make_unique<Executable>(graph_, device_);
  planned_bytes_ = e.plan->planned_bytes();
  naive_bytes_ = e.plan->naive_bytes();
  collectives_ = e.plan->collectives();
  overlapped_ = e.plan->overlapped_collectives();
  plans_.push_back(std::move(e));
}

PlanCache::~PlanCache() = default;

size_t PlanCache::plan_count() const {
  std::lock_guard<std::mutex> lock(mu_);
  return plans_.size();
}

Executable& PlanCache::plan_for(const std::vector<const Tensor*>& params) {
  check_bound_params(graph_, param_nodes_, device_, params, true);
  std::vector<TensorMeta> sig(params.size());
  for (size_t i = 0; i < params.size(); ++i) sig[i] = {params[i]->dtype, params[i]->shape};
  for (auto it = plans_.begin(); it != plans_.end(); ++it)
    if (same(it->signature, sig)) {
      if (it != plans_.begin()) plans_.splice(plans_.begin(), plans_, it);
      return *plans_.front().plan;
    }

  // A new signature: the graph retyped for it, then planned as usual.
  std::string what;
  ir::Graph g = graph_;
  for (size_t i = 0; i < params.size(); ++i) {
    ir::Node& n = g.mutable_node(param_nodes_[i]);
    if (n.outputs[0].shape != sig[i].shape)
      what += fmt::format("{}{} {}", what.empty() ? "" : ", ", n.name, sig[i].shape.str());
    n.outputs[0] = sig[i];
  }
  Entry e;
  e.signature = std::move(sig);
  try {
    passes::infer_shapes(g);
    e.plan = std::make_unique<Executable>(g, device_);
  } catch (const Error& err) {
    throw Error(err.code(), fmt::format("{}; while planning graph '{}' for {}", err.what(), graph_.name(), what));
  }
  logger().debug("[graph {}] planned for {} ({} plans cached)", graph_.name(), what, plans_.size() + 1);
  plans_.push_front(std::move(e));
  while (plans_.size() > capacity_) plans_.pop_back();
  return *plans_.front().plan;
}

std::vector<Tensor> PlanCache::run(const std::vector<const Tensor*>& params, const std::vector<int32_t>& donate) {
  std::lock_guard<std::mutex> lock(mu_);
  return plan_for(params).run(params, donate);
}

}  // namespace spora::sched
