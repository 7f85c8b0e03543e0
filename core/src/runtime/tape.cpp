// The eager tape: the thread's stack of recording tapes, recording, and the
// recorded graph. Gradients are in tape_gradient.cpp.
#include "runtime/tape.h"

#include <algorithm>
#include <string>

#include "support/error.h"

namespace spora {

namespace tape_detail {

// A thread's recording tapes, and the op observer that feeds them: it is
// registered on the thread while the stack is not empty.
struct ThreadTapes final : OpObserver {
  std::vector<std::shared_ptr<Tape>> stack;  // innermost last
  const Tape* excluded = nullptr;

  ~ThreadTapes() override {
    // A thread that ends with tapes still started stops them.
    for (auto& t : stack) drop_entry(*t);
    if (!stack.empty()) remove_thread_observer(this);
  }
  static void drop_entry(Tape& t) { t.recording_.store(false, std::memory_order_release); }
  void erase(size_t i) {
    drop_entry(*stack[i]);
    stack.erase(stack.begin() + static_cast<std::ptrdiff_t>(i));
    if (stack.empty()) remove_thread_observer(this);
  }
  // Tapes freed while recording on this thread (possibly from another
  // thread) leave the stack here.
  void prune() {
    for (size_t i = stack.size(); i-- > 0;)
      if (stack[i]->released()) erase(i);
  }
  void push(const std::shared_ptr<Tape>& t) {
    if (stack.empty()) add_thread_observer(this);
    stack.push_back(t);
  }
  // Removes `t` wherever it is in the stack; false if absent.
  bool remove(const Tape* t) {
    auto it = std::find_if(stack.begin(), stack.end(), [&](const auto& p) { return p.get() == t; });
    if (it == stack.end()) return false;
    erase(static_cast<size_t>(it - stack.begin()));
    return true;
  }

