#include "cases.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>

namespace spora::conformance {
namespace fs = std::filesystem;

namespace {

// ---- 16-bit floats: round to nearest even, like numpy ----

// float64 -> float16 rounded once, to nearest even, as numpy's astype from
// float64 does (through float32 it would round twice).
uint16_t f64_to_f16(double v) {
  const uint16_t sign = std::signbit(v) ? 0x8000u : 0u;
  if (std::isnan(v)) return static_cast<uint16_t>(sign | 0x7E00u);
  const double a = std::fabs(v);
  // The largest half is 65504; from halfway to the next binade up, infinity.
  if (a >= 65520.0) return static_cast<uint16_t>(sign | 0x7C00u);
  // Below 2^-14: a subnormal half in units of 2^-24 (1024 of them is the
  // smallest normal, whose encoding is the same number).
  if (a < 0x1p-14) return static_cast<uint16_t>(sign | static_cast<uint32_t>(std::nearbyint(a * 0x1p24)));
  int e = 0;
  const double f = std::frexp(a, &e);  // a = f * 2^e, f in [0.5, 1), e in [-13, 16]
  double m = std::nearbyint(std::ldexp(f, 11));  // 11 significant bits: [1024, 2048]
  if (m == 2048.0) {
    m = 1024.0;
    ++e;
  }
  return static_cast<uint16_t>(sign | (static_cast<uint32_t>(e + 14) << 10) | (static_cast<uint32_t>(m) - 1024u));
}

float f16_to_f32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t e = (h >> 10) & 0x1Fu, m = h & 0x3FFu;
  uint32_t x;
  if (e == 0) {
    const float v = std::ldexp(static_cast<float>(m), -24);
    std::memcpy(&x, &v, 4);
    x |= sign;
  } else if (e == 31) {
    x = sign | 0x7F800000u | (m << 13);
  } else {
    x = sign | ((e + 112u) << 23) | (m << 13);
  }
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

uint16_t f32_to_bf16(float f) {
  if (std::isnan(f)) return 0x7FC0u;
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return static_cast<uint16_t>((b + 0x7FFFu + ((b >> 16) & 1u)) >> 16);
}

float bf16_to_f32(uint16_t h) {
  const uint32_t b = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}

const char* const kDtypeNames[] = {"invalid", "f32", "f64", "f16", "bf16", "i32", "i64", "u8", "bool"};

size_t dtype_bytes(spora_dtype_t d) {
  switch (d) {
    case SPORA_DTYPE_F64:
    case SPORA_DTYPE_I64: return 8;
    case SPORA_DTYPE_F32:
    case SPORA_DTYPE_I32: return 4;
    case SPORA_DTYPE_F16:
    case SPORA_DTYPE_BF16: return 2;
    case SPORA_DTYPE_U8:
    case SPORA_DTYPE_BOOL: return 1;
    default: return 0;
  }
}

int64_t numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

// Element i of a float tensor as a double.
double element(const HostTensor& t, size_t i) {
  const unsigned char* p = t.bytes.data() + i * dtype_bytes(t.dtype);
  switch (t.dtype) {
    case SPORA_DTYPE_F32: { float v; std::memcpy(&v, p, 4); return v; }
    case SPORA_DTYPE_F64: { double v; std::memcpy(&v, p, 8); return v; }
    case SPORA_DTYPE_F16: { uint16_t v; std::memcpy(&v, p, 2); return f16_to_f32(v); }
    case SPORA_DTYPE_BF16: { uint16_t v; std::memcpy(&v, p, 2); return bf16_to_f32(v); }
    default: return 0;
  }
}

// Element i of an integer or bool tensor, exactly (an i64 through a double
// would lose its low bits beyond 2^53 and hide a difference there).
int64_t element_int(const HostTensor& t, size_t i) {
  const unsigned char* p = t.bytes.data() + i * dtype_bytes(t.dtype);
  switch (t.dtype) {
    case SPORA_DTYPE_I32: { int32_t v; std::memcpy(&v, p, 4); return v; }
    case SPORA_DTYPE_I64: { int64_t v; std::memcpy(&v, p, 8); return v; }
    case SPORA_DTYPE_U8: return *p;
    case SPORA_DTYPE_BOOL: return *p != 0;
    default: return 0;
  }
}

// Stores value `v` as dtype `d` the way numpy's astype does for the case's
// inputs: floats round to nearest (bf16 through f32, as the harness does),
// integer types truncate toward zero and wrap, bool is v != 0. The caller
// keeps `v` within int64 for integer types; rounding at the edge saturates.
void store(spora_dtype_t d, double v, unsigned char* p) {
  const auto to_int64 = [](double x) -> int64_t {
    if (!(x > -0x1p63)) return std::isnan(x) ? 0 : INT64_MIN;
    return x < 0x1p63 ? static_cast<int64_t>(x) : INT64_MAX;
  };
  switch (d) {
    case SPORA_DTYPE_F32: { const float f = static_cast<float>(v); std::memcpy(p, &f, 4); break; }
    case SPORA_DTYPE_F64: std::memcpy(p, &v, 8); break;
    case SPORA_DTYPE_F16: { const uint16_t h = f64_to_f16(v); std::memcpy(p, &h, 2); break; }
    case SPORA_DTYPE_BF16: { const uint16_t h = f32_to_bf16(static_cast<float>(v)); std::memcpy(p, &h, 2); break; }
    case SPORA_DTYPE_I32: { const auto i = static_cast<int32_t>(static_cast<uint32_t>(to_int64(v))); std::memcpy(p, &i, 4); break; }
    case SPORA_DTYPE_I64: { const auto i = to_int64(v); std::memcpy(p, &i, 8); break; }
    case SPORA_DTYPE_U8: *p = static_cast<unsigned char>(static_cast<uint64_t>(to_int64(v)) & 0xFFu); break;
    case SPORA_DTYPE_BOOL: *p = v != 0 ? 1 : 0; break;
    default: break;
  }
}

// Stores integer `v` (int:, bool and arange inputs, which the harness makes
// as int64 arrays) as dtype `d`: exactly into i64, never through a double,
// so i64 inputs beyond 2^53 keep their low bits (a kernel that reads i64
// through a double must fail); f32 and bf16 round once from the integer.
void store_int(spora_dtype_t d, int64_t v, unsigned char* p) {
  switch (d) {
    case SPORA_DTYPE_F32: { const float f = static_cast<float>(v); std::memcpy(p, &f, 4); break; }
    case SPORA_DTYPE_F64: { const double f = static_cast<double>(v); std::memcpy(p, &f, 8); break; }
    case SPORA_DTYPE_F16: { const uint16_t h = f64_to_f16(static_cast<double>(v)); std::memcpy(p, &h, 2); break; }
    case SPORA_DTYPE_BF16: { const uint16_t h = f32_to_bf16(static_cast<float>(v)); std::memcpy(p, &h, 2); break; }
    case SPORA_DTYPE_I32: { const auto i = static_cast<int32_t>(static_cast<uint32_t>(v)); std::memcpy(p, &i, 4); break; }
    case SPORA_DTYPE_I64: std::memcpy(p, &v, 8); break;
    case SPORA_DTYPE_U8: *p = static_cast<unsigned char>(static_cast<uint64_t>(v) & 0xFFu); break;
    case SPORA_DTYPE_BOOL: *p = v != 0 ? 1 : 0; break;
    default: break;
  }
}

std::string where(const std::string& file, size_t index) { return file + ": case " + std::to_string(index); }

std::vector<int64_t> shape_of(const nlohmann::json& j, const std::string& ctx) {
  if (!j.is_array()) throw std::runtime_error(ctx + ": \"shape\" must be an array of sizes");
  std::vector<int64_t> s;
  for (const auto& d : j) {
    if (!d.is_number_integer() || d.get<int64_t>() < 0 || d.get<int64_t>() > (int64_t{1} << 31))
      throw std::runtime_error(ctx + ": \"shape\" holds " + d.dump() + ", not a size in [0, 2^31]");
    s.push_back(d.get<int64_t>());
  }
  if (s.size() > SPORA_MAX_NDIM) throw std::runtime_error(ctx + ": rank above " + std::to_string(SPORA_MAX_NDIM));
  if (numel(s) > (int64_t{1} << 28)) throw std::runtime_error(ctx + ": more than 2^28 elements");
  return s;
}

}  // namespace

spora_dtype_t dtype_from_name(const std::string& name) {
  for (int i = 1; i <= 8; ++i)
    if (name == kDtypeNames[i]) return static_cast<spora_dtype_t>(i);
  return SPORA_DTYPE_INVALID;
}

bool is_float(spora_dtype_t d) {
  return d == SPORA_DTYPE_F32 || d == SPORA_DTYPE_F64 || d == SPORA_DTYPE_F16 || d == SPORA_DTYPE_BF16;
}

int64_t Case::elements() const {
  int64_t n = 0;
  for (const auto& in : inputs) n += numel(in.shape);
  return n;
}

std::vector<Case> load_cases(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) throw std::runtime_error("case directory " + dir + " does not exist");
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.path().extension() == ".json") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  if (files.empty()) throw std::runtime_error("case directory " + dir + " holds no *.json case files");
  std::vector<Case> out;
  for (const auto& path : files) {
    const std::string file = path.string();
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    const nlohmann::json family = nlohmann::json::parse(text.str(), nullptr, false);
    if (family.is_discarded()) throw std::runtime_error(file + ": not valid JSON");
    if (!family.is_object() || !family.contains("cases") || !family["cases"].is_array())
      throw std::runtime_error(file + ": expected an object with a \"cases\" array");
    const std::string stem = path.stem().string();
    size_t index = 0;
    for (const auto& c : family["cases"]) {
      const std::string ctx = where(file, index);
      if (!c.is_object() || !c.contains("op") || !c["op"].is_string())
        throw std::runtime_error(ctx + ": needs \"op\" (a string)");
      if (!c.contains("inputs") || !c["inputs"].is_array()) throw std::runtime_error(ctx + ": needs \"inputs\" (an array)");
      Case base;
      base.family = stem;
      base.op = c["op"].get<std::string>();
      for (const auto& spec : c["inputs"]) {
        if (!spec.is_object() || !spec.contains("shape")) throw std::runtime_error(ctx + ": every input needs \"shape\"");
        InputSpec s;
        s.shape = shape_of(spec["shape"], ctx);
        if (spec.contains("init")) {
          if (!spec["init"].is_string()) throw std::runtime_error(ctx + ": \"init\" must be a string");
          s.init = spec["init"].get<std::string>();
        }
        if (spec.contains("dtype")) {
          if (!spec["dtype"].is_string() || dtype_from_name(spec["dtype"].get<std::string>()) == SPORA_DTYPE_INVALID)
            throw std::runtime_error(ctx + ": input \"dtype\" " + spec["dtype"].dump() + " is not a dtype name");
          s.dtype = spec["dtype"].get<std::string>();
        }
        base.inputs.push_back(std::move(s));
      }
      if (c.contains("attrs")) {
        if (!c["attrs"].is_object()) throw std::runtime_error(ctx + ": \"attrs\" must be an object");
        base.attrs = c["attrs"];
      }
      if (c.contains("outputs")) {
        if (!c["outputs"].is_number_integer() || c["outputs"].get<int>() < 1 || c["outputs"].get<int>() > 16)
          throw std::runtime_error(ctx + ": \"outputs\" must be an integer in [1, 16]");
        base.outputs = c["outputs"].get<int>();
      }
      if (c.contains("tol")) {
        if (!c["tol"].is_object()) throw std::runtime_error(ctx + ": \"tol\" must map dtype names to [rtol, atol]");
        for (const auto& [k, v] : c["tol"].items())
          if (!v.is_array() || v.size() != 2 || !v[0].is_number() || !v[1].is_number())
            throw std::runtime_error(ctx + ": \"tol\"." + k + " must be [rtol, atol]");
        base.tol = c["tol"];
      }
      if (c.contains("out_dtype")) {
        if (!c["out_dtype"].is_string()) throw std::runtime_error(ctx + ": \"out_dtype\" must be a dtype name");
        base.out_dtype = c["out_dtype"].get<std::string>();
      }
      std::vector<std::string> dtypes = {"f32"};
      if (c.contains("dtypes")) {
        if (!c["dtypes"].is_array()) throw std::runtime_error(ctx + ": \"dtypes\" must be an array of dtype names");
        dtypes.clear();
        for (const auto& d : c["dtypes"]) {
          if (!d.is_string() || dtype_from_name(d.get<std::string>()) == SPORA_DTYPE_INVALID)
            throw std::runtime_error(ctx + ": " + d.dump() + " is not a dtype name");
          dtypes.push_back(d.get<std::string>());
        }
      }
      for (const auto& dt : dtypes) {
        Case e = base;
        e.dtype = dt;
        e.id = stem + ":" + std::to_string(index) + ":" + e.op + ":" + dt;
        out.push_back(std::move(e));
      }
      ++index;
    }
  }
  return out;
}

