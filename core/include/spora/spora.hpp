// spora/spora.hpp -- header-only C++17 RAII layer over spora.h.
//
// Owns handles (move-only), turns a failing status into spora::Error whose
// message is spora_last_error() -- which names the op and the cause. Nothing
// here reaches into libspora beyond the C API, so it works against any
// libspora.so with the same major version.
#ifndef SPORA_SPORA_HPP
#define SPORA_SPORA_HPP

#include <spora/spora.h>

#include <initializer_list>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace spora {

class Error : public std::runtime_error {
 public:
  Error(spora_status_t status, const std::string& message) : std::runtime_error(message), status_(status) {}
  spora_status_t status() const noexcept { return status_; }

 private:
  spora_status_t status_;
};

inline void check(spora_status_t s) {
  if (s != SPORA_OK) throw Error(s, std::string(spora_last_error()) + " (" + spora_status_string(s) + ")");
}

// A device: borrowed, valid for the life of the process.
class Device {
 public:
  Device() = default;
  explicit Device(spora_device_t* d) : d_(d) {}
  spora_device_t* get() const noexcept { return d_; }
  explicit operator bool() const noexcept { return d_ != nullptr; }
  std::string name() const {
    const char* n = nullptr;
    check(spora_device_name(d_, &n));
    return n;
  }
  std::string property(const char* key) const {
    const char* v = nullptr;
    check(spora_device_property(d_, key, &v));
    return v;
  }
  std::vector<std::pair<std::string, std::string>> properties() const {
    size_t n = 0;
    check(spora_device_property_count(d_, &n));
    std::vector<std::pair<std::string, std::string>> out;
    for (size_t i = 0; i < n; ++i) {
      const char *k = nullptr, *v = nullptr;
      check(spora_device_property_at(d_, i, &k, &v));
      out.emplace_back(k, v);
    }
    return out;
  }
  void synchronize() const { check(spora_device_synchronize(d_)); }
  // See spora_device_set_fallback.
  void set_fallback(bool enabled) const { check(spora_device_set_fallback(d_, enabled ? 1 : 0)); }
  // See spora_device_memory_stats: bytes, from the device's plugin.
  struct MemoryStats {
    uint64_t allocated = 0, peak_allocated = 0, reserved = 0, peak_reserved = 0;
  };
  MemoryStats memory_stats() const {
    MemoryStats s;
    check(spora_device_memory_stats(d_, &s.allocated, &s.peak_allocated, &s.reserved, &s.peak_reserved));
    return s;
  }
  void reset_peak_memory_stats() const { check(spora_device_reset_peak_memory_stats(d_)); }

 private:
  spora_device_t* d_ = nullptr;
};

struct PluginInfo {
  std::string name, kind, path, version, reason;
  bool available = false;
};

class Context {
 public:
  Context() { check(spora_context_create(&c_)); }
  ~Context() { spora_context_free(c_); }
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;
  Context(Context&& o) noexcept : c_(std::exchange(o.c_, nullptr)) {}
  Context& operator=(Context&& o) noexcept {
    std::swap(c_, o.c_);
    return *this;
  }
  spora_context_t* get() const noexcept { return c_; }

  void add_plugin_path(const std::string& path) { check(spora_context_add_plugin_path(c_, path.c_str())); }

  std::vector<PluginInfo> plugins() const {
    size_t n = 0;
    check(spora_plugin_count(c_, &n));
    std::vector<PluginInfo> out;
    for (size_t i = 0; i < n; ++i) {
      spora_plugin_t* p = nullptr;
      check(spora_plugin_get(c_, i, &p));
      const char *name, *kind, *path, *version, *reason;
      int32_t avail = 0;
      check(spora_plugin_describe(p, &name, &kind, &path, &version, &avail, &reason));
      out.push_back({name, kind, path, version, reason, avail != 0});
    }
    return out;
  }
  std::vector<Device> devices() const {
    size_t n = 0;
    check(spora_device_count(c_, &n));
    std::vector<Device> out;
    for (size_t i = 0; i < n; ++i) {
      spora_device_t* d = nullptr;
      check(spora_device_get(c_, i, &d));
      out.emplace_back(d);
    }
    return out;
  }
  Device device(const std::string& name) const {
    spora_device_t* d = nullptr;
    check(spora_device_find(c_, name.c_str(), &d));
    return Device(d);
  }

 private:
  spora_context_t* c_ = nullptr;
};

