// Part 3 of the kit, in the parent process through the public C API: every
// case on the plugin's device (fallback disabled: only its own kernels) and
// on the cpu reference, compared with the harness's tolerances.
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

// Forward cases: one CaseResult each.
void check_kernel_cases(const std::vector<Case>& cases, const KernelTarget& t, Report& report);

// Gradient cases: for each differentiable op's f64 case (small inputs), the
// value_and_grad graph of L = sum_j sum(y_j * r_j), compiled for the device
// and for cpu, fed the same inputs.
void check_gradient_cases(const std::vector<Case>& cases, const KernelTarget& t, Report& report);

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