// ---- generator ----

namespace {
uint64_t splitmix(uint64_t& x) {
  uint64_t z = (x += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
}  // namespace

Rng::Rng(uint64_t seed) {
  for (auto& s : s_) s = splitmix(seed);
}

uint64_t Rng::next() {
  const uint64_t result = rotl(s_[1] * 5, 7) * 9;
  const uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = rotl(s_[3], 45);
  return result;
}

double Rng::uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

double Rng::normal() {
  // Box-Muller gives two values per pair of uniforms; keep the second.
  if (has_spare_) {
    has_spare_ = false;
    return spare_;
  }
  const double u1 = 1.0 - uniform();  // (0, 1]
  const double u2 = uniform();
  const double r = std::sqrt(-2.0 * std::log(u1)), a = 6.283185307179586 * u2;
  spare_ = r * std::sin(a);
  has_spare_ = true;
  return r * std::cos(a);
}

uint64_t seed_of(const std::string& id) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : id) h = (h ^ c) * 1099511628211ull;
  return h;
}

std::vector<HostTensor> make_inputs(const Case& c, Rng& rng) {
  std::vector<HostTensor> out;
  for (size_t k = 0; k < c.inputs.size(); ++k) {
    const InputSpec& spec = c.inputs[k];
    const std::string dt_name = spec.dtype.empty() ? c.dtype : spec.dtype;
    const spora_dtype_t dt = dtype_from_name(dt_name);
    std::string init = spec.init.empty() ? (is_float(dt) ? "normal" : "int:0:10") : spec.init;
    // kind[:a:b]
    std::vector<std::string> parts;
    std::stringstream ss(init);
    std::string part;
    while (std::getline(ss, part, ':')) parts.push_back(part);
    const std::string& kind = parts.empty() ? init : parts[0];
    auto arg = [&](size_t i) {
      if (parts.size() <= i) throw std::runtime_error(c.id + ": init '" + init + "' needs " + kind + ":LO:HI");
      char* end = nullptr;
      const double v = std::strtod(parts[i].c_str(), &end);
      if (end == parts[i].c_str() || *end != '\0' || !std::isfinite(v))
        throw std::runtime_error(c.id + ": init '" + init + "' has a bad bound '" + parts[i] + "'");
      return v;
    };
    // int:LO:HI bounds are integers, parsed exactly (like the harness's int()).
    auto int_arg = [&](size_t i) {
      if (parts.size() <= i) throw std::runtime_error(c.id + ": init '" + init + "' needs int:LO:HI");
      char* end = nullptr;
      errno = 0;
      const long long v = std::strtoll(parts[i].c_str(), &end, 10);
      if (end == parts[i].c_str() || *end != '\0' || errno == ERANGE)
        throw std::runtime_error(c.id + ": init '" + init + "' has a bound '" + parts[i] + "' that is not an int64");
      return static_cast<int64_t>(v);
    };
    enum class Kind { kNormal, kPositive, kUniform, kInt, kBool, kArange };
    Kind gen;
    double lo = 0, hi = 0;
    int64_t ilo = 0, ihi = 0;
    if (kind == "normal") {
      gen = Kind::kNormal;
    } else if (kind == "positive") {
      gen = Kind::kPositive;
    } else if (kind == "uniform") {
      gen = Kind::kUniform;
      lo = arg(1);
      hi = arg(2);
      if (!(hi > lo)) throw std::runtime_error(c.id + ": init '" + init + "' has an empty range");
      // Truncating to an integer dtype is defined only within int64.
      if (!is_float(dt) && !(lo >= -0x1p63 && hi < 0x1p63))
        throw std::runtime_error(c.id + ": init '" + init + "' reaches outside int64 for a " + dt_name + " input");
    } else if (kind == "int") {
      gen = Kind::kInt;
      ilo = int_arg(1);
      ihi = int_arg(2);
      if (!(ihi > ilo)) throw std::runtime_error(c.id + ": init '" + init + "' has an empty range");
    } else if (kind == "bool") {
      gen = Kind::kBool;
    } else if (kind == "arange") {
      gen = Kind::kArange;
    } else {
      throw std::runtime_error(c.id + ": unknown init '" + init + "'");
    }
    // [ilo, ihi) has ihi - ilo values; unsigned arithmetic, since the span
    // of int64 bounds can exceed INT64_MAX.
    const uint64_t span = static_cast<uint64_t>(ihi) - static_cast<uint64_t>(ilo);
    HostTensor t;
    t.dtype = dt;
    t.shape = spec.shape;
    const int64_t n = numel(spec.shape);
    const size_t width = dtype_bytes(dt);
    t.bytes.assign(static_cast<size_t>(n) * width, 0);
    for (int64_t i = 0; i < n; ++i) {
      unsigned char* p = t.bytes.data() + static_cast<size_t>(i) * width;
      switch (gen) {
        case Kind::kNormal: store(dt, rng.normal(), p); break;
        case Kind::kPositive: store(dt, 0.1 + 2.9 * rng.uniform(), p); break;
        case Kind::kUniform: store(dt, lo + (hi - lo) * rng.uniform(), p); break;
        case Kind::kInt:
          store_int(dt, static_cast<int64_t>(static_cast<uint64_t>(ilo) + rng.next() % span), p);
          break;
        case Kind::kBool: store_int(dt, static_cast<int64_t>(rng.next() >> 63), p); break;
        case Kind::kArange: store_int(dt, i, p); break;
      }
    }
    out.push_back(std::move(t));
  }
  return out;
}