template <class T>
struct dtype_of;
template <>
struct dtype_of<float> {
  static constexpr spora_dtype_t value = SPORA_DTYPE_F32;
};
template <>
struct dtype_of<double> {
  static constexpr spora_dtype_t value = SPORA_DTYPE_F64;
};
template <>
struct dtype_of<int32_t> {
  static constexpr spora_dtype_t value = SPORA_DTYPE_I32;
};
template <>
struct dtype_of<int64_t> {
  static constexpr spora_dtype_t value = SPORA_DTYPE_I64;
};

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(spora_tensor_t* t) noexcept : t_(t) {}
  ~Tensor() { spora_tensor_free(t_); }
  Tensor(const Tensor&) = delete;
  Tensor& operator=(const Tensor&) = delete;
  Tensor(Tensor&& o) noexcept : t_(std::exchange(o.t_, nullptr)) {}
  Tensor& operator=(Tensor&& o) noexcept {
    std::swap(t_, o.t_);
    return *this;
  }

  // From host data (copied). `data.size()` must equal the shape's product.
  template <class T>
  static Tensor from(Device device, const std::vector<int64_t>& shape, const std::vector<T>& data) {
    spora_tensor_t* t = nullptr;
    check(spora_tensor_create(device.get(), dtype_of<T>::value, shape.data(), static_cast<int32_t>(shape.size()),
                              data.data(), data.size() * sizeof(T), &t));
    return Tensor(t);
  }
  static Tensor zeros(Device device, spora_dtype_t dtype, const std::vector<int64_t>& shape) {
    spora_tensor_t* t = nullptr;
    check(spora_tensor_create(device.get(), dtype, shape.data(), static_cast<int32_t>(shape.size()), nullptr, 0, &t));
    return Tensor(t);
  }

  spora_tensor_t* get() const noexcept { return t_; }
  explicit operator bool() const noexcept { return t_ != nullptr; }

  Tensor to(Device device) const {
    spora_tensor_t* t = nullptr;
    check(spora_tensor_to(t_, device.get(), &t));
    return Tensor(t);
  }
  spora_dtype_t dtype() const {
    spora_dtype_t d;
    check(spora_tensor_dtype(t_, &d));
    return d;
  }
  std::vector<int64_t> shape() const {
    int32_t n = 0;
    check(spora_tensor_ndim(t_, &n));
    std::vector<int64_t> s(static_cast<size_t>(n));
    check(spora_tensor_shape(t_, s.data(), n));
    return s;
  }
  int64_t numel() const {
    int64_t n = 0;
    check(spora_tensor_numel(t_, &n));
    return n;
  }
  Device device() const {
    spora_device_t* d = nullptr;
    check(spora_tensor_device(t_, &d));
    return Device(d);
  }
  // Copies the contents to the host as T (which must match the dtype).
  template <class T>
  std::vector<T> read() const {
    if (dtype() != dtype_of<T>::value) throw Error(SPORA_ERROR_INVALID_ARGUMENT, "[tensor] read<T>: T does not match dtype");
    std::vector<T> out(static_cast<size_t>(numel()));
    check(spora_tensor_read(t_, out.data(), out.size() * sizeof(T)));
    return out;
  }

 private:
  spora_tensor_t* t_ = nullptr;
};

class Attrs {
 public:
  Attrs() { check(spora_attrs_create(&a_)); }
  ~Attrs() { spora_attrs_free(a_); }
  Attrs(const Attrs&) = delete;
  Attrs& operator=(const Attrs&) = delete;
  Attrs(Attrs&& o) noexcept : a_(std::exchange(o.a_, nullptr)) {}
  const spora_attrs_t* get() const noexcept { return a_; }

  Attrs& set(const char* name, int64_t v) { check(spora_attrs_set_int(a_, name, v)); return *this; }
  Attrs& set(const char* name, int v) { return set(name, static_cast<int64_t>(v)); }
  Attrs& set(const char* name, double v) { check(spora_attrs_set_float(a_, name, v)); return *this; }
  Attrs& set(const char* name, bool v) { check(spora_attrs_set_bool(a_, name, v ? 1 : 0)); return *this; }
  Attrs& set(const char* name, const std::vector<int64_t>& v) {
    check(spora_attrs_set_ints(a_, name, v.data(), v.size()));
    return *this;
  }
  Attrs& set(const char* name, const char* v) { check(spora_attrs_set_string(a_, name, v)); return *this; }

 private:
  spora_attrs_t* a_ = nullptr;
};

// Runs an op eagerly with the caller's source location (`file` may be
// null): errors and tape records carry it. Returns the op's outputs.
inline std::vector<Tensor> call_at(const char* file, int32_t line, const char* op,
                                   std::initializer_list<const Tensor*> inputs, const Attrs* attrs = nullptr,
                                   size_t num_outputs = 1, Device device = Device()) {
  std::vector<spora_tensor_t*> in;
  for (const Tensor* t : inputs) in.push_back(t ? t->get() : nullptr);
  std::vector<spora_tensor_t*> out(num_outputs, nullptr);
  check(spora_op_call_at(op, device.get(), in.data(), in.size(), attrs ? attrs->get() : nullptr, file, line,
                         out.data(), out.size()));
  std::vector<Tensor> result;
  for (auto* t : out) result.emplace_back(t);
  return result;
}

