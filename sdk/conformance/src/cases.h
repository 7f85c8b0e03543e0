// The conformance cases (sdk/conformance/cases/*.json, installed to
// share/spora/conformance/cases) and their inputs.
//
// Case format (the differential harness's, tests/backend/harness.py):
//   {"op": "add", "dtypes": ["f32", "f64"], "inputs": [{"shape": [2, 3]}, ...],
//    "attrs": {...}, "outputs": 1, "tol": {"f32": [rtol, atol]}, "out_dtype": "f32"}
// Input fields: "shape"; "init" = normal (default for floats) | positive |
// uniform:LO:HI | int:LO:HI (default int:0:10 for the rest) | bool | arange;
// "dtype" = a fixed dtype for inputs that do not follow the case's dtype.
// "numpy" and "ref" concern only the numpy comparison of tests/backend.
// Inputs follow harness.py's make_input: int, bool and arange values are
// integers stored exactly (i64 beyond 2^53 too), floats round once.
#pragma once

#include <spora/spora.h>

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace spora::conformance {

struct InputSpec {
  std::vector<int64_t> shape;
  std::string init;   // "" = the default for its dtype
  std::string dtype;  // "" = the case's dtype
};

// One case expanded for one dtype.
struct Case {
  std::string id;  // "<family>:<index>:<op>:<dtype>", as tests/backend names it
  std::string family;
  std::string op;
  std::string dtype;
  std::vector<InputSpec> inputs;
  nlohmann::json attrs = nlohmann::json::object();
  int outputs = 1;
  nlohmann::json tol = nlohmann::json::object();
  std::string out_dtype;  // "" = dtype
  int64_t elements() const;  // total input elements
};

// Every case of every *.json in `dir` (sorted by file name), expanded per
// dtype. Throws std::runtime_error naming the file and case for malformed
// input.
std::vector<Case> load_cases(const std::string& dir);

// A tensor's contents on the host.
struct HostTensor {
  spora_dtype_t dtype = SPORA_DTYPE_INVALID;
  std::vector<int64_t> shape;
  std::vector<unsigned char> bytes;
};

// Deterministic generator (xoshiro256**), seeded per case.
class Rng {
 public:
  explicit Rng(uint64_t seed);
  uint64_t next();
  double uniform();  // [0, 1)
  double normal();   // standard normal (Box-Muller)
 private:
  uint64_t s_[4];
  double spare_ = 0;
  bool has_spare_ = false;
};

// The case's inputs, generated from one stream seeded by the case id, so
// that a case's inputs do not depend on which other cases run.
std::vector<HostTensor> make_inputs(const Case& c, Rng& rng);
uint64_t seed_of(const std::string& id);

spora_dtype_t dtype_from_name(const std::string& name);  // SPORA_DTYPE_INVALID if unknown
bool is_float(spora_dtype_t d);

// The harness's (rtol, atol) for output dtype `dt` of case `c`.
void tolerance(const Case& c, spora_dtype_t out, double* rtol, double* atol);

// "" when `got` matches `want` within (rtol, atol) like numpy's
// assert_allclose (equal NaNs match; integers and bools exactly), else what
// differs.
std::string compare(const HostTensor& got, const HostTensor& want, double rtol, double atol);

// Random standard-normal f64 values.
HostTensor normal_f64(const std::vector<int64_t>& shape, Rng& rng);

}  // namespace spora::conformance
