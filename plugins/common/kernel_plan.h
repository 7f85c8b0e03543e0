// Kernel planning shared by the in-tree plugins: a parsed kernel descriptor
// (KernelPlan), tables of implementations per op, and the reference kernels
// (kernels/*.cpp) every plugin can fall back to.
//
// The host has already inferred output shapes and normalised attributes
// (core/src/ops): binary inputs are padded to the output's rank, matmul
// operands to equal rank >= 2, reduction axes are sorted and non-negative
// with the output keeping reduced dims as 1, softmax's axis is
// non-negative, transpose's perm is explicit. Plans still re-check whatever
// memory safety depends on.
#pragma once
#include <spora/plugin.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "dtypes.h"

namespace spora::plugin {

// Operands per kernel: the host sends at most SPORA_MAX_OP_INPUTS (spora.h,
// which plugins do not include) and as many outputs.
constexpr int kMaxOperands = 64;

struct Shape {
  int32_t rank = 0;
  int64_t dims[SPORA_MAX_RANK] = {};
  int64_t numel() const {
    int64_t n = 1;
    for (int i = 0; i < rank; ++i) n *= dims[i];
    return n;
  }
  bool operator==(const Shape& o) const {
    if (rank != o.rank) return false;
    for (int i = 0; i < rank; ++i)
      if (dims[i] != o.dims[i]) return false;
    return true;
  }
  bool operator!=(const Shape& o) const { return !(*this == o); }
  std::string str() const;
};

struct TensorInfo {
  int32_t dtype = SPORA_DTYPE_INVALID;
  Shape shape;
  size_t bytes() const { return static_cast<size_t>(shape.numel()) * dtype_size(dtype); }
};

// A copy of one descriptor attribute.
struct Attr {
  std::string name;
  int32_t type = 0;  // spora_attr_type_t
  int64_t i = 0;
  double f = 0;
  std::vector<int64_t> ints;
  std::vector<double> floats;
  std::string s;
};

class AttrList {
 public:
  const Attr* find(const char* name) const;
  int64_t get_int(const char* name, int64_t fallback) const;
  double get_float(const char* name, double fallback) const;  // accepts int attributes too
  bool get_bool(const char* name, bool fallback) const;
  std::vector<int64_t> get_ints(const char* name) const;  // empty when absent
  std::string get_string(const char* name, const char* fallback) const;
  std::vector<Attr> items;
};

struct KernelPlan;
using RunFn = void (*)(const KernelPlan& plan, const void* const* inputs, void* const* outputs, void* workspace);

struct KernelPlan {
  std::string op;
  const char* impl = "";  // implementation name, for logs ("ref", "onednn")
  int32_t num_inputs = 0;
  int32_t num_outputs = 0;
  TensorInfo in[kMaxOperands];
  TensorInfo out[kMaxOperands];
  AttrList attrs;
  // Implementation-specific state made at plan time (parsed parameters,
  // library primitives), immutable afterwards.
  std::shared_ptr<void> state;
  RunFn run = nullptr;
  size_t workspace = 0;

  template <class T>
  const T& get() const {
    return *static_cast<const T*>(state.get());
  }
};

// Plans `plan` (operands and attributes already filled): sets run and state
// and returns NULL, or returns an error. SPORA_PLUGIN_UNIMPLEMENTED means
// "not this implementation"; the next one is tried and the message logged.
using PlanFn = spora_plugin_error_t* (*)(KernelPlan& plan);

struct KernelImpl {
  const char* op;
  const char* name;
  PlanFn plan;
};

// Implementations by op, in registration order (first that accepts wins).
class KernelTable {
 public:
  void add(const KernelImpl& impl);
  std::vector<const KernelImpl*> find(const std::string& op) const;
  // NUL-terminated list of the ops with at least one implementation; stable
  // storage, rebuilt only when implementations are added.
  const char* const* op_names() const;

 private:
  std::vector<KernelImpl> impls_;
  mutable std::vector<std::string> names_;
  mutable std::vector<const char*> name_ptrs_;
};

// The reference implementations (kernels/*.cpp). Families add themselves at
// load time through SPORA_REFERENCE_KERNELS.
KernelTable& reference_kernels();
int add_reference_kernels(void (*fn)(KernelTable&));
#define SPORA_REFERENCE_KERNELS(fn) \
  static const int spora_ref_kernels_##fn = ::spora::plugin::add_reference_kernels(fn)

// Names of the ops the reference kernels cover (NUL-terminated).
const char* const* reference_op_names();

// Parses `desc` into `out` (operands, attributes) without choosing an
// implementation.
spora_plugin_error_t* describe(const spora_kernel_desc_t* desc, KernelPlan* out);

// The implementations plan_kernel tries for `op`, in order: `preferred`'s
// (may be NULL), then the reference ones.
std::vector<const KernelImpl*> implementations(const std::string& op, const KernelTable* preferred);

// Plans `desc`: tries the implementations of `preferred` (may be NULL) in
// order, then the reference ones. `log`, when given, receives one line per
// rejected implementation.
spora_plugin_error_t* plan_kernel(const spora_kernel_desc_t* desc, KernelPlan* out,
                                  const KernelTable* preferred = nullptr, std::string* log = nullptr);

// Runs a planned kernel on host-addressable buffers, on the calling thread.
inline void run_plan(const KernelPlan& p, const void* const* in, void* const* out, void* workspace = nullptr) {
  p.run(p, in, out, workspace);
}

// Helpers for plan functions.
spora_plugin_error_t* invalid(const KernelPlan& p, const std::string& why);
spora_plugin_error_t* unsupported(const KernelPlan& p, const std::string& why);
// Checks operand counts (-1 = any); returns an error naming the op.
spora_plugin_error_t* expect_operands(const KernelPlan& p, int inputs, int outputs);
bool broadcastable(const Shape& in, const Shape& out);

}  // namespace spora::plugin