// Runs an op eagerly and returns its outputs.
inline std::vector<Tensor> call(const char* op, std::initializer_list<const Tensor*> inputs, const Attrs* attrs = nullptr,
                                size_t num_outputs = 1, Device device = Device()) {
  return call_at(nullptr, 0, op, inputs, attrs, num_outputs, device);
}

// Runs an op eagerly into existing tensors (spora_op_call_into): an
// optimizer update with its params and states as outputs updates them in
// place.
inline void call_into(const char* op, const std::vector<const Tensor*>& inputs, const std::vector<Tensor*>& outputs,
                      const Attrs* attrs = nullptr) {
  std::vector<spora_tensor_t*> in, out;
  for (const Tensor* t : inputs) in.push_back(t ? t->get() : nullptr);
  for (Tensor* t : outputs) out.push_back(t ? t->get() : nullptr);
  check(spora_op_call_into(op, nullptr, in.data(), in.size(), attrs ? attrs->get() : nullptr, out.data(), out.size()));
}

// Single-output shorthand: spora::op("add", {&a, &b}).
inline Tensor op(const char* name, std::initializer_list<const Tensor*> inputs, const Attrs* attrs = nullptr) {
  return std::move(call(name, inputs, attrs, 1).front());
}

class Executable;

// A graph under construction (graph mode). Values are spora_value_t ids.
class Graph {
 public:
  explicit Graph(const char* name = "main") { check(spora_graph_create(name, &g_)); }
  explicit Graph(spora_graph_t* g) noexcept : g_(g) {}
  ~Graph() { spora_graph_free(g_); }
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;
  Graph(Graph&& o) noexcept : g_(std::exchange(o.g_, nullptr)) {}
  Graph& operator=(Graph&& o) noexcept {
    std::swap(g_, o.g_);
    return *this;
  }
  spora_graph_t* get() const noexcept { return g_; }

  spora_value_t input(const char* name, spora_dtype_t dtype, const std::vector<int64_t>& shape) {
    spora_value_t v;
    check(spora_graph_add_input(g_, name, dtype, shape.data(), static_cast<int32_t>(shape.size()), &v));
    return v;
  }
  spora_value_t weight(const char* name, spora_dtype_t dtype, const std::vector<int64_t>& shape) {
    spora_value_t v;
    check(spora_graph_add_weight(g_, name, dtype, shape.data(), static_cast<int32_t>(shape.size()), &v));
    return v;
  }
  spora_value_t constant(const Tensor& t) {
    spora_value_t v;
    check(spora_graph_add_constant(g_, t.get(), &v));
    return v;
  }
  // All outputs of `op`; `file`/`line` are the user's source location.
  std::vector<spora_value_t> ops(const char* op, const std::vector<spora_value_t>& inputs,
                                 const Attrs* attrs = nullptr, const char* file = nullptr, int32_t line = 0) {
    std::vector<spora_value_t> out(SPORA_MAX_OP_OUTPUTS);
    size_t n = 0;
    check(spora_graph_add_op(g_, op, inputs.data(), inputs.size(), attrs ? attrs->get() : nullptr, file, line,
                             out.data(), out.size(), &n));
    out.resize(n);
    return out;
  }
  spora_value_t op(const char* op, const std::vector<spora_value_t>& inputs, const Attrs* attrs = nullptr,
                   const char* file = nullptr, int32_t line = 0) {
    return ops(op, inputs, attrs, file, line).at(0);
  }
  // Control flow (spora_graph_add_if / spora_graph_add_while): the
  // sub-graphs are copied in; returns the node's outputs.
  std::vector<spora_value_t> if_else(spora_value_t cond, const Graph& then_graph, const Graph& else_graph,
                                 const std::vector<spora_value_t>& inputs, const char* file = nullptr,
                                 int32_t line = 0) {
    size_t n = 0;
    check(spora_graph_outputs(then_graph.g_, nullptr, 0, &n));
    std::vector<spora_value_t> out(n ? n : 1);
    check(spora_graph_add_if(g_, cond, then_graph.g_, else_graph.g_, inputs.data(), inputs.size(), file, line,
                             out.data(), out.size(), &n));
    out.resize(n);
    return out;
  }
  std::vector<spora_value_t> while_loop(const Graph& cond_graph, const Graph& body_graph,
                                    const std::vector<spora_value_t>& inputs, const char* file = nullptr,
                                    int32_t line = 0) {
    std::vector<spora_value_t> out(inputs.size() ? inputs.size() : 1);
    size_t n = 0;
    check(spora_graph_add_while(g_, cond_graph.g_, body_graph.g_, inputs.data(), inputs.size(), file, line,
                                out.data(), out.size(), &n));
    out.resize(n);
    return out;
  }
  void set_outputs(const std::vector<spora_value_t>& values) {
    check(spora_graph_set_outputs(g_, values.data(), values.size()));
  }
  std::vector<spora_value_t> outputs() const {
    size_t n = 0;
    check(spora_graph_outputs(g_, nullptr, 0, &n));
    std::vector<spora_value_t> v(n);
    check(spora_graph_outputs(g_, v.data(), n, &n));
    return v;
  }
  std::string text() const {
    const char* s;
    check(spora_graph_to_text(g_, &s));
    return s;
  }
  std::string json() const {
    const char* s;
    check(spora_graph_to_json(g_, &s));
    return s;
  }
  static Graph from_json(const std::string& text) {
    spora_graph_t* g;
    check(spora_graph_from_json(text.data(), text.size(), &g));
    return Graph(g);
  }
  void optimize(int32_t level = 1) { check(spora_graph_optimize(g_, level)); }
  void run_pass(const char* name) { check(spora_graph_run_pass(g_, name)); }
  // Recomputation marks (spora_graph_mark_recompute): the op nodes with ids
  // in [first, end) not marked yet get `mark`; returns how many.
  int64_t num_nodes() const {
    int64_t n = 0;
    check(spora_graph_num_nodes(g_, &n));
    return n;
  }
  int64_t mark_recompute(int64_t first, int64_t end, int64_t mark) {
    int64_t n = 0;
    check(spora_graph_mark_recompute(g_, first, end, mark, &n));
    return n;
  }
  // value_and_grad: outputs of this graph, then d(output `output`)/d(wrt...).
  Graph grad(const std::vector<spora_value_t>& wrt, size_t output = 0) const {
    spora_graph_t* g;
    check(spora_graph_grad(g_, wrt.data(), wrt.size(), output, &g));
    return Graph(g);
  }
  inline Executable compile(Device device) const;
  // Runs op by op through eager dispatch (spora_graph_run_eager); binds
  // every input and weight in creation order.
  std::vector<Tensor> run_eager(Device device, const std::vector<const Tensor*>& params, size_t num_outputs) const {
    std::vector<spora_tensor_t*> in;
    for (const Tensor* t : params) in.push_back(t ? t->get() : nullptr);
    std::vector<spora_tensor_t*> out(num_outputs, nullptr);
    check(spora_graph_run_eager(g_, device.get(), in.data(), in.size(), out.data(), out.size()));
    std::vector<Tensor> result;
    for (auto* t : out) result.emplace_back(t);
    return result;
  }