HostTensor normal_f64(const std::vector<int64_t>& shape, Rng& rng) {
  HostTensor t;
  t.dtype = SPORA_DTYPE_F64;
  t.shape = shape;
  const int64_t n = numel(shape);
  t.bytes.resize(static_cast<size_t>(n) * 8);
  for (int64_t i = 0; i < n; ++i) store(SPORA_DTYPE_F64, rng.normal(), t.bytes.data() + i * 8);
  return t;
}

void tolerance(const Case& c, spora_dtype_t out, double* rtol, double* atol) {
  // tests/backend: bool and integer outputs by their own dtype (exact);
  // float outputs by the case's out_dtype, else its dtype.
  const std::string name = !is_float(out) ? kDtypeNames[out] : !c.out_dtype.empty() ? c.out_dtype : c.dtype;
  if (c.tol.contains(name)) {
    *rtol = c.tol[name][0].get<double>();
    *atol = c.tol[name][1].get<double>();
    return;
  }
  static const std::map<std::string, std::pair<double, double>> kDefault = {
      {"f64", {1e-10, 1e-12}}, {"f32", {2e-5, 2e-6}}, {"f16", {2e-2, 2e-3}}, {"bf16", {3e-2, 2e-2}}};
  const auto it = kDefault.find(name);
  *rtol = it == kDefault.end() ? 0 : it->second.first;
  *atol = it == kDefault.end() ? 0 : it->second.second;
}

