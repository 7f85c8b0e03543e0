// spora/sdk/exact_math.h: accuracy of log, exp, erfc and sin/cos of 2 pi u
// against the C library over millions of arguments (the random ops'
// domains and beyond), measured in ulps of the double result; and its
// independence from FMA contraction (the same bits from builds with -mfma
// -ffp-contract=fast, which contract every a * b + c they can, by the
// host compiler and by clang++ where installed).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <spora/sdk/exact_math.h>
#include <spora/sdk/philox.h>

namespace {

namespace xm = spora::exact_math;
using spora::plugin::PhiloxStream;

// Distance in ulps between two finite doubles (or equal infinities).
double ulp_distance(double got, double want) {
  if (got == want) return 0;
  if (std::isnan(got) || std::isnan(want) || std::isinf(got) || std::isinf(want)) return 1e300;
  auto ordered = [](double d) {
    int64_t i;
    std::memcpy(&i, &d, 8);
    return i < 0 ? -(i & 0x7fffffffffffffffll) : i;
  };
  return std::fabs(static_cast<double>(ordered(got) - ordered(want)));
}

struct MaxErr {
  double ulps = 0, at = 0;
  int64_t over1 = 0, n = 0;
  void add(double got, double want, double x) {
    const double e = ulp_distance(got, want);
    ++n;
    if (e > 1) ++over1;
    if (e > ulps) {
      ulps = e;
      at = x;
    }
  }
};

// The uniforms of a Philox stream, as the random ops draw them.
std::vector<double> philox_uniforms(uint64_t seed, int64_t n, bool f64, bool open0) {
  std::vector<double> u;
  const PhiloxStream s(seed, 3);
  for (int64_t b = 0; static_cast<int64_t>(u.size()) < n; ++b) {
    const auto w = s.block(static_cast<uint64_t>(b));
    if (f64) {
      u.push_back(open0 ? spora::plugin::uniform53_open0(w.v[0], w.v[1]) : spora::plugin::uniform53(w.v[0], w.v[1]));
      u.push_back(open0 ? spora::plugin::uniform53_open0(w.v[2], w.v[3]) : spora::plugin::uniform53(w.v[2], w.v[3]));
    } else {
      for (int k = 0; k < 4; ++k) u.push_back(open0 ? spora::plugin::uniform24_open0(w.v[k]) : spora::plugin::uniform24(w.v[k]));
    }
  }
  return u;
}

TEST(GpuMathExact, LogWithinOneUlpOfLibm) {
  MaxErr e;
  // Box-Muller's u1 in (0, 1] on the 2^-24 and 2^-53 grids.
  for (bool f64 : {false, true})
    for (double u : philox_uniforms(11, 2000000, f64, true)) e.add(xm::log(u), std::log(u), u);
  // Every exponent (subnormals included), random mantissas.
  const PhiloxStream s(5, 0);
  for (int64_t b = 0; b < 1000000; ++b) {
    const auto w = s.block(static_cast<uint64_t>(b));
    const uint64_t bits = ((static_cast<uint64_t>(w.v[0]) << 32) | w.v[1]) & 0x7fefffffffffffffull;
    double x;
    std::memcpy(&x, &bits, 8);
    if (x > 0) e.add(xm::log(x), std::log(x), x);
  }
  // Around 1 (cancellation-free by construction) and sqrt(2) (the split).
  for (int k = -20000; k <= 20000; ++k) {
    const double a = 1 + k * 0x1p-52, b = 1.4142135623730951 + k * 0x1p-52;
    e.add(xm::log(a), std::log(a), a);
    e.add(xm::log(b), std::log(b), b);
  }
  std::printf("log: max %.0f ulp (at %.17g), %lld of %lld over 1 ulp\n", e.ulps, e.at,
              static_cast<long long>(e.over1), static_cast<long long>(e.n));
  EXPECT_LE(e.ulps, 1) << "at " << e.at;
  EXPECT_EQ(xm::log(1.0), 0.0);
  EXPECT_EQ(xm::log(0.0), -INFINITY);
  EXPECT_EQ(xm::log(INFINITY), INFINITY);
  EXPECT_TRUE(std::isnan(xm::log(-1.0)));
  EXPECT_TRUE(std::isnan(xm::log(NAN)));
}

TEST(GpuMathExact, ExpWithinOneUlpOfLibm) {
  MaxErr e;
  const PhiloxStream s(6, 0);
  for (int64_t b = 0; b < 1000000; ++b) {
    const auto w = s.block(static_cast<uint64_t>(b));
    // Uniform over the whole finite range, and small arguments.
    const double x = -745.0 + 1454.0 * spora::plugin::uniform53(w.v[0], w.v[1]);
    const double y = (spora::plugin::uniform53(w.v[2], w.v[3]) - 0.5) * 4;
    e.add(xm::exp(x), std::exp(x), x);
    e.add(xm::exp(y), std::exp(y), y);
  }
  std::printf("exp: max %.0f ulp (at %.17g), %lld of %lld over 1 ulp\n", e.ulps, e.at,
              static_cast<long long>(e.over1), static_cast<long long>(e.n));
  EXPECT_LE(e.ulps, 1) << "at " << e.at;
  EXPECT_EQ(xm::exp(0.0), 1.0);
  EXPECT_EQ(xm::exp(710.0), INFINITY);
  EXPECT_EQ(xm::exp(-800.0), 0.0);
  EXPECT_EQ(xm::exp(-745.0), std::exp(-745.0));  // the smallest subnormals
  EXPECT_TRUE(std::isnan(xm::exp(NAN)));
}

TEST(GpuMathExact, ErfcWithinOneUlpOfLongDoubleLibm) {
  // glibc's double erfc is itself several ulps off in places; its long
  // double one (64-bit significand) is the yardstick.
  MaxErr e, vs_double;
  const PhiloxStream s(7, 0);
  for (int64_t b = 0; b < 500000; ++b) {
    const auto w = s.block(static_cast<uint64_t>(b));
    // The whole range erfc is neither 2 nor 0 in, denser where the
    // truncated normal's CDF lives ([-8, 8] / sqrt(2) and the tails).
    const double x = -6.0 + 34.0 * spora::plugin::uniform53(w.v[0], w.v[1]);
    const double y = (spora::plugin::uniform53(w.v[2], w.v[3]) - 0.5) * 12;
    for (double v : {x, y}) {
      const double want = static_cast<double>(std::erfc(static_cast<long double>(v)));
      e.add(xm::erfc(v), want, v);
      vs_double.add(xm::erfc(v), std::erfc(v), v);
    }
  }
  std::printf("erfc: max %.0f ulp vs long double (at %.17g), %lld of %lld over 1 ulp; max %.0f ulp vs double erfc\n",
              e.ulps, e.at, static_cast<long long>(e.over1), static_cast<long long>(e.n), vs_double.ulps);
  EXPECT_LE(e.ulps, 1) << "at " << e.at;
  EXPECT_LE(vs_double.ulps, 8) << "at " << vs_double.at;
  for (double v : {-3.0, 3.0, 4.5, 0.0, -0.0, 1e-300, 26.5})
    EXPECT_LE(ulp_distance(xm::erfc(v), static_cast<double>(std::erfc(static_cast<long double>(v)))), 1) << v;
  EXPECT_EQ(xm::erfc(INFINITY), 0.0);
  EXPECT_EQ(xm::erfc(-INFINITY), 2.0);
  EXPECT_EQ(xm::erfc(30.0), 0.0);
  EXPECT_TRUE(std::isnan(xm::erfc(NAN)));
}

// sin and cos of 2 pi u in long double, reduced to an angle of at most
// pi/4 first (4u = q + v, v or 1 - v: exact in double, see below), so the
// reference keeps full relative precision near the zeros of sin and cos.
void sincos_2pi_ld(double u, double* s, double* c) {
  const long double kHalfPi = 1.570796326794896619231321691639751442L;
  const long double u4 = 4.0L * u;
  const int q = static_cast<int>(u4);
  const long double v = u4 - q;
  long double ss, cc;
  if (v > 0.5L) {
    ss = std::cos(kHalfPi * (1 - v));
    cc = std::sin(kHalfPi * (1 - v));
  } else {
    ss = std::sin(kHalfPi * v);
    cc = std::cos(kHalfPi * v);
  }
  const long double rs[] = {ss, cc, -ss, -cc}, rc[] = {cc, -ss, -cc, ss};
  *s = static_cast<double>(rs[q]);
  *c = static_cast<double>(rc[q]);
}

TEST(GpuMathExact, SinCos2PiWithinOneUlpOfLibm) {
  MaxErr es, ec;
  auto check = [&](double u) {
    double s, c, ws, wc;
    xm::sincos_2pi(u, &s, &c);
    sincos_2pi_ld(u, &ws, &wc);
    es.add(s, ws, u);
    ec.add(c, wc, u);
  };
  for (bool f64 : {false, true})
    for (double u : philox_uniforms(12, 2000000, f64, false)) check(u);
  // Next to every multiple of 1/8 (quadrant and octant edges).
  for (int j = 0; j < 8; ++j)
    for (int k = -2000; k <= 2000; ++k) {
      const double u = j / 8.0 + k * 0x1p-53;
      if (u >= 0 && u < 1) check(u);
    }
  std::printf("sin(2 pi u): max %.0f ulp (at %.17g), %lld over 1 ulp; cos: max %.0f ulp (at %.17g), %lld over 1 ulp; "
              "of %lld\n",
              es.ulps, es.at, static_cast<long long>(es.over1), ec.ulps, ec.at, static_cast<long long>(ec.over1),
              static_cast<long long>(es.n));
  EXPECT_LE(es.ulps, 1) << "at " << es.at;
  EXPECT_LE(ec.ulps, 1) << "at " << ec.at;
  // The reduction is exact: 4u - q and 1 - v lose no bits.
  for (double u : philox_uniforms(13, 100000, true, false)) {
    const double u4 = 4 * u, v = u4 - static_cast<int>(u4);
    EXPECT_EQ(static_cast<long double>(v), 4.0L * u - static_cast<int>(u4)) << u;
    if (v > 0.5) {
      EXPECT_EQ(static_cast<long double>(1 - v), 1.0L - v) << u;
    }
  }
  double s, c;
  xm::sincos_2pi(0.0, &s, &c);
  EXPECT_EQ(s, 0.0);
  EXPECT_FALSE(std::signbit(s));
  EXPECT_EQ(c, 1.0);
  xm::sincos_2pi(0.5, &s, &c);
  EXPECT_EQ(s, 0.0);
  EXPECT_FALSE(std::signbit(s));
  EXPECT_EQ(c, -1.0);
  xm::sincos_2pi(0.25, &s, &c);
  EXPECT_EQ(s, 1.0);
  EXPECT_EQ(c, 0.0);
}

// The arguments the contraction check evaluates, and their results' bits.
std::vector<double> contraction_args() {
  std::vector<double> a;
  for (double u : philox_uniforms(21, 4000, true, true)) {
    a.push_back(u);
    a.push_back((u - 0.5) * 60);
  }
  return a;
}

std::string results_of(const std::vector<double>& args) {
  std::ostringstream os;
  for (double x : args) {
    double s = 0, c = 0;
    if (x > 0 && x < 1) xm::sincos_2pi(x, &s, &c);
    for (double r : {xm::log(std::fabs(x)), xm::exp(x), xm::erfc(x), s, c}) {
      uint64_t b;
      std::memcpy(&b, &r, 8);
      os << std::hex << b << "\n";
    }
  }
  return os.str();
}

TEST(GpuMathExact, SameBitsWhenTheCompilerContractsToFma) {
#if defined(__x86_64__) && defined(SPORA_TEST_CXX)
  if (!__builtin_cpu_supports("fma")) GTEST_SKIP() << "this CPU has no FMA";
  const std::string dir = testing::TempDir() + "spora_exact_math_fma";
  ASSERT_EQ(std::system(("mkdir -p '" + dir + "'").c_str()), 0);
  const std::vector<double> args = contraction_args();
  {
    std::ofstream src(dir + "/prog.cpp");
    src << "#include <cmath>\n#include <initializer_list>\n#include <cstdio>\n#include <cstring>\n#include <cstdint>\n"
           "#include <spora/sdk/exact_math.h>\n"
           "namespace xm = spora::exact_math;\n"
           "int main() { double x; uint64_t b;\n"
           "  while (std::scanf(\"%la\", &x) == 1) { double s = 0, c = 0;\n"
           "    if (x > 0 && x < 1) xm::sincos_2pi(x, &s, &c);\n"
           "    for (double r : {xm::log(std::fabs(x)), xm::exp(x), xm::erfc(x), s, c}) {\n"
           "      std::memcpy(&b, &r, 8); std::printf(\"%llx\\n\", (unsigned long long)b); } } }\n";
    std::ofstream in(dir + "/args");
    for (double x : args) {
      char buf[64];
      std::snprintf(buf, sizeof buf, "%a\n", x);
      in << buf;
    }
  }
  // The build's compiler, and clang++ where it is installed (its
  // -ffp-contract=fast disregards `#pragma clang fp contract`).
  std::vector<std::string> compilers = {SPORA_TEST_CXX};
  if (std::system("command -v clang++ > /dev/null 2>&1") == 0) compilers.push_back("clang++");
  const std::string want = results_of(args);
  for (const std::string& cxx : compilers) {
    const std::string cmd = "'" + cxx + "' -std=c++17 -O2 -mfma -ffp-contract=fast -I'" + SPORA_TEST_SOURCE_DIR +
                            "/sdk/include' '" + dir + "/prog.cpp' -o '" + dir + "/prog' && '" + dir + "/prog' < '" +
                            dir + "/args' > '" + dir + "/out'";
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
    std::ifstream out(dir + "/out");
    std::stringstream got;
    got << out.rdbuf();
    EXPECT_EQ(got.str(), want) << cxx;
  }
  (void)std::system(("rm -rf '" + dir + "'").c_str());
#else
  GTEST_SKIP() << "x86-64 with the host compiler's path only";
#endif
}

}  // namespace