 private:
  spora_graph_t* g_ = nullptr;
};

// A graph compiled for one device.
class Executable {
 public:
  explicit Executable(spora_executable_t* e) noexcept : e_(e) {}
  ~Executable() { spora_executable_free(e_); }
  Executable(const Executable&) = delete;
  Executable& operator=(const Executable&) = delete;
  Executable(Executable&& o) noexcept : e_(std::exchange(o.e_, nullptr)) {}
  spora_executable_t* get() const noexcept { return e_; }

  // Binds every input and weight in creation order.
  std::vector<Tensor> run(std::initializer_list<const Tensor*> params, size_t num_outputs) {
    return run(std::vector<const Tensor*>(params), num_outputs);
  }
  std::vector<Tensor> run(const std::vector<const Tensor*>& params, size_t num_outputs) {
    std::vector<spora_tensor_t*> in;
    for (const Tensor* t : params) in.push_back(t ? t->get() : nullptr);
    std::vector<spora_tensor_t*> out(num_outputs, nullptr);
    check(spora_executable_run(e_, in.data(), in.size(), out.data(), out.size()));
    std::vector<Tensor> result;
    for (auto* t : out) result.emplace_back(t);
    return result;
  }
  // Planned arena bytes and the bytes without reuse.
  std::pair<uint64_t, uint64_t> memory() const {
    uint64_t p = 0, n = 0;
    check(spora_executable_memory(e_, &p, &n));
    return {p, n};
  }

 private:
  spora_executable_t* e_ = nullptr;
};

inline Executable Graph::compile(Device device) const {
  spora_executable_t* e;
  check(spora_graph_compile(g_, device.get(), &e));
  return Executable(e);
}

// The eager tape (spora_tape_*): records eager ops while started and
// differentiates them with the graph-mode autodiff transform.
//
//   spora::Tape tape;
//   tape.watch(w);
//   {
//     spora::Tape::Recording rec(tape);   // start ... stop
//     loss = spora::op("sum", {&y});
//   }
//   auto grads = tape.gradient(loss, {&w});
class Tape {
 public:
  Tape() { check(spora_tape_create(&t_)); }
  ~Tape() { spora_tape_free(t_); }
  Tape(const Tape&) = delete;
  Tape& operator=(const Tape&) = delete;
  Tape(Tape&& o) noexcept : t_(std::exchange(o.t_, nullptr)) {}
  Tape& operator=(Tape&& o) noexcept {
    std::swap(t_, o.t_);
    return *this;
  }
  spora_tape_t* get() const noexcept { return t_; }

