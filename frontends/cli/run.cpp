// `spora run` and `spora bench`: load a model file (.spora, or .onnx
// imported on load), feed it, time it.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <string>
#include <sys/stat.h>
#include <vector>

#include <spora/spora.hpp>

#include "commands.h"
#include "model_io.h"

namespace spora::cli {
namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// Options both commands share; `extra` handles the command's own.
struct Common {
  std::string model;
  std::string device = "cpu";
  std::vector<std::string> plugin_paths;
};

bool parse_long(const char* s, long lo, long hi, long* out) {
  char* end = nullptr;
  errno = 0;
  const long v = std::strtol(s, &end, 10);
  if (end == s || *end || errno || v < lo || v > hi) return false;
  *out = v;
  return true;
}

void print_inputs(FILE* f, const std::vector<InputType>& ins) {
  std::fprintf(f, "the model takes %zu input(s):\n", ins.size());
  for (const auto& t : ins) std::fprintf(f, "  %s: %s\n", t.name.c_str(), type_str(t.dtype, t.shape).c_str());
}

void run_usage(FILE* f) {
  std::fprintf(f,
               "usage: spora run <model.spora | model.onnx> [options]\n"
               "\n"
               "Runs a model file once (or --repeat N times) and prints each output's\n"
               "dtype, shape and a summary, and the time per run.\n"
               "\n"
               "options:\n"
               "  --input NAME=FILE.npy   feed input NAME from a .npy file (repeatable);\n"
               "  --input FILE.npy        or feed inputs in order. Shapes may differ from the\n"
               "                          model's in the batch (any dims of the same rank the\n"
               "                          graph accepts); dtypes must match.\n"
               "  --device D              cpu (default), sim:0, ...\n"
               "  --output-dir DIR        write output i to DIR/output_<i>.npy\n"
               "  --repeat N              run N times (the first compiles); default 1\n"
               "  --plugin-path P         extra plugin directory\n"
               "Given no inputs it lists what the model takes and exits 2.\n");
}

void bench_usage(FILE* f) {
  std::fprintf(f,
               "usage: spora bench <model.spora | model.onnx> [options]\n"
               "\n"
               "Times runs of a model on generated inputs (values in [-1, 1); integer\n"
               "inputs 0): warm-up runs, then timed runs; prints min, median, p90 and\n"
               "samples/s. A tool for people: nothing is asserted.\n"
               "\n"
               "options:\n"
               "  --batch N        first dimension of every input of rank >= 1 (default:\n"
               "                   the model's)\n"
               "  --device D       cpu (default), sim:0, ...\n"
               "  --warmup N       untimed runs first (default 3)\n"
               "  --iters N        timed runs (default 20)\n"
               "  --plugin-path P  extra plugin directory\n");
}

// Summary of one output: dtype, shape, and for float types sum and the
// first few values.
void print_output(size_t i, const NpyArray& a) {
  std::printf("output %zu: %s", i, type_str(a.dtype, a.shape).c_str());
  size_t n = 1;
  for (int64_t d : a.shape) n *= static_cast<size_t>(d);
  double sum = 0;
  std::vector<double> first;
  for (size_t k = 0; k < n; ++k) {
    double v = 0;
    switch (a.dtype) {
      case SPORA_DTYPE_F32: { float x; std::memcpy(&x, &a.data[4 * k], 4); v = x; break; }
      case SPORA_DTYPE_F64: std::memcpy(&v, &a.data[8 * k], 8); break;
      case SPORA_DTYPE_I32: { int32_t x; std::memcpy(&x, &a.data[4 * k], 4); v = x; break; }
      case SPORA_DTYPE_I64: { int64_t x; std::memcpy(&x, &a.data[8 * k], 8); v = static_cast<double>(x); break; }
      case SPORA_DTYPE_U8:
      case SPORA_DTYPE_BOOL: v = a.data[k]; break;
      default: n = 0; break;  // f16/bf16: no summary
    }
    sum += v;
    if (first.size() < 4 && n) first.push_back(v);
  }
  if (n) {
    std::printf(" sum=%.6g first=[", sum);
    for (size_t k = 0; k < first.size(); ++k) std::printf(k ? ", %.6g" : "%.6g", first[k]);
    std::printf("%s]", n > first.size() ? ", ..." : "");
  }
  std::printf("\n");
}

}  // namespace