  // Every tape on the stack records, except one whose gradient is running.
  void on_op(const OpDef& op, const Tensor* const* inputs, int num_inputs, const Attrs& attrs, const Tensor* outputs,
             int num_outputs, const char* file, int32_t line) override {
    prune();
    for (const auto& t : stack)
      if (t.get() != excluded) t->add_op(op, inputs, num_inputs, attrs, outputs, num_outputs, file, line);
  }
  void on_constant(const ir::Node& node, const Tensor& value) override {
    prune();
    for (const auto& t : stack)
      if (t.get() != excluded) t->add_constant(node, value);
  }
  // Tapes keep the forward values for the backward pass.
  bool keeps_values() const override { return !stack.empty(); }
};

namespace {
ThreadTapes& thread_tapes() {
  thread_local ThreadTapes t;
  return t;
}
}  // namespace

NotRecordingOn::NotRecordingOn(const Tape* tape) : prev_(thread_tapes().excluded) { thread_tapes().excluded = tape; }
NotRecordingOn::~NotRecordingOn() { thread_tapes().excluded = prev_; }

}  // namespace tape_detail

void Tape::start(const std::shared_ptr<Tape>& tape) {
  if (tape->released()) fail(Code::kInvalidArgument, "[spora_tape_start] the tape has been freed");
  if (tape->recording_.exchange(true, std::memory_order_acq_rel))
    fail(Code::kInvalidArgument,
         "[spora_tape_start] the tape is already recording; stop it first (to nest, start another tape)");
  try {
    tape_detail::ThreadTapes& tt = tape_detail::thread_tapes();
    tt.prune();
    tt.push(tape);
  } catch (...) {
    tape->recording_.store(false, std::memory_order_release);
    throw;
  }
}

void Tape::stop(const Tape* tape) {
  tape_detail::ThreadTapes& tt = tape_detail::thread_tapes();
  tt.prune();
  if (tt.stack.empty() || tt.stack.back().get() != tape) {
    const bool inside = std::any_of(tt.stack.begin(), tt.stack.end(), [&](const auto& p) { return p.get() == tape; });
    if (inside)
      fail(Code::kInvalidArgument,
           "[spora_tape_stop] the tape is not the innermost recording tape of this thread; stop the tapes started "
           "after it first");
    fail(Code::kInvalidArgument, "[spora_tape_stop] the tape is not recording on this thread (start it first)");
  }
  tt.erase(tt.stack.size() - 1);
}

void Tape::release() {
  released_.store(true, std::memory_order_release);
  tape_detail::thread_tapes().remove(this);
  std::lock_guard<std::mutex> lock(mu_);
  g_ = ir::Graph("tape");
  values_.clear();
  values_.shrink_to_fit();
  by_id_.clear();
  watched_.clear();
  watched_ids_.clear();
}

void Tape::watch(const Tensor& t) {
  std::lock_guard<std::mutex> lock(mu_);
  if (watched_ids_.insert(t.id).second) watched_.push_back(t);
}

ir::Value Tape::use(const Tensor& t) {
  auto it = by_id_.find(t.id);
  if (it != by_id_.end()) return it->second;
  ir::Node n;
  n.kind = ir::NodeKind::kInput;
  n.name = "x" + std::to_string(num_inputs_++);
  n.outputs.push_back({t.dtype, t.shape});
  const ir::Value v{g_.append(std::move(n)), 0};
  values_.push_back({t});
  // Id 0 marks internal tensors, which have no identity to remember.
  if (t.id) by_id_.emplace(t.id, v);
  return v;
}

void Tape::add_op(const OpDef& op, const Tensor* const* inputs, int num_inputs, const Attrs& attrs,
                  const Tensor* outputs, int num_outputs, const char* file, int32_t line) {
  std::lock_guard<std::mutex> lock(mu_);
  if (released()) return;
  std::vector<ir::Value> in(static_cast<size_t>(num_inputs));
  for (int i = 0; i < num_inputs; ++i) in[static_cast<size_t>(i)] = use(*inputs[i]);
  ir::SourceLoc loc;
  if (file && *file) loc = {file, line};
  // Graph::add_op runs the op's inference again: the tape then holds exactly
  // what graph mode would have built from the same calls.
  const std::vector<ir::Value> out = g_.add_op(op.name, in, attrs, loc);
  values_.emplace_back(outputs, outputs + num_outputs);
  for (int i = 0; i < num_outputs && i < static_cast<int>(out.size()); ++i)
    if (outputs[i].id) by_id_[outputs[i].id] = out[static_cast<size_t>(i)];
  if (static_cast<int>(out.size()) != num_outputs)
    fail(Code::kInternal, "{}", ir::with_loc(fmt::format("[tape] {} recorded with {} outputs, it ran with {}",
                                                         op.name, out.size(), num_outputs),
                                             loc));
  for (int i = 0; i < num_outputs; ++i) {
    const TensorMeta& m = g_.meta(out[static_cast<size_t>(i)]);
    if (m.dtype != outputs[i].dtype || m.shape != outputs[i].shape)
      fail(Code::kInternal, "{}",
           ir::with_loc(fmt::format("[tape] {} output {} is {} {} in the graph but {} {} eagerly", op.name, i,
                                    dtype_name(m.dtype), m.shape.str(), dtype_name(outputs[i].dtype),
                                    outputs[i].shape.str()),
                        loc));
  }
}

void Tape::add_constant(const ir::Node& node, const Tensor& value) {
  std::lock_guard<std::mutex> lock(mu_);
  if (released()) return;
  ir::Node c;
  c.kind = ir::NodeKind::kConstant;
  c.outputs = node.outputs;
  c.data = node.data;  // shared, not copied
  c.loc = node.loc;
  const ir::Value v{g_.append(std::move(c)), 0};
  values_.push_back({value});
  if (value.id) by_id_[value.id] = v;
}

ir::Graph Tape::graph(const std::vector<const Tensor*>& outputs) const {
  std::lock_guard<std::mutex> lock(mu_);
  ir::Graph g = g_;
  std::unordered_map<uint64_t, ir::Value> added;  // watched tensors no op used
  int32_t next_input = num_inputs_;
  std::vector<ir::Value> outs;
  for (size_t i = 0; i < outputs.size(); ++i) {
    const Tensor& t = *outputs[i];
    auto it = by_id_.find(t.id);
    if (it != by_id_.end()) {
      outs.push_back(it->second);
      continue;
    }
    if (!watched_ids_.count(t.id))
      fail(Code::kInvalidArgument,
           "[spora_tape_graph] output {} was neither produced nor used by an op recorded on this tape, nor watched", i);
    auto a = added.find(t.id);
    if (a == added.end()) {
      ir::Node n;
      n.kind = ir::NodeKind::kInput;
      n.name = "x" + std::to_string(next_input++);
      n.outputs.push_back({t.dtype, t.shape});
      a = added.emplace(t.id, ir::Value{g.append(std::move(n)), 0}).first;
    }
    outs.push_back(a->second);
  }
  g.set_outputs(std::move(outs));
  return g;
}

}  // namespace spora