  void start() { check(spora_tape_start(t_)); }
  void stop() { check(spora_tape_stop(t_)); }
  void watch(const Tensor& t) { check(spora_tape_watch(t_, t.get())); }

  // d target / d sources (with `sens` as the vector-Jacobian seed, or ones).
  std::vector<Tensor> gradient(const Tensor& target, std::initializer_list<const Tensor*> sources,
                               const Tensor* sens = nullptr) {
    return gradient(target, std::vector<const Tensor*>(sources), sens);
  }
  std::vector<Tensor> gradient(const Tensor& target, const std::vector<const Tensor*>& sources,
                               const Tensor* sens = nullptr) {
    std::vector<const spora_tensor_t*> src;
    for (const Tensor* t : sources) src.push_back(t ? t->get() : nullptr);
    std::vector<spora_tensor_t*> out(src.size(), nullptr);
    check(spora_tape_gradient(t_, target.get(), sens ? sens->get() : nullptr, src.data(), src.size(), out.data()));
    std::vector<Tensor> result;
    for (auto* t : out) result.emplace_back(t);
    return result;
  }
  // The recorded graph with `outputs` as its outputs.
  Graph graph(std::initializer_list<const Tensor*> outputs) const {
    std::vector<const spora_tensor_t*> out;
    for (const Tensor* t : outputs) out.push_back(t ? t->get() : nullptr);
    spora_graph_t* g = nullptr;
    check(spora_tape_graph(t_, out.data(), out.size(), &g));
    return Graph(g);
  }

  // Starts the tape for the scope's lifetime (stops it on exit, also when
  // an exception unwinds).
  class Recording {
   public:
    explicit Recording(Tape& tape) : t_(tape.get()) { check(spora_tape_start(t_)); }
    ~Recording() { spora_tape_stop(t_); }
    Recording(const Recording&) = delete;
    Recording& operator=(const Recording&) = delete;

   private:
    spora_tape_t* t_;
  };

 private:
  spora_tape_t* t_ = nullptr;
};

// ---- checkpoint and model files (see spora.h) ----

// Saves named tensors; `metadata_json` is "" for none or a JSON object of
// strings.
inline void save_checkpoint(const std::string& path, const std::vector<std::pair<std::string, const Tensor*>>& tensors,
                            const std::string& metadata_json = "") {
  std::vector<const char*> names;
  std::vector<spora_tensor_t*> ts;
  for (const auto& [name, t] : tensors) {
    names.push_back(name.c_str());
    ts.push_back(t ? t->get() : nullptr);
  }
  check(spora_checkpoint_save(path.c_str(), names.data(), ts.data(), ts.size(),
                              metadata_json.empty() ? nullptr : metadata_json.c_str()));
}

struct CheckpointEntry {
  std::string name;
  spora_dtype_t dtype = SPORA_DTYPE_INVALID;
  std::vector<int64_t> shape;
};

// An open checkpoint file (validated on open; tensors read on demand).
class Checkpoint {
 public:
  explicit Checkpoint(const std::string& path) { check(spora_checkpoint_open(path.c_str(), &c_)); }
  ~Checkpoint() { spora_checkpoint_close(c_); }
  Checkpoint(const Checkpoint&) = delete;
  Checkpoint& operator=(const Checkpoint&) = delete;
  Checkpoint(Checkpoint&& o) noexcept : c_(std::exchange(o.c_, nullptr)) {}
  Checkpoint& operator=(Checkpoint&& o) noexcept {
    std::swap(c_, o.c_);
    return *this;
  }
  spora_checkpoint_t* get() const noexcept { return c_; }

  std::vector<CheckpointEntry> entries() const {
    size_t n = 0;
    check(spora_checkpoint_count(c_, &n));
    std::vector<CheckpointEntry> out;
    for (size_t i = 0; i < n; ++i) {
      const char* name = nullptr;
      CheckpointEntry e;
      int64_t dims[SPORA_MAX_NDIM];
      int32_t nd = 0;
      check(spora_checkpoint_entry(c_, i, &name, &e.dtype, dims, SPORA_MAX_NDIM, &nd));
      e.name = name;
      e.shape.assign(dims, dims + nd);
      out.push_back(std::move(e));
    }
    return out;
  }
  std::string metadata_json() const {
    const char* s = nullptr;
    check(spora_checkpoint_metadata(c_, &s));
    return s;
  }
  Tensor read(const std::string& name, Device device) const {
    spora_tensor_t* t = nullptr;
    check(spora_checkpoint_read(c_, name.c_str(), device.get(), &t));
    return Tensor(t);
  }

