#include "kernels.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>

namespace spora::conformance {

spora::Tensor upload(const HostTensor& h, const spora::Device& d) {
  spora_tensor_t* t = nullptr;
  spora::check(spora_tensor_create(d.get(), h.dtype, h.shape.data(), static_cast<int32_t>(h.shape.size()),
                                   h.bytes.data(), h.bytes.size(), &t));
  return spora::Tensor(t);
}

HostTensor download(const spora::Tensor& t) {
  HostTensor h;
  h.dtype = t.dtype();
  h.shape = t.shape();
  size_t n = 0;
  spora::check(spora_tensor_nbytes(t.get(), &n));
  h.bytes.resize(n);
  spora::check(spora_tensor_read(t.get(), h.bytes.data(), n));
  return h;
}

OwnedAttrs to_attrs(const nlohmann::json& attrs, const std::string& where) {
  spora_attrs_t* raw = nullptr;
  spora::check(spora_attrs_create(&raw));
  OwnedAttrs a(raw);
  for (const auto& [name, v] : attrs.items()) {
    const char* n = name.c_str();
    if (v.is_boolean()) {
      spora::check(spora_attrs_set_bool(raw, n, v.get<bool>() ? 1 : 0));
    } else if (v.is_number_integer()) {
      spora::check(spora_attrs_set_int(raw, n, v.get<int64_t>()));
    } else if (v.is_number()) {
      spora::check(spora_attrs_set_float(raw, n, v.get<double>()));
    } else if (v.is_string()) {
      spora::check(spora_attrs_set_string(raw, n, v.get<std::string>().c_str()));
    } else if (v.is_array()) {
      // Like the Python binding: a list with any float is floats, else ints.
      bool any_float = false;
      for (const auto& x : v) {
        if (!x.is_number()) throw std::runtime_error(where + ": attribute " + name + " holds " + x.dump());
        any_float = any_float || x.is_number_float();
      }
      if (any_float) {
        std::vector<double> f;
        for (const auto& x : v) f.push_back(x.get<double>());
        spora::check(spora_attrs_set_floats(raw, n, f.data(), f.size()));
      } else {
        std::vector<int64_t> i;
        for (const auto& x : v) i.push_back(x.get<int64_t>());
        spora::check(spora_attrs_set_ints(raw, n, i.data(), i.size()));
      }
    } else {
      throw std::runtime_error(where + ": attribute " + name + " has an unsupported value " + v.dump());
    }
  }
  return a;
}

namespace {

struct Run {
  spora_status_t status = SPORA_OK;
  std::string error;
  std::vector<HostTensor> outputs;
};

// Runs a case's op eagerly on `d` and reads the outputs back.
Run run_on(const Case& c, const std::vector<HostTensor>& inputs, const spora::Device& d, const spora_attrs_t* attrs) {
  Run r;
  try {
    std::vector<spora::Tensor> owned;
    std::vector<spora_tensor_t*> in;
    for (const auto& h : inputs) {
      owned.push_back(upload(h, d));
      in.push_back(owned.back().get());
    }
    std::vector<spora_tensor_t*> out(static_cast<size_t>(c.outputs), nullptr);
    spora::check(spora_op_call(c.op.c_str(), d.get(), in.data(), in.size(), attrs, out.data(), out.size()));
    std::vector<spora::Tensor> outs;
    for (auto* t : out) outs.emplace_back(t);
    for (const auto& t : outs) r.outputs.push_back(download(t));
    d.synchronize();  // an error raised while the kernel ran
  } catch (const spora::Error& e) {
    r.status = e.status();
    r.error = e.what();
    r.outputs.clear();
  }
  return r;
}

// Judges the device's outputs against the reference's.
CaseResult judge(const Case& c, const Run& ref, const Run& dev, bool listed, bool has_list) {
  CaseResult res{c.id, c.op, c.dtype, false, Status::kPass, ""};
  if (ref.status != SPORA_OK) {
    res.status = Status::kSkip;
    res.detail = "the reference (cpu) failed: " + ref.error;
    return res;
  }
  if (dev.status == SPORA_ERROR_UNIMPLEMENTED) {
    res.status = Status::kUnsupported;
    res.detail = dev.error;
    return res;
  }
  if (dev.status != SPORA_OK) {
    res.status = Status::kFail;
    res.detail = dev.error;
    return res;
  }
  if (dev.outputs.size() != ref.outputs.size()) {
    res.status = Status::kFail;
    res.detail = std::to_string(dev.outputs.size()) + " outputs, cpu gives " + std::to_string(ref.outputs.size());
    return res;
  }
  for (size_t i = 0; i < dev.outputs.size(); ++i) {
    double rtol, atol;
    tolerance(c, ref.outputs[i].dtype, &rtol, &atol);
    const std::string diff = compare(dev.outputs[i], ref.outputs[i], rtol, atol);
    if (!diff.empty()) {
      res.status = Status::kFail;
      res.detail = "output " + std::to_string(i) + ": " + diff;
      return res;
    }
  }
  // It ran with fallback off but the plugin lists no kernel for it: the op
  // needed none (reshape, squeeze, ... are views).
  if (has_list && !listed) {
    res.status = Status::kNoKernel;
    res.detail = "ran without a plugin kernel (a view of its input)";
  }
  return res;
}

// Fallback off for the device's run, on for the reference's (they are the
// same device when the plugin checked is cpu itself).
void device_mode(const KernelTarget& t) { t.device.set_fallback(false); }
void reference_mode(const KernelTarget& t) { t.reference.set_fallback(true); }

CaseResult run_forward(const Case& c, const KernelTarget& t) {
  Rng rng(seed_of(c.id));
  const std::vector<HostTensor> inputs = make_inputs(c, rng);
  const OwnedAttrs attrs = to_attrs(c.attrs, c.id);
  // The device first: an op it has no kernel for needs no reference run (a
  // plugin with a few kernels is checked in seconds).
  device_mode(t);
  const Run dev = run_on(c, inputs, t.device, attrs.get());
  if (dev.status == SPORA_ERROR_UNIMPLEMENTED) return {c.id, c.op, c.dtype, false, Status::kUnsupported, dev.error};
  reference_mode(t);
  const Run ref = run_on(c, inputs, t.reference, attrs.get());
  return judge(c, ref, dev, t.kernel_ops.count(c.op) > 0, t.has_kernel_ops);
}

}  // namespace

std::vector<Case> gradient_cases(const std::vector<Case>& cases) {
  std::vector<Case> out;
  for (const Case& c : cases) {
    if (c.dtype != "f64") continue;
    bool small = true;
    for (const auto& in : c.inputs) {
      int64_t n = 1;
      for (int64_t d : in.shape) n *= d;
      small = small && n <= 4096;
    }
    int32_t has_rule = 0, differentiable = 0;
    if (!small || spora_op_gradient(c.op.c_str(), &has_rule, &differentiable) != SPORA_OK || !has_rule ||
        !differentiable)
      continue;
    out.push_back(c);
  }
  return out;
}

namespace {

// The value_and_grad graph of one case, and the f64 inputs it binds.
struct GradGraph {
  spora::Graph graph{"gradcheck"};
  std::vector<HostTensor> bound;
  size_t num_outputs = 0;
};

spora_value_t add_op(spora::Graph& g, const char* op, const std::vector<spora_value_t>& in) {
  spora_value_t out[16];
  size_t n = 0;
  spora::check(spora_graph_add_op(g.get(), op, in.data(), in.size(), nullptr, nullptr, 0, out, 16, &n));
  return out[0];
}

// Returns false when the case has no f64 input or output to differentiate.
bool build_gradient(const Case& c, const spora::Device& host, GradGraph* out) {
  Rng rng(seed_of(c.id + "/gradient"));
  const std::vector<HostTensor> inputs = make_inputs(c, rng);
  spora::Graph g(c.op.c_str());
  std::vector<spora_value_t> args, wrt;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i].dtype == SPORA_DTYPE_F64) {
      wrt.push_back(g.input(("x" + std::to_string(i)).c_str(), SPORA_DTYPE_F64, inputs[i].shape));
      args.push_back(wrt.back());
      out->bound.push_back(inputs[i]);
    } else {
      args.push_back(g.constant(upload(inputs[i], host)));
    }
  }
  const OwnedAttrs attrs = to_attrs(c.attrs, c.id);
  spora_value_t ys[16];
  size_t ny = 0;
  spora::check(spora_graph_add_op(g.get(), c.op.c_str(), args.data(), args.size(), attrs.get(), nullptr, 0, ys, 16, &ny));
  // L = sum_j sum(y_j * r_j) over the f64 outputs, r_j random.
  spora_value_t loss = -1;
  for (size_t j = 0; j < ny; ++j) {
    spora_dtype_t dt;
    int64_t dims[SPORA_MAX_NDIM];
    int32_t nd = 0;
    spora::check(spora_graph_value_type(g.get(), ys[j], &dt, dims, SPORA_MAX_NDIM, &nd));
    if (dt != SPORA_DTYPE_F64) continue;
    const HostTensor r = normal_f64(std::vector<int64_t>(dims, dims + nd), rng);
    const spora_value_t term = add_op(g, "sum", {add_op(g, "mul", {ys[j], g.constant(upload(r, host))})});
    loss = loss < 0 ? term : add_op(g, "add", {loss, term});
  }
  if (loss < 0 || wrt.empty()) return false;
  g.set_outputs({loss});
  out->graph = g.grad(wrt);
  out->num_outputs = 1 + wrt.size();
  return true;
}

