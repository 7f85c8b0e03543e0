// Results of a conformance run: named checks (ABI, runtime), op cases
// (kernels, gradients), the certification table and the JSON report.
#pragma once

#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace spora::conformance {

enum class Status {
  kPass,
  kFail,
  kWarn,            // works, but not as the contract recommends; does not fail certification
  kSkip,            // could not be checked here (said why)
  kNotImplemented,  // an optional function pointer is NULL
  kUnsupported,     // the plugin has no kernel for this op/dtype (or a gradient needs one)
  kNoKernel,        // the op ran without any kernel (views: reshape, squeeze, ...)
};
const char* status_name(Status s);
Status status_from_name(const std::string& s);  // kFail for unknown names

struct CheckResult {
  std::string part;  // "abi", "runtime", "kernels"
  std::string name;
  Status status = Status::kPass;
  std::string detail;
};

struct CaseResult {
  std::string id;  // "elementwise:3:add:f32"
  std::string op;
  std::string dtype;
  bool gradient = false;
  Status status = Status::kPass;
  std::string detail;
};

class Report {
 public:
  void add(const std::string& part, const std::string& name, Status status, const std::string& detail = "");
  void add(CheckResult r) { checks.push_back(std::move(r)); }
  void add_case(CaseResult r) { cases.push_back(std::move(r)); }

  // True when any check or case failed, or the run stopped early.
  bool failed() const;
  // Failures first (with details), then the table and a one-line summary.
  void print(std::FILE* out) const;
  nlohmann::json to_json() const;

  // What was checked.
  std::string target, plugin_name, plugin_kind, plugin_path, plugin_version, plugin_abi, device, reference;
  std::string cases_dir;
  // Why the run stopped before finishing (the target cannot be checked).
  std::string stopped;
  std::vector<CheckResult> checks;
  std::vector<CaseResult> cases;

 private:
  void print_checks(std::FILE* out) const;
  void print_table(std::FILE* out, bool gradient) const;
};

}  // namespace spora::conformance
