// Plumbing every oneDNN kernel of the cpu plugin shares: rejecting oneDNN's
// reference implementations, turning oneDNN's refusals into "not this
// implementation", and placing user-managed scratchpads in the kernel
// workspace (so concurrent launches of one plan share no memory).
#pragma once
#include <oneapi/dnnl/dnnl.hpp>

#include <string>
#include <unordered_map>

#include "cpu_kernels.h"

namespace spora::cpu {

// Workspace pieces start on cache lines.
inline size_t align_up(size_t n) { return (n + 63) / 64 * 64; }

// True for oneDNN implementations that are plain loops rather than jit code:
// "ref" ones and the "simple_*" ones (simple_nchw pooling took 2-7 ms where
// the jit kernel on a blocked layout takes ~0.1 ms, LeNet b64 on AVX2).
inline bool slow_impl(const std::string& name) {
  return name.find("ref") != std::string::npos || name.find("simple") != std::string::npos;
}

// The 4-D activation layouts a primitive that cannot pick its own (pooling,
// batch norm: format_tag::any is not accepted for their source) is tried
// in: plain NCHW first (no reorder), then oneDNN's channel-blocked layouts
// (nChw16c is what its AVX-512 jit kernels run on, nChw8c its AVX2 ones),
// then NHWC. The first one with a jit implementation wins.
inline const dnnl::memory::format_tag* activation_layouts(size_t* count) {
  using tag = dnnl::memory::format_tag;
  static const tag tags[] = {tag::nchw, tag::nChw16c, tag::nChw8c, tag::nhwc};
  *count = sizeof(tags) / sizeof(tags[0]);
  return tags;
}

// Name of a 4-D layout, for logs.
inline const char* layout_name(dnnl::memory::format_tag t) {
  using tag = dnnl::memory::format_tag;
  switch (t) {
    case tag::nchw: return "nchw";
    case tag::nChw16c: return "nChw16c";
    case tag::nChw8c: return "nChw8c";
    case tag::nhwc: return "nhwc";
    default: return "another layout";
  }
}

// Moves `pd` past implementations named "ref" (oneDNN 2.6.3's reference
// kernels are orders of magnitude slower than the own loops); false when only
// those remain. Their names are appended to `seen`.
template <class PD>
bool skip_ref(PD& pd, std::string* seen) {
  for (;;) {
    const std::string name = pd.impl_info_str();
    if (name.find("ref") == std::string::npos) return true;
    *seen += (seen->empty() ? "" : ", ") + name;
    if (!pd.next_impl()) return false;
  }
}

// Like skip_ref, for every implementation slow_impl names: false when only
// those remain (their names appended to `seen`).
template <class PD>
bool skip_slow(PD& pd, std::string* seen) {
  for (;;) {
    const std::string name = pd.impl_info_str();
    if (!slow_impl(name)) return true;
    *seen += (seen->empty() ? "" : ", ") + name;
    if (!pd.next_impl()) return false;
  }
}

// skip_ref as a plan result: NULL when a fast implementation remains, else
// UNIMPLEMENTED naming what oneDNN offered (`what` is appended, e.g. " for
// the epilogue"), so the plan falls back to the own or reference kernels.
template <class PD>
spora_plugin_error_t* reject_ref(const plugin::KernelPlan& p, PD& pd, const char* what = "") {
  std::string refs;
  if (skip_ref(pd, &refs)) return nullptr;
  return plugin::unsupported(p, "oneDNN offers only " + refs + what);
}

// Runs `build()` (makes the primitives, fills the plan, returns its error or
// NULL). oneDNN throws when it cannot do a problem; that becomes
// UNIMPLEMENTED, so the next implementation is tried.
template <class Build>
spora_plugin_error_t* plan_guarded(const plugin::KernelPlan& p, Build&& build) {
  try {
    return build();
  } catch (const dnnl::error& e) {
    return plugin::unsupported(p, std::string("oneDNN rejected it: ") + e.what());
  }
}

// Primitive attributes with a user-managed scratchpad and `po` post-ops.
inline dnnl::primitive_attr user_scratchpad_attr(const dnnl::post_ops& po = dnnl::post_ops()) {
  dnnl::primitive_attr attr;
  attr.set_post_ops(po);
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}

// A buffer a primitive needs (scratchpad, workspace, intermediate) placed in
// the kernel workspace.
struct WorkspaceSlot {
  dnnl::memory::desc desc;
  size_t offset = 0;

  // Places `d` at the end of the workspace so far (`ws` bytes), growing it.
  void place(size_t& ws, const dnnl::memory::desc& d) {
    desc = d;
    offset = ws;
    ws += align_up(d.get_size());
  }
  dnnl::memory memory(const dnnl::engine& eng, void* workspace) const {
    return dnnl::memory(desc, eng, static_cast<char*>(workspace) + offset);
  }
  // Adds the slot as argument `arg` when it has any bytes (an empty
  // scratchpad is not passed).
  void bind(std::unordered_map<int, dnnl::memory>& args, int arg, const dnnl::engine& eng, void* workspace) const {
    if (desc.get_size() > 0) args.emplace(arg, memory(eng, workspace));
  }
};

}  // namespace spora::cpu