 private:
  spora_checkpoint_t* c_ = nullptr;
};

// A loaded model file: run it with the graph's inputs only.
class Model {
 public:
  Model(const std::string& path, Device device) { check(spora_model_load(path.c_str(), device.get(), &m_)); }
  ~Model() { spora_model_free(m_); }
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;
  Model(Model&& o) noexcept : m_(std::exchange(o.m_, nullptr)) {}
  Model& operator=(Model&& o) noexcept {
    std::swap(m_, o.m_);
    return *this;
  }
  spora_model_t* get() const noexcept { return m_; }

  // `weights` bind the graph's weight nodes in creation order.
  static void save(const std::string& path, const Graph& graph, std::initializer_list<const Tensor*> weights) {
    std::vector<spora_tensor_t*> w;
    for (const Tensor* t : weights) w.push_back(t ? t->get() : nullptr);
    check(spora_model_save(path.c_str(), graph.get(), w.data(), w.size()));
  }

  size_t num_inputs() const {
    size_t n = 0;
    check(spora_model_num_inputs(m_, &n));
    return n;
  }
  size_t num_outputs() const {
    size_t n = 0;
    check(spora_model_num_outputs(m_, &n));
    return n;
  }
  std::string input_name(size_t i) const {
    const char* s = nullptr;
    check(spora_model_input_name(m_, i, &s));
    return s;
  }
  std::pair<spora_dtype_t, std::vector<int64_t>> input_type(size_t i) const {
    spora_dtype_t d = SPORA_DTYPE_INVALID;
    int64_t dims[SPORA_MAX_NDIM];
    int32_t nd = 0;
    check(spora_model_input_type(m_, i, &d, dims, SPORA_MAX_NDIM, &nd));
    return {d, std::vector<int64_t>(dims, dims + nd)};
  }
  std::vector<Tensor> run(std::initializer_list<const Tensor*> inputs) {
    std::vector<spora_tensor_t*> in;
    for (const Tensor* t : inputs) in.push_back(t ? t->get() : nullptr);
    std::vector<spora_tensor_t*> out(num_outputs(), nullptr);
    check(spora_model_run(m_, in.data(), in.size(), out.data(), out.size()));
    std::vector<Tensor> result;
    for (auto* t : out) result.emplace_back(t);
    return result;
  }
  // The stored graph; borrowed from the model.
  const spora_graph_t* graph() const {
    const spora_graph_t* g = nullptr;
    check(spora_model_graph(m_, &g));
    return g;
  }

 private:
  spora_model_t* m_ = nullptr;
};

// A communicator over a collective backend ("mpi"): every rank of the job
// makes the same calls in the same order (see spora_comm_* in spora.h).
class Communicator {
 public:
  // rank/size < 0: from the launcher's environment.
  Communicator(Context& ctx, const char* backend, int32_t rank = -1, int32_t size = -1) {
    check(spora_comm_create(ctx.get(), backend, rank, size, &c_));
  }
  // For the process training on `device` (a device-memory backend such as
  // "nccl" binds to it; see spora_comm_create_on_device).
  Communicator(Context& ctx, const char* backend, const Device& device, int32_t rank = -1, int32_t size = -1) {
    check(spora_comm_create_on_device(ctx.get(), backend, device.get(), rank, size, &c_));
  }
  ~Communicator() { spora_comm_free(c_); }
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;
  Communicator(Communicator&& o) noexcept : c_(std::exchange(o.c_, nullptr)) {}

  int32_t rank() const {
    int32_t r = 0;
    check(spora_comm_rank(c_, &r, nullptr));
    return r;
  }
  int32_t size() const {
    int32_t s = 0;
    check(spora_comm_rank(c_, nullptr, &s));
    return s;
  }
  int64_t id() const {
    int64_t i = 0;
    check(spora_comm_id(c_, &i));
    return i;
  }
  void set_timeout(int64_t ms) { check(spora_comm_set_timeout(c_, ms)); }
  void abort() { check(spora_comm_abort(c_)); }
  void all_reduce(const Tensor& in, Tensor& out, spora_reduce_op_t op = SPORA_REDUCE_SUM) {
    check(spora_comm_all_reduce(c_, in.get(), out.get(), op));
  }
  void all_gather(const Tensor& in, Tensor& out) { check(spora_comm_all_gather(c_, in.get(), out.get())); }
  void broadcast(Tensor& t, int32_t root) { check(spora_comm_broadcast(c_, t.get(), root)); }
  void barrier() { check(spora_comm_barrier(c_)); }
  spora_communicator_t* get() const noexcept { return c_; }

 private:
  spora_communicator_t* c_ = nullptr;
};