int run(int argc, char** argv) {
  Common c;
  std::vector<std::pair<std::string, std::string>> feeds;  // (name or "", file)
  std::string out_dir;
  long repeat = 1;
  for (int i = 0; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "spora run: %s needs a value\n", a.c_str());
        return nullptr;
      }
      return argv[++i];
    };
    if (a == "-h" || a == "--help") {
      run_usage(stdout);
      return 0;
    } else if (a == "--input") {
      const char* v = value();
      if (!v) return 2;
      const std::string s = v;
      const size_t eq = s.find('=');
      if (eq == std::string::npos) feeds.emplace_back("", s);
      else feeds.emplace_back(s.substr(0, eq), s.substr(eq + 1));
    } else if (a == "--device") {
      const char* v = value();
      if (!v) return 2;
      c.device = v;
    } else if (a == "--output-dir") {
      const char* v = value();
      if (!v) return 2;
      out_dir = v;
    } else if (a == "--repeat") {
      const char* v = value();
      if (!v) return 2;
      if (!parse_long(v, 1, 1000000, &repeat)) {
        std::fprintf(stderr, "spora run: --repeat '%s' is not a count in [1, 1000000]\n", v);
        return 2;
      }
    } else if (a == "--plugin-path") {
      const char* v = value();
      if (!v) return 2;
      c.plugin_paths.push_back(v);
    } else if (!a.empty() && a[0] == '-') {
      std::fprintf(stderr, "spora run: unknown option '%s'\n\n", a.c_str());
      run_usage(stderr);
      return 2;
    } else if (c.model.empty()) {
      c.model = a;
    } else {
      std::fprintf(stderr, "spora run: one model at a time ('%s' and '%s'); inputs go after --input\n",
                   c.model.c_str(), a.c_str());
      return 2;
    }
  }
  if (c.model.empty()) {
    run_usage(stderr);
    return 2;
  }
  if (!out_dir.empty()) {
    // Made when missing, as `mkdir -p` would (docs/cli.md's example names a
    // new directory); an existing non-directory is refused.
    std::error_code ec;
    std::filesystem::create_directories(out_dir, ec);
    struct stat st;
    if (stat(out_dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
      std::fprintf(stderr, "spora run: --output-dir %s is not a directory%s%s\n", out_dir.c_str(),
                   ec ? " and cannot be made: " : "", ec ? ec.message().c_str() : "");
      return 2;
    }
  }
  Context ctx;
  for (const auto& p : c.plugin_paths) ctx.add_plugin_path(p);
  Device dev = ctx.device(c.device);
  auto t0 = Clock::now();
  Model m(c.model, dev);
  const double load_ms = ms_since(t0);
  const auto ins = input_types(m);
  if (feeds.empty() && !ins.empty()) {
    std::fprintf(stderr, "spora run: %s: no inputs given\n", c.model.c_str());
    print_inputs(stderr, ins);
    return 2;
  }
  // Bind feeds to inputs: by name, or in order.
  std::vector<std::string> files(ins.size());
  size_t next = 0;
  for (const auto& [name, file] : feeds) {
    size_t k = ins.size();
    if (name.empty()) {
      k = next++;
    } else {
      for (size_t j = 0; j < ins.size(); ++j)
        if (ins[j].name == name) k = j;
      if (k == ins.size()) {
        std::fprintf(stderr, "spora run: %s has no input named '%s'\n", c.model.c_str(), name.c_str());
        print_inputs(stderr, ins);
        return 2;
      }
    }
    if (k >= ins.size()) {
      std::fprintf(stderr, "spora run: %s takes %zu input(s), got more .npy files\n", c.model.c_str(), ins.size());
      return 2;
    }
    if (!files[k].empty()) {
      std::fprintf(stderr, "spora run: input '%s' is given twice (%s and %s)\n", ins[k].name.c_str(),
                   files[k].c_str(), file.c_str());
      return 2;
    }
    files[k] = file;
  }
  std::vector<Tensor> inputs;
  for (size_t k = 0; k < ins.size(); ++k) {
    if (files[k].empty()) {
      std::fprintf(stderr, "spora run: input '%s' (%s) is not given\n", ins[k].name.c_str(),
                   type_str(ins[k].dtype, ins[k].shape).c_str());
      return 2;
    }
    NpyArray a = read_npy(files[k]);
    if (a.dtype != ins[k].dtype || a.shape.size() != ins[k].shape.size()) {
      std::fprintf(stderr, "spora run: %s: input '%s' must be %s (or another shape of that rank), the file holds %s\n",
                   files[k].c_str(), ins[k].name.c_str(), type_str(ins[k].dtype, ins[k].shape).c_str(),
                   type_str(a.dtype, a.shape).c_str());
      return 1;
    }
    inputs.push_back(to_tensor(dev, a));
  }
  std::vector<double> times;
  std::vector<Tensor> outs;
  for (long r = 0; r < repeat; ++r) {
    t0 = Clock::now();
    outs = run_model(m, inputs);
    check(spora_device_synchronize(dev.get()));
    times.push_back(ms_since(t0));
  }
  for (size_t i = 0; i < outs.size(); ++i) {
    NpyArray a = from_tensor(outs[i]);
    print_output(i, a);
    if (!out_dir.empty()) write_npy(out_dir + "/output_" + std::to_string(i) + ".npy", a);
  }
  std::printf("device %s; load %.3f ms; first run %.3f ms (compiles)", dev.name().c_str(), load_ms, times[0]);
  if (times.size() > 1) {
    std::vector<double> rest(times.begin() + 1, times.end());
    std::sort(rest.begin(), rest.end());
    std::printf("; %zu more: median %.3f ms, min %.3f ms", rest.size(), rest[rest.size() / 2], rest.front());
  }
  std::printf("\n");
  return 0;
}

