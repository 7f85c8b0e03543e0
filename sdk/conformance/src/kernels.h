// Part 3 of the kit, through the public C API (in a child process, see
// check.cpp): every case on the plugin's device (fallback disabled: only its
// own kernels) and on the cpu reference, compared with the harness's
// tolerances.
#pragma once

#include <spora/spora.hpp>

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "cases.h"
#include "report.h"

namespace spora::conformance {

struct KernelTarget {
  spora::Device device;     // the plugin's device 0
  spora::Device reference;  // cpu:0 (may be the same device when checking cpu)
  // The ops the plugin's kernel_ops() lists; an op outside it that runs
  // anyway needed no kernel (a view). Empty with has_kernel_ops false when
  // the plugin does not say.
  std::set<std::string> kernel_ops;
  bool has_kernel_ops = false;
};

// One case to run: its forward op, or (gradient) the value_and_grad graph
// of L = sum_j sum(y_j * r_j) over its f64 outputs, compiled for the device
// and for cpu and fed the same inputs.
struct WorkItem {
  Case c;
  bool gradient = false;
  // Quick mode: the candidates for one op x dtype share a group (smallest
  // non-empty first); the first the plugin supports is the one that counts.
  // -1: a case of its own.
  int64_t group = -1;
};

// Runs one item on the device (fallback off: only the plugin's kernels) and,
// unless the device has no kernel for it, on the reference; compares.
// Returns kSkip (with a reason) when the item cannot be judged, e.g. a
// gradient case with nothing to differentiate or a failing reference.
CaseResult run_item(const WorkItem& w, const KernelTarget& t);

// The cases the gradient check uses (tests/backend/test_gradcheck.py's
// selection): f64, every input at most 4096 elements, differentiable op.
std::vector<Case> gradient_cases(const std::vector<Case>& cases);

// RAII for a spora_tensor_t created from host bytes / read back to host.
spora::Tensor upload(const HostTensor& h, const spora::Device& d);
HostTensor download(const spora::Tensor& t);
// spora_attrs_t from a case's JSON attributes (throws for unsupported values).
struct AttrsDeleter {
  void operator()(spora_attrs_t* a) const { spora_attrs_free(a); }
};
using OwnedAttrs = std::unique_ptr<spora_attrs_t, AttrsDeleter>;
OwnedAttrs to_attrs(const nlohmann::json& attrs, const std::string& where);

}  // namespace spora::conformance
