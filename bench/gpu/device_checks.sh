#!/usr/bin/env bash
# The GPU machine's checks in one pass, run from an unpacked spora-gpu
# archive (../shared/gpu/pack.sh packs bench/ with it):
#
#   ../shared/gpu/pack.sh build .gpu tests/python/device_parity \
#       plugin-api/include/spora/ops_elementwise.def plugin-api/include/spora/ops_elementwise.h
#   # on the device machine, with $OUT the folder whose files come back (at most 8):
#   tar xJf .gpu/spora-gpu.tar.xz -C /tmp && /tmp/spora-gpu/bench/gpu/device_checks.sh
#
# Writes devices.log, check_full.log, check_own.log, main_cuda.log,
# capture.log, bench_gpu.log, bench_extra.log and bench_more.log under $OUT: the certification of the cuda
# plugin (and of its own conv/pool/batch-norm kernels, the ROCm ones), the
# main job and the device-parity tests, then the speed figures beside
# PyTorch. Correctness runs in parallel first; timings run alone after.
set -u
export PYTHONUNBUFFERED=1
S=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd); cd "$S" || exit 1
OUT=${OUT:-$S/out}; mkdir -p "$OUT"
[ -d extra/tests ] && cp -r extra/tests tests
# The Python binding includes the elementwise op table (plugin-api), which
# pack.sh does not put under include/.
cp extra/plugin-api/include/spora/ops_elementwise.* include/spora/ 2>/dev/null
t() { echo "== $* ($(date +%T))"; }
{ nvidia-smi --query-gpu=name,driver_version --format=csv; t devices; SPORA_LOG_LEVEL=info ./run.sh spora devices 2>&1 | head -30; tail -3 pybuild.log; } > "$OUT/devices.log" 2>&1
OWN=conv2d,conv2d_bias,conv2d_act,conv2d_add_act,conv2d_grad_input,conv2d_grad_weight,conv2d_transpose,max_pool2d,max_pool2d_grad,avg_pool2d,avg_pool2d_grad,adaptive_avg_pool2d,adaptive_avg_pool2d_grad,batch_norm,batch_norm_grad
( timeout 100 ./run.sh spora plugin check cuda --cases cases > "$OUT/check_full.log" 2>&1; echo "rc=$?" >> "$OUT/check_full.log" ) &
( SPORA_GPU_OWN_DNN=1 timeout 60 ./run.sh spora plugin check cuda --cases cases --quick --ops $OWN > "$OUT/check_own.log" 2>&1; echo "rc=$?" >> "$OUT/check_own.log" ) &
( SPORA_LOG_LEVEL=debug timeout 45 ./run.sh python3 examples/fashion_mnist.py --device cuda --epochs 1 --limit 12800 --data-dir data --out-dir /tmp/fm_cuda > "$OUT/main_cuda.log" 2> >(grep -iE "captur|error" | sort | uniq -c | head -40 > "$OUT/capture.log"); echo "rc=$?" >> "$OUT/main_cuda.log"
  [ -d tests/python/device_parity ] && SPORA_FASHION_MNIST="$S/data" timeout 40 ./run.sh python3 -m pytest -q -p no:cacheprovider tests/python/device_parity 2>&1 | tail -4 >> "$OUT/main_cuda.log" ) &
wait
{ t bench_gpu; timeout 110 ./run.sh python3 bench/gpu/bench_gpu.py --timeout 52 --steps 12; } > "$OUT/bench_gpu.log" 2>&1
{ t "training without CUDA graphs"; SPORA_GRAPH_CAPTURE=0 timeout 60 ./run.sh python3 bench/gpu/bench_gpu.py --only train --timeout 50 --steps 12 2>&1 | grep -E "train|peak"
  for m in "lenet5 b64" "transformer b32 bf16"; do t "recordings: $m"
    SPORA_LOG_LEVEL=debug timeout 40 ./run.sh python3 bench/gpu/train_one.py cuda "$m" 1.0 6 2>&1 | grep -iE "captur|samples/s" | sort | uniq -c; done
  t eager latency; [ -f bench/eager_latency.py ] && timeout 30 ./run.sh python3 bench/eager_latency.py cuda 2>&1 | tail -12
  t bench_eager_latency; timeout 20 ./run.sh bench_eager_latency cuda 2>&1 | tail -8; } > "$OUT/bench_extra.log" 2>&1
{ t fusion; timeout 30 ./run.sh bench_fusion 16777216 "" cuda; t matmul; timeout 15 ./run.sh bench_gpu_matmul cuda high 2>&1 | tail -14; } > "$OUT/bench_more.log" 2>&1
echo done