int bench(int argc, char** argv) {
  Common c;
  long batch = -1, warmup = 3, iters = 20;
  for (int i = 0; i < argc; ++i) {
    const std::string a = argv[i];
    auto count = [&](long lo, long hi, long* out) -> bool {
      if (i + 1 >= argc || !parse_long(argv[i + 1], lo, hi, out)) {
        std::fprintf(stderr, "spora bench: %s needs a count in [%ld, %ld]\n", a.c_str(), lo, hi);
        return false;
      }
      ++i;
      return true;
    };
    if (a == "-h" || a == "--help") {
      bench_usage(stdout);
      return 0;
    } else if (a == "--batch") {
      if (!count(1, 1 << 24, &batch)) return 2;
    } else if (a == "--warmup") {
      if (!count(0, 1000000, &warmup)) return 2;
    } else if (a == "--iters") {
      if (!count(1, 1000000, &iters)) return 2;
    } else if (a == "--device" || a == "--plugin-path") {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "spora bench: %s needs a value\n", a.c_str());
        return 2;
      }
      if (a == "--device") c.device = argv[++i];
      else c.plugin_paths.push_back(argv[++i]);
    } else if (!a.empty() && a[0] == '-') {
      std::fprintf(stderr, "spora bench: unknown option '%s'\n\n", a.c_str());
      bench_usage(stderr);
      return 2;
    } else if (c.model.empty()) {
      c.model = a;
    } else {
      std::fprintf(stderr, "spora bench: one model at a time ('%s' and '%s')\n", c.model.c_str(), a.c_str());
      return 2;
    }
  }
  if (c.model.empty()) {
    bench_usage(stderr);
    return 2;
  }
  Context ctx;
  for (const auto& p : c.plugin_paths) ctx.add_plugin_path(p);
  Device dev = ctx.device(c.device);
  Model m(c.model, dev);
  std::vector<Tensor> inputs;
  int64_t samples = 1;
  uint32_t state = 12345;  // a fixed LCG: the same inputs every time
  for (const auto& t : input_types(m)) {
    NpyArray a;
    a.dtype = t.dtype;
    a.shape = t.shape;
    if (batch > 0 && !a.shape.empty()) a.shape[0] = batch;
    if (!a.shape.empty()) samples = a.shape[0];
    size_t n = 1;
    for (int64_t d : a.shape) n *= static_cast<size_t>(d);
    a.data.assign(n * spora_dtype_size(a.dtype), 0);
    for (size_t k = 0; k < n; ++k) {
      state = state * 1664525u + 1013904223u;
      const double u = (state >> 8) / double(1u << 24) * 2 - 1;
      if (a.dtype == SPORA_DTYPE_F32) {
        const float v = static_cast<float>(u);
        std::memcpy(&a.data[4 * k], &v, 4);
      } else if (a.dtype == SPORA_DTYPE_F64) {
        std::memcpy(&a.data[8 * k], &u, 8);
      }
    }
    inputs.push_back(to_tensor(dev, a));
    std::printf("input %s: %s\n", t.name.c_str(), type_str(a.dtype, a.shape).c_str());
  }
  auto t0 = Clock::now();
  run_model(m, inputs);
  check(spora_device_synchronize(dev.get()));
  std::printf("first run (plans for this shape): %.3f ms\n", ms_since(t0));
  for (long r = 0; r < warmup; ++r) run_model(m, inputs);
  check(spora_device_synchronize(dev.get()));
  std::vector<double> times;
  for (long r = 0; r < iters; ++r) {
    t0 = Clock::now();
    run_model(m, inputs);
    check(spora_device_synchronize(dev.get()));
    times.push_back(ms_since(t0));
  }
  std::sort(times.begin(), times.end());
  const double median = times[times.size() / 2];
  const double p90 = times[std::min(times.size() - 1, static_cast<size_t>(0.9 * static_cast<double>(times.size())))];
  std::printf("device %s, %ld warm-up + %ld timed runs: min %.3f ms, median %.3f ms, p90 %.3f ms, %.1f samples/s\n",
              dev.name().c_str(), warmup, iters, times.front(), median, p90, samples / (median / 1000.0));
  return 0;
}

}  // namespace spora::cli