Run run_graph(const GradGraph& gg, const spora::Device& d) {
  Run r;
  try {
    spora::Executable exe = gg.graph.compile(d);
    std::vector<spora::Tensor> owned;
    std::vector<spora_tensor_t*> in;
    for (const auto& h : gg.bound) {
      owned.push_back(upload(h, d));
      in.push_back(owned.back().get());
    }
    std::vector<spora_tensor_t*> out(gg.num_outputs, nullptr);
    spora::check(spora_executable_run(exe.get(), in.data(), in.size(), out.data(), out.size()));
    std::vector<spora::Tensor> outs;
    for (auto* t : out) outs.emplace_back(t);
    for (const auto& t : outs) r.outputs.push_back(download(t));
    d.synchronize();
  } catch (const spora::Error& e) {
    r.status = e.status();
    r.error = e.what();
    r.outputs.clear();
  }
  return r;
}

CaseResult run_gradient(const Case& c, const KernelTarget& t) {
  CaseResult res{c.id, c.op, c.dtype, true, Status::kPass, ""};
  GradGraph gg;
  if (!build_gradient(c, t.reference, &gg)) {
    res.status = Status::kSkip;
    res.detail = "no f64 input or output to differentiate";
    return res;
  }
  device_mode(t);
  const Run dev = run_graph(gg, t.device);
  if (dev.status == SPORA_ERROR_UNIMPLEMENTED) {
    res.status = Status::kUnsupported;
    res.detail = dev.error;
    return res;
  }
  reference_mode(t);
  const Run ref = run_graph(gg, t.reference);
  if (ref.status != SPORA_OK) {
    res.status = Status::kSkip;
    res.detail = "the reference (cpu) failed: " + ref.error;
  } else if (dev.status != SPORA_OK) {
    res.status = Status::kFail;
    res.detail = dev.error;
  } else {
    for (size_t i = 0; i < dev.outputs.size() && res.status == Status::kPass; ++i) {
      // The loss and the gradients pass through reductions whose order
      // differs between devices: at least f64's default tolerance even where
      // the case asks the op itself to be exact (random ops).
      double rtol, atol;
      tolerance(c, SPORA_DTYPE_F64, &rtol, &atol);
      rtol = std::max(rtol, 1e-10);
      atol = std::max(atol, 1e-12);
      const std::string diff = compare(dev.outputs[i], ref.outputs[i], rtol, atol);
      if (!diff.empty()) {
        res.status = Status::kFail;
        res.detail = (i == 0 ? std::string("loss: ") : "gradient " + std::to_string(i - 1) + ": ") + diff;
      }
    }
  }
  return res;
}

}  // namespace

CaseResult run_item(const WorkItem& w, const KernelTarget& t) {
  try {
    return w.gradient ? run_gradient(w.c, t) : run_forward(w.c, t);
  } catch (const std::exception& e) {
    return {w.c.id, w.c.op, w.c.dtype, w.gradient, Status::kSkip, std::string("the case cannot run: ") + e.what()};
  }
}

}  // namespace spora::conformance