// -- Data pipeline (spora_dataset_*) ---------------------------------------
// Datasets and transforms are immutable and shared: copies share the handle.

// A built-in per-sample transform (see spora_transform_create).
class Transform {
 public:
  explicit Transform(const char* name, const Attrs* attrs = nullptr) {
    spora_transform_t* t = nullptr;
    check(spora_transform_create(name, attrs ? attrs->get() : nullptr, &t));
    t_.reset(t, [](spora_transform_t* p) { spora_transform_free(p); });
  }
  spora_transform_t* get() const noexcept { return t_.get(); }

 private:
  std::shared_ptr<spora_transform_t> t_;
};

// One epoch of a dataset; next() fills one tensor per column.
class DatasetIterator {
 public:
  DatasetIterator(spora_dataset_iter_t* it, size_t num_columns) : it_(it), n_(num_columns) {}
  ~DatasetIterator() { spora_dataset_iter_free(it_); }
  DatasetIterator(const DatasetIterator&) = delete;
  DatasetIterator& operator=(const DatasetIterator&) = delete;
  DatasetIterator(DatasetIterator&& o) noexcept : it_(std::exchange(o.it_, nullptr)), n_(o.n_) {}

  // How many batches the device queue copies ahead to a device of its own
  // memory (spora_dataset_iter_set_device_queue; default 1, 0 = off).
  // Before the first next().
  DatasetIterator& device_queue(int32_t depth) {
    check(spora_dataset_iter_set_device_queue(it_, depth));
    return *this;
  }

  // False at the end of the epoch (row is then left empty).
  bool next(std::vector<Tensor>& row) {
    std::vector<spora_tensor_t*> out(n_, nullptr);
    int32_t has = 0;
    check(spora_dataset_iter_next(it_, out.data(), out.size(), &has));
    row.clear();
    if (!has) return false;
    for (spora_tensor_t* t : out) row.emplace_back(t);
    return true;
  }

 private:
  spora_dataset_iter_t* it_ = nullptr;
  size_t n_ = 0;
};

// A device queue for batches one's own pipeline makes (spora_device_queue_*):
// push batch k+1 before running the step on batch k, then pop() batch k+1
// for the next step; device work enqueued after pop() waits for that
// batch's copies, the host does not. On a device that shares host memory
// (cpu) there is nothing to copy ahead: enabled() is false and push/pop
// throw. One thread at a time.
class DeviceQueue {
 public:
  // One column of a batch on the host: read before push() returns.
  struct Column {
    spora_dtype_t dtype;
    std::vector<int64_t> shape;
    const void* data;
    size_t bytes;
    template <class T>
    static Column of(const std::vector<int64_t>& shape, const std::vector<T>& data) {
      return {dtype_of<T>::value, shape, data.data(), data.size() * sizeof(T)};
    }
  };

  explicit DeviceQueue(Device device) { check(spora_device_queue_create(device.get(), &q_)); }
  ~DeviceQueue() { spora_device_queue_free(q_); }
  DeviceQueue(const DeviceQueue&) = delete;
  DeviceQueue& operator=(const DeviceQueue&) = delete;
  DeviceQueue(DeviceQueue&& o) noexcept : q_(std::exchange(o.q_, nullptr)), widths_(std::move(o.widths_)) {}

  bool enabled() const noexcept { return q_ != nullptr; }

  // Enqueues one batch's host->device copies and returns without waiting.
  void push(const std::vector<Column>& batch) {
    if (!q_)
      throw Error(SPORA_ERROR_INVALID_ARGUMENT,
                  "[device_queue] push: the device shares host memory (enabled() is false)");
    std::vector<spora_dtype_t> dtypes;
    std::vector<const int64_t*> shapes;
    std::vector<int32_t> ndims;
    std::vector<const void*> data;
    std::vector<size_t> bytes;
    for (const Column& c : batch) {
      dtypes.push_back(c.dtype);
      shapes.push_back(c.shape.data());
      ndims.push_back(static_cast<int32_t>(c.shape.size()));
      data.push_back(c.data);
      bytes.push_back(c.bytes);
    }
    check(spora_device_queue_push(q_, dtypes.data(), shapes.data(), ndims.data(), data.data(), bytes.data(),
                                  batch.size()));
    widths_.push_back(batch.size());
  }

  // The oldest pushed batch, one tensor per column on the device.
  std::vector<Tensor> pop() {
    if (!q_)
      throw Error(SPORA_ERROR_INVALID_ARGUMENT,
                  "[device_queue] pop: the device shares host memory (enabled() is false)");
    if (widths_.empty()) throw Error(SPORA_ERROR_INVALID_ARGUMENT, "[device_queue] pop: no batch was pushed");
    std::vector<spora_tensor_t*> out(widths_.front(), nullptr);
    size_t n = 0;
    check(spora_device_queue_pop(q_, out.data(), out.size(), &n));
    widths_.erase(widths_.begin());
    std::vector<Tensor> row;
    for (size_t i = 0; i < n; ++i) row.emplace_back(out[i]);
    return row;
  }

