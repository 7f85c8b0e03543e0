// cuBLASLt's C entry points, looked up with dlopen/dlsym, and the matmul
// descriptors built from LtArgs (math/blas_args.h). Header-only and free of
// CUDA's headers so that tests/gpu runs the same loader and descriptor code
// where libcublasLt loads (no GPU needed for either); the plugin's
// gpu_blas.cpp checks every number below against cublasLt.h. The C ABI
// passes enums as int and handles, descriptors and streams as pointers.
#pragma once
#include <dlfcn.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "lib_search.h"
#include "math/blas_args.h"

namespace spora::gpu::lt {

// cublasLt.h / cublas_api.h / library_types.h values.
constexpr int32_t kSuccess = 0;                                        // CUBLAS_STATUS_SUCCESS
constexpr int32_t kR32F = 0, kR64F = 1, kR16F = 2, kR16BF = 14;       // cudaDataType_t
constexpr int32_t kCompute32F = 68, kCompute32FFast16BF = 75, kCompute32FFastTF32 = 77, kCompute64F = 70;
constexpr int32_t kOpN = 0, kOpT = 1;                                  // cublasOperation_t
constexpr int32_t kDescTransA = 3, kDescTransB = 4, kDescEpilogue = 7, kDescBiasPointer = 8, kDescBiasDataType = 26;
constexpr int32_t kLayoutBatchCount = 5, kLayoutStridedBatchOffset = 6;
constexpr int32_t kPrefMaxWorkspaceBytes = 1, kPrefMinAlignA = 5, kPrefMinAlignB = 6, kPrefMinAlignC = 7,
                  kPrefMinAlignD = 8;
constexpr uint32_t kEpiDefault = 1, kEpiBias = 4, kEpiReluBias = 6, kEpiGeluBias = 36;  // cublasLtEpilogue_t

// cublasLtMatmulHeuristicResult_t (gpu_blas.cpp checks size and offsets).
struct HeuristicResult {
  uint64_t algo[8];  // cublasLtMatmulAlgo_t
  size_t workspace_size;
  int32_t state;
  float waves_count;
  int32_t reserved[4];
};

struct Api {
  size_t (*version)() = nullptr;
  int32_t (*create)(void** handle) = nullptr;
  int32_t (*destroy)(void* handle) = nullptr;
  int32_t (*desc_create)(void** desc, int32_t compute, int32_t scale) = nullptr;
  int32_t (*desc_destroy)(void* desc) = nullptr;
  int32_t (*desc_set)(void* desc, int32_t attr, const void* buf, size_t size) = nullptr;
  int32_t (*desc_get)(void* desc, int32_t attr, void* buf, size_t size, size_t* written) = nullptr;
  int32_t (*layout_create)(void** layout, int32_t type, uint64_t rows, uint64_t cols, int64_t ld) = nullptr;
  int32_t (*layout_destroy)(void* layout) = nullptr;
  int32_t (*layout_set)(void* layout, int32_t attr, const void* buf, size_t size) = nullptr;
  int32_t (*layout_get)(void* layout, int32_t attr, void* buf, size_t size, size_t* written) = nullptr;
  int32_t (*pref_create)(void** pref) = nullptr;
  int32_t (*pref_destroy)(void* pref) = nullptr;
  int32_t (*pref_set)(void* pref, int32_t attr, const void* buf, size_t size) = nullptr;
  int32_t (*heuristic)(void* handle, void* desc, void* a, void* b, void* c, void* d, void* pref, int requested,
                       HeuristicResult* results, int* returned) = nullptr;
  int32_t (*matmul)(void* handle, void* desc, const void* alpha, const void* a, void* adesc, const void* b,
                    void* bdesc, const void* beta, const void* c, void* cdesc, void* d, void* ddesc,
                    const void* algo, void* workspace, size_t workspace_size, void* stream) = nullptr;
};

// Opens `library` (libcublasLt.so.<major>) from the first of `dirs` that
// has it, else the system (lib_search.h), and resolves every entry point;
// returns "" or why not, *opened the file. The library stays loaded for
// the process.
inline std::string load(const std::string& library, const std::vector<std::string>& dirs, Api* out,
                        std::string* opened) {
  std::string why;
  void* h = spora::plugin::open_library(library, dirs, opened, &why);
  if (!h) return why;
  Api a;
  std::string missing;
  const auto sym = [&](auto& f, const char* name) {
    f = reinterpret_cast<std::decay_t<decltype(f)>>(dlsym(h, name));
    if (!f) missing += (missing.empty() ? "" : ", ") + std::string(name);
  };
  sym(a.version, "cublasLtGetVersion");
  sym(a.create, "cublasLtCreate");
  sym(a.destroy, "cublasLtDestroy");
  sym(a.desc_create, "cublasLtMatmulDescCreate");
  sym(a.desc_destroy, "cublasLtMatmulDescDestroy");
  sym(a.desc_set, "cublasLtMatmulDescSetAttribute");
  sym(a.desc_get, "cublasLtMatmulDescGetAttribute");
  sym(a.layout_create, "cublasLtMatrixLayoutCreate");
  sym(a.layout_destroy, "cublasLtMatrixLayoutDestroy");
  sym(a.layout_set, "cublasLtMatrixLayoutSetAttribute");
  sym(a.layout_get, "cublasLtMatrixLayoutGetAttribute");
  sym(a.pref_create, "cublasLtMatmulPreferenceCreate");
  sym(a.pref_destroy, "cublasLtMatmulPreferenceDestroy");
  sym(a.pref_set, "cublasLtMatmulPreferenceSetAttribute");
  sym(a.heuristic, "cublasLtMatmulAlgoGetHeuristic");
  sym(a.matmul, "cublasLtMatmul");
  if (!missing.empty()) {
    dlclose(h);
    return library + " lacks " + missing;
  }
  *out = a;
  return "";
}

inline int32_t data_type_of(int32_t dtype) {
  switch (dtype) {
    case SPORA_DTYPE_F64: return kR64F;
    case SPORA_DTYPE_F16: return kR16F;
    case SPORA_DTYPE_BF16: return kR16BF;
    default: return kR32F;
  }
}

inline int32_t compute_type_of(LtCompute c) {
  switch (c) {
    case LtCompute::k64F: return kCompute64F;
    case LtCompute::k32FFastTF32: return kCompute32FFastTF32;
    case LtCompute::k32FFast16BF: return kCompute32FFast16BF;
    default: return kCompute32F;
  }
}

// alpha and beta: double for f64, float otherwise (the f32 accumulation of
// the half types).
inline int32_t scale_type_of(int32_t dtype) { return dtype == SPORA_DTYPE_F64 ? kR64F : kR32F; }

inline uint32_t epilogue_of(LtEpilogue e) {
  switch (e) {
    case LtEpilogue::kBias: return kEpiBias;
    case LtEpilogue::kReluBias: return kEpiReluBias;
    case LtEpilogue::kGeluBias: return kEpiGeluBias;
    default: return kEpiDefault;
  }
}

// The matmul descriptor and the A, B, C (= D's layout), D layouts of one call.
struct Descs {
  void* desc = nullptr;
  void* a = nullptr;
  void* b = nullptr;
  void* c = nullptr;
  void* d = nullptr;
};

inline void destroy(const Api& api, Descs* x) {
  if (x->desc) api.desc_destroy(x->desc);
  for (void* l : {x->a, x->b, x->c, x->d})
    if (l) api.layout_destroy(l);
  *x = Descs{};
}

// Builds the descriptors of `x` (the bias pointer is set per launch);
// returns "" or the call that failed. On failure nothing is left allocated.
inline std::string build(const Api& api, const LtArgs& x, Descs* out) {
  Descs d;
  const auto fail = [&](const char* what) {
    destroy(api, &d);
    return std::string(what);
  };
  if (api.desc_create(&d.desc, compute_type_of(x.compute), scale_type_of(x.dtype)) != kSuccess)
    return fail("cublasLtMatmulDescCreate");
  const int32_t ta = x.trans_a ? kOpT : kOpN, tb = x.trans_b ? kOpT : kOpN, type = data_type_of(x.dtype);
  const uint32_t epi = epilogue_of(x.epilogue);
  if (api.desc_set(d.desc, kDescTransA, &ta, sizeof ta) != kSuccess ||
      api.desc_set(d.desc, kDescTransB, &tb, sizeof tb) != kSuccess ||
      api.desc_set(d.desc, kDescEpilogue, &epi, sizeof epi) != kSuccess)
    return fail("cublasLtMatmulDescSetAttribute(TRANSA/TRANSB/EPILOGUE)");
  if (x.epilogue != LtEpilogue::kDefault && api.desc_set(d.desc, kDescBiasDataType, &type, sizeof type) != kSuccess)
    return fail("cublasLtMatmulDescSetAttribute(BIAS_DATA_TYPE)");
  const LtLayout* layouts[4] = {&x.a, &x.b, &x.d, &x.d};
  void** made[4] = {&d.a, &d.b, &d.c, &d.d};
  const int32_t count = static_cast<int32_t>(x.batch);
  for (int i = 0; i < 4; ++i) {
    const LtLayout& l = *layouts[i];
    if (api.layout_create(made[i], type, static_cast<uint64_t>(l.rows), static_cast<uint64_t>(l.cols), l.ld) !=
        kSuccess)
      return fail("cublasLtMatrixLayoutCreate");
    if (x.batch != 1 && (api.layout_set(*made[i], kLayoutBatchCount, &count, sizeof count) != kSuccess ||
                         api.layout_set(*made[i], kLayoutStridedBatchOffset, &l.batch_stride,
                                        sizeof l.batch_stride) != kSuccess))
      return fail("cublasLtMatrixLayoutSetAttribute(BATCH_COUNT/STRIDED_BATCH_OFFSET)");
  }
  *out = d;
  return "";
}

}  // namespace spora::gpu::lt