std::string compare(const HostTensor& got, const HostTensor& want, double rtol, double atol) {
  auto shape_str = [](const std::vector<int64_t>& s) {
    std::string r = "(";
    for (size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
    return r + (s.size() == 1 ? ",)" : ")");
  };
  if (got.dtype != want.dtype)
    return std::string("dtype ") + kDtypeNames[got.dtype] + ", cpu gives " + kDtypeNames[want.dtype];
  if (got.shape != want.shape) return "shape " + shape_str(got.shape) + ", cpu gives " + shape_str(want.shape);
  const size_t n = static_cast<size_t>(numel(got.shape));
  if (got.bytes.size() != n * dtype_bytes(got.dtype) || want.bytes.size() != got.bytes.size())
    return "size mismatch reading the outputs";
  char buf[256];
  if (!is_float(got.dtype)) {
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < n; ++i) {
      if (element_int(got, i) != element_int(want, i)) {
        if (!bad) first = i;
        ++bad;
      }
    }
    if (!bad) return "";
    std::snprintf(buf, sizeof buf, "%zu of %zu elements differ; first at flat index %zu: got %lld, cpu %lld", bad, n,
                  first, static_cast<long long>(element_int(got, first)), static_cast<long long>(element_int(want, first)));
    return buf;
  }
  const bool exact = rtol == 0 && atol == 0;
  size_t bad = 0, first = 0;
  double worst = 0;
  for (size_t i = 0; i < n; ++i) {
    const double g = element(got, i), w = element(want, i);
    bool ok;
    if (exact) ok = g == w || (std::isnan(g) && std::isnan(w));
    else if (std::isnan(g) || std::isnan(w)) ok = std::isnan(g) && std::isnan(w);
    else if (std::isinf(g) || std::isinf(w)) ok = g == w;
    else ok = std::fabs(g - w) <= atol + rtol * std::fabs(w);
    if (!ok) {
      if (!bad) first = i;
      ++bad;
      if (std::isfinite(g) && std::isfinite(w)) worst = std::max(worst, std::fabs(g - w));
    }
  }
  if (!bad) return "";
  const bool f64 = got.dtype == SPORA_DTYPE_F64;
  std::snprintf(buf, sizeof buf, f64 ? "%zu of %zu elements differ; first at flat index %zu: got %.17g, cpu %.17g"
                                     : "%zu of %zu elements differ; first at flat index %zu: got %.9g, cpu %.9g",
                bad, n, first, element(got, first), element(want, first));
  std::string msg = buf;
  if (!exact) {
    std::snprintf(buf, sizeof buf, " (max abs diff %.3g, rtol %g, atol %g)", worst, rtol, atol);
    msg += buf;
  }
  return msg;
}

}  // namespace spora::conformance