  // Batches pushed and not popped yet.
  size_t pending() const {
    size_t n = 0;
    if (q_) check(spora_device_queue_pending(q_, &n));
    return n;
  }

 private:
  spora_device_queue_t* q_ = nullptr;
  std::vector<size_t> widths_;  // columns of each batch pushed and not popped, oldest first
};

class Dataset {
 public:
  // Columns from IDX files (plain or gzip); `dtypes` empty keeps the files' types.
  static Dataset from_idx(const std::vector<std::string>& paths, const std::vector<std::string>& names,
                          const std::vector<spora_dtype_t>& dtypes = {}) {
    std::vector<const char*> p, n;
    for (const auto& s : paths) p.push_back(s.c_str());
    for (const auto& s : names) n.push_back(s.c_str());
    if (n.size() != p.size())
      throw Error(SPORA_ERROR_INVALID_ARGUMENT, "[Dataset::from_idx] paths and names differ in count");
    spora_dataset_t* d = nullptr;
    check(spora_dataset_from_idx(p.data(), n.data(), dtypes.empty() ? nullptr : dtypes.data(), p.size(), &d));
    return Dataset(d);
  }
  // Columns copied from tensors with a common first (sample) dimension.
  static Dataset from_tensors(const std::vector<const Tensor*>& columns, const std::vector<std::string>& names) {
    std::vector<spora_tensor_t*> t;
    std::vector<const char*> n;
    for (const Tensor* c : columns) t.push_back(c ? c->get() : nullptr);
    for (const auto& s : names) n.push_back(s.c_str());
    if (n.size() != t.size())
      throw Error(SPORA_ERROR_INVALID_ARGUMENT, "[Dataset::from_tensors] columns and names differ in count");
    spora_dataset_t* d = nullptr;
    check(spora_dataset_from_tensors(t.data(), n.data(), t.size(), &d));
    return Dataset(d);
  }
  Dataset sampler(bool shuffle, uint64_t seed, int64_t num_shards = 1, int64_t shard_id = 0) const {
    return make([&](spora_dataset_t** out) {
      return spora_dataset_sampler(get(), shuffle ? 1 : 0, seed, num_shards, shard_id, out);
    });
  }
  Dataset shuffle(int64_t buffer_size, uint64_t seed) const {
    return make([&](spora_dataset_t** out) { return spora_dataset_shuffle(get(), buffer_size, seed, out); });
  }
  Dataset map(const std::vector<Transform>& ops, const std::vector<std::string>& columns, int32_t num_workers = 1,
              uint64_t seed = 0) const {
    std::vector<spora_transform_t*> o;
    std::vector<const char*> c;
    for (const auto& t : ops) o.push_back(t.get());
    for (const auto& s : columns) c.push_back(s.c_str());
    return make([&](spora_dataset_t** out) {
      return spora_dataset_map(get(), o.data(), o.size(), c.data(), c.size(), num_workers, seed, out);
    });
  }
  Dataset batch(int64_t batch_size, bool drop_remainder = false) const {
    return make([&](spora_dataset_t** out) { return spora_dataset_batch(get(), batch_size, drop_remainder ? 1 : 0, out); });
  }
  Dataset repeat(int64_t count) const {
    return make([&](spora_dataset_t** out) { return spora_dataset_repeat(get(), count, out); });
  }

  int64_t size() const {
    int64_t n = 0;
    check(spora_dataset_size(get(), &n));
    return n;
  }
  std::vector<std::string> column_names() const {
    size_t n = 0;
    check(spora_dataset_num_columns(get(), &n));
    std::vector<std::string> out;
    for (size_t i = 0; i < n; ++i) {
      const char* s = nullptr;
      check(spora_dataset_column_name(get(), i, &s));
      out.emplace_back(s);
    }
    return out;
  }
  DatasetIterator iterate(Device device, uint64_t epoch = 0, int32_t prefetch = 2) const {
    spora_dataset_iter_t* it = nullptr;
    check(spora_dataset_iter_create(get(), device.get(), epoch, prefetch, &it));
    return DatasetIterator(it, column_names().size());
  }
  spora_dataset_t* get() const noexcept { return d_.get(); }

 private:
  explicit Dataset(spora_dataset_t* d) : d_(d, [](spora_dataset_t* p) { spora_dataset_free(p); }) {}
  template <class F>
  static Dataset make(F&& f) {
    spora_dataset_t* d = nullptr;
    check(f(&d));
    return Dataset(d);
  }
  std::shared_ptr<spora_dataset_t> d_;
};

}  // namespace spora

#endif  // SPORA_SPORA_HPP
