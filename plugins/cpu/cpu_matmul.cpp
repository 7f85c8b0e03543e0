// oneDNN matmul for the cpu plugin: the primitive is created once at plan
// time and only executed at launch.
#include <oneapi/dnnl/dnnl.hpp>

#include <mutex>

#include "cpu_kernels.h"

namespace spora::cpu {
namespace {

using plugin::KernelPlan;
using plugin::Shape;

dnnl::engine& engine() {
  static dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  return eng;
}

// Dense row-major strides of `s`, optionally with the last two dims swapped
// (a transposed operand read in place).
dnnl::memory::desc md(const Shape& s, bool transposed) {
  dnnl::memory::dims dims(s.dims, s.dims + s.rank), strides(s.rank);
  int64_t st = 1;
  for (int i = s.rank - 1; i >= 0; --i) {
    strides[i] = st;
    st *= s.dims[i];
  }
  if (transposed) {
    // Logical dims of op(X) with the physical strides of X.
    std::swap(dims[s.rank - 1], dims[s.rank - 2]);
    std::swap(strides[s.rank - 1], strides[s.rank - 2]);
  }
  return dnnl::memory::desc(dims, dnnl::memory::data_type::f32, strides);
}

class OnednnMatmul final : public FastKernel {
 public:
  OnednnMatmul(const KernelPlan& p)
      : a_md_(md(p.in[0], p.transpose_a)),
        b_md_(md(p.in[1], p.transpose_b)),
        y_md_(md(p.out, false)),
        prim_(dnnl::matmul::primitive_desc(dnnl::matmul::desc(a_md_, b_md_, y_md_), engine())) {}

  void run(const void* const* in, void* const* out) override {
    dnnl::memory a(a_md_, engine(), const_cast<void*>(in[0]));
    dnnl::memory b(b_md_, engine(), const_cast<void*>(in[1]));
    dnnl::memory y(y_md_, engine(), out[0]);
    // oneDNN streams are cheap and not thread-safe to share: one per call.
    dnnl::stream s(engine());
    prim_.execute(s, {{DNNL_ARG_SRC, a}, {DNNL_ARG_WEIGHTS, b}, {DNNL_ARG_DST, y}});
    s.wait();
  }

 private:
  dnnl::memory::desc a_md_, b_md_, y_md_;
  dnnl::matmul prim_;
};

}  // namespace

std::unique_ptr<FastKernel> make_onednn_matmul(const KernelPlan& p, std::string* why) {
  if (p.dtype != SPORA_DTYPE_F32) {
    *why = "oneDNN has no f64 matmul";
    return nullptr;
  }
  // oneDNN 2.6.3's brgemm matmul crashes on some transposed-A layouts
  // (e.g. 784x128): read A transposed only through the reference kernel.
  if (p.transpose_a) {
    *why = "transposed A";
    return nullptr;
  }
  if (p.out.numel() == 0 || p.in[0].numel() == 0) {
    *why = "empty operand";
    return nullptr;
  }
  // oneDNN broadcasts batch dims of the weights only.
  for (int i = 0; i + 2 < p.out.rank; ++i) {
    if (p.in[0].dims[i] != p.out.dims[i]) {
      *why = "broadcast batch dims of A";
      return nullptr;
    }
  }
  try {
    return std::make_unique<OnednnMatmul>(p);
  } catch (const dnnl::error& e) {
    *why = std::string("oneDNN rejected it: ") + e.what();
    return nullptr;
  }
}

}  // namespace spora::cpu
