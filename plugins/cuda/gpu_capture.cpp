// Stream capture (plugin ABI 1.2) as CUDA (HIP) graphs: capture_begin makes
// a recording stream and starts a thread-local capture on it
// (cudaStreamCaptureModeThreadLocal: the capturing thread's unsafe calls --
// cudaMalloc, synchronizations -- break the capture, other threads are not
// affected); capture_end instantiates the graph; a replay is one
// cudaGraphLaunch. The recording stream is not registered with the
// allocator (gpu_alloc.h): nothing runs on it, so nothing needs ordering
// with it, and eager allocation keeps its one-stream fast path.
#include <string>

#include "error.h"
#include "gpu_api.h"
#include "gpu_state.h"
#include "gpu_trace.h"

namespace spora::gpu {
namespace {

using spora::plugin::guard;

spora_plugin_error_t* check(const std::string& what, cudaError_t e) {
  return e == cudaSuccess ? nullptr : runtime_error(what, e);
}

}  // namespace

Captured::~Captured() {
  if (exec) (void)cudaGraphExecDestroy(exec);  // a replay in flight finishes first (CUDA frees it later)
}

spora_plugin_error_t* capture_begin(int32_t device, spora_stream_t** out_stream) {
  return guard(kPluginName, [&]() -> spora_plugin_error_t* {
    if (!out_stream) return plugin_error(SPORA_PLUGIN_INVALID_ARGUMENT, "capture_begin: out_stream is NULL");
    State* state = nullptr;
    if (auto* err = get_state(&state)) return err;
    if (auto* err = use_device("capture_begin", device)) return err;
    auto s = std::make_shared<Stream>();
    s->device = device;
    if (auto* err = check("capture_begin: cudaStreamCreateWithFlags",
                          cudaStreamCreateWithFlags(&s->stream, cudaStreamNonBlocking)))
      return err;
    if (cudaError_t e = cudaStreamBeginCapture(s->stream, cudaStreamCaptureModeThreadLocal); e != cudaSuccess) {
      (void)cudaStreamDestroy(s->stream);
      return runtime_error("capture_begin: cudaStreamBeginCapture", e);
    }
    *out_stream = static_cast<spora_stream_t*>(state->streams.add(std::move(s)));
    return nullptr;
  });
}

spora_plugin_error_t* capture_end(spora_stream_t* stream, spora_captured_t** out) {
  return guard(kPluginName, [&]() -> spora_plugin_error_t* {
    if (out) *out = nullptr;
    State* state = nullptr;
    if (auto* err = get_state(&state)) return err;
    std::shared_ptr<Stream> s = state->streams.remove(stream);
    if (!s) return plugin_error(SPORA_PLUGIN_INVALID_ARGUMENT, "capture_end: unknown or ended recording stream");
    (void)cudaSetDevice(s->device);
    cudaGraph_t graph = nullptr;
    const cudaError_t ended = cudaStreamEndCapture(s->stream, &graph);
    (void)cudaStreamDestroy(s->stream);
    if (ended != cudaSuccess || !graph) {
      if (graph) (void)cudaGraphDestroy(graph);
      return runtime_error("capture_end: the capture broke (cudaStreamEndCapture)",
                           ended != cudaSuccess ? ended : cudaErrorInvalidValue);
    }
    auto c = std::make_shared<Captured>();
    c->device = s->device;
#if defined(SPORA_GPU_HIP)
    const cudaError_t made = hipGraphInstantiate(&c->exec, graph, nullptr, nullptr, 0);
#else
    const cudaError_t made = cudaGraphInstantiate(&c->exec, graph, 0);
#endif
    (void)cudaGraphDestroy(graph);
    if (made != cudaSuccess) {
      c->exec = nullptr;
      return runtime_error("capture_end: cudaGraphInstantiate", made);
    }
    if (!out) return plugin_error(SPORA_PLUGIN_INVALID_ARGUMENT, "capture_end: out is NULL");
    *out = static_cast<spora_captured_t*>(state->captured.add(std::move(c)));
    return nullptr;
  });
}

spora_plugin_error_t* captured_launch(spora_captured_t* captured, spora_stream_t* stream) {
  return guard(kPluginName, [&]() -> spora_plugin_error_t* {
    State* state = nullptr;
    if (auto* err = get_state(&state)) return err;
    std::shared_ptr<Captured> c = state->captured.find(captured);
    if (!c) return plugin_error(SPORA_PLUGIN_INVALID_ARGUMENT, "captured_launch: unknown or destroyed graph");
    std::shared_ptr<Stream> s;
    if (auto* err = get_stream("captured_launch", stream, &s)) return err;
    if (s->device != c->device)
      return plugin_error(SPORA_PLUGIN_INVALID_ARGUMENT, "captured_launch: graph of device " +
                                                             std::to_string(c->device) + ", stream of device " +
                                                             std::to_string(s->device));
    StreamTrace::Mark mark;
    if (s->trace) mark = s->trace->before(s->stream, StreamTrace::Kind::kKernel, "graph replay");
    const cudaError_t e = cudaGraphLaunch(c->exec, s->stream);
    if (s->trace) s->trace->after(mark, s->stream);
    return check("captured_launch: cudaGraphLaunch", e);
  });
}

spora_plugin_error_t* captured_destroy(spora_captured_t* captured) {
  return guard(kPluginName, [&]() -> spora_plugin_error_t* {
    State* state = nullptr;
    if (auto* err = get_state(&state)) return err;
    if (!state->captured.remove(captured))
      return plugin_error(SPORA_PLUGIN_INVALID_ARGUMENT, "captured_destroy: unknown or destroyed graph");
    return nullptr;
  });
}

}  // namespace spora::gpu
