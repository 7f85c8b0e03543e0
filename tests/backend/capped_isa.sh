#!/bin/bash
# Runs the cpu plugin's oneDNN op cases (convolutions, pooling, matmul and
# linear, normalisations, softmax in f32 and bf16) against numpy with oneDNN
# capped at AVX2 (ONEDNN_MAX_CPU_ISA), so an AVX-512 machine also tests the
# kernels an AVX2 cpu gets (issue 19). oneDNN's verbose log shows which
# kernels ran: the test fails when an AVX-512 one ran (the cap was not
# honoured) or no AVX2 one did. Skipped (77) on a cpu without AVX2.
#   capped_isa.sh PYTHON CASES_DIR
set -u
py=$1 dir=$2
isa=AVX2
if ! grep -qw avx2 /proc/cpuinfo; then
  echo "this cpu has no AVX2: skipped"
  exit 77
fi
log=$(mktemp)
trap 'rm -f "$log"' EXIT
# -s: oneDNN writes its log to the process's stdout, which pytest would
# otherwise capture.
ONEDNN_MAX_CPU_ISA=$isa ONEDNN_VERBOSE=1 "$py" -m pytest -q -s -p no:cacheprovider "$dir/test_backend.py" \
  -k "test_cpu_matches_numpy and (conv2d or pool or matmul or linear or norm or softmax) and (f32 or bf16)" \
  >"$log" 2>&1
rc=$?
# pytest's progress dots and oneDNN's lines share the output: split them.
sed 's/onednn_verbose,.*//' "$log" | grep -v '^$' | tail -n 15
[ "$rc" -eq 0 ] || exit "$rc"
kernels=$(grep -o 'onednn_verbose,exec,.*' "$log" | cut -d, -f4,5 | sort -u)
if echo "$kernels" | grep -q avx512; then
  echo "FAIL: AVX-512 kernels ran under ONEDNN_MAX_CPU_ISA=$isa:"
  echo "$kernels" | grep avx512
  exit 1
fi
if ! echo "$kernels" | grep -q avx2; then
  echo "FAIL: no AVX2 kernel ran under ONEDNN_MAX_CPU_ISA=$isa"
  exit 1
fi
echo "oneDNN kernels that ran under ONEDNN_MAX_CPU_ISA=$isa:" $kernels
