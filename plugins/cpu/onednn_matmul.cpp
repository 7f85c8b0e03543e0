// oneDNN matmul for the cpu plugin: the primitive is created once at plan
// time and only executed at launch.
#include "cpu_kernels.h"

namespace spora::cpu {
namespace {

using plugin::KernelPlan;
using plugin::Shape;

// Dense row-major strides of `s`, optionally with the last two dims swapped
// (a transposed operand read in place).
dnnl::memory::desc md(const Shape& s, dnnl::memory::data_type dt, bool transposed) {
  dnnl::memory::dims dims(s.dims, s.dims + s.rank), strides(s.rank);
  int64_t st = 1;
  for (int i = s.rank - 1; i >= 0; --i) {
    strides[i] = st;
    st *= s.dims[i];
  }
  if (transposed) {
    std::swap(dims[s.rank - 1], dims[s.rank - 2]);
    std::swap(strides[s.rank - 1], strides[s.rank - 2]);
  }
  return dnnl::memory::desc(dims, dt, strides);
}

struct State {
  dnnl::memory::desc a, b, y;
  dnnl::matmul prim;
};

void run(const KernelPlan& p, const void* const* in, void* const* out, void*) {
  const State& s = p.get<State>();
  auto& eng = onednn_engine();
  dnnl::memory a(s.a, eng, const_cast<void*>(in[0]));
  dnnl::memory b(s.b, eng, const_cast<void*>(in[1]));
  dnnl::memory y(s.y, eng, out[0]);
  dnnl::stream strm(eng);
  s.prim.execute(strm, {{DNNL_ARG_SRC, a}, {DNNL_ARG_WEIGHTS, b}, {DNNL_ARG_DST, y}});
  strm.wait();
}

spora_plugin_error_t* plan(KernelPlan& p) {
  if (p.num_inputs != 2 || p.num_outputs != 1) return plugin::invalid(p, "matmul takes 2 inputs");
  dnnl::memory::data_type dt;
  if (p.out[0].dtype == SPORA_DTYPE_F64 || !onednn_dtype(p.out[0].dtype, &dt) || p.out[0].dtype == SPORA_DTYPE_I32 ||
      p.out[0].dtype == SPORA_DTYPE_U8)
    return plugin::unsupported(p, std::string("oneDNN has no ") + plugin::dtype_name(p.out[0].dtype) + " matmul");
  const bool ta = p.attrs.get_bool("transpose_a", false), tb = p.attrs.get_bool("transpose_b", false);
  // oneDNN 2.6.3's brgemm matmul crashes on some transposed-A layouts
  // (e.g. 784x128): read A transposed only through the reference kernel.
  if (ta) return plugin::unsupported(p, "transposed A (oneDNN 2.6.3 brgemm bug)");
  const Shape &a = p.in[0].shape, &b = p.in[1].shape, &y = p.out[0].shape;
  if (y.rank < 2 || a.rank != y.rank || b.rank != y.rank) return plugin::invalid(p, "operands must have the output's rank");
  if (y.numel() == 0 || a.numel() == 0 || b.numel() == 0) return plugin::unsupported(p, "empty operand");
  for (int i = 0; i + 2 < y.rank; ++i)
    if (a.dims[i] != y.dims[i]) return plugin::unsupported(p, "broadcast batch dims of A");
  try {
    auto s = std::make_shared<State>();
    s->a = md(a, dt, false);
    s->b = md(b, dt, tb);
    s->y = md(y, dt, false);
    s->prim = dnnl::matmul(dnnl::matmul::primitive_desc(dnnl::matmul::desc(s->a, s->b, s->y), onednn_engine()));
    p.state = s;
    p.run = run;
    return nullptr;
  } catch (const dnnl::error& e) {
    return plugin::unsupported(p, std::string("oneDNN rejected it: ") + e.what());
  }
}

void register_kernels(plugin::KernelTable& t) { t.add({"matmul", "onednn", plan}); }
SPORA_CPU_KERNELS(register_kernels);

}  // namespace
}  // namespace spora::cpu
