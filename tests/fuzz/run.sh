#!/usr/bin/env bash
# Runs one fuzz target for SECONDS (0: each input of its corpus once, no
# fuzzing), building it first in the fuzz build directory:
#
#   tests/fuzz/run.sh onnx 1800            # half an hour on the ONNX importer
#   tests/fuzz/run.sh idx 0                # replay the IDX corpus
#   tests/fuzz/run.sh model 60 -jobs=2     # more libFuzzer flags after SECONDS
#
# Targets: checkpoint model onnx idx idx_gz npy graph_json graph_compile image.
# New inputs the fuzzer finds go to $BUILD/corpus/<target> (the committed
# seeds in tests/fuzz/corpus/<target> are read, never written); crashes to
# $BUILD/artifacts/<target>/. Environment: SPORA_FUZZ_BUILD (the build
# directory, default build-fuzz), SPORA_FUZZ_PLUGIN_DIR (where the sim
# device plugin is, default the normal build's build/lib/spora/plugins; the
# steps that need a device are skipped without one), CXX (default clang++).
set -euo pipefail
if [ $# -lt 2 ]; then
  echo "usage: $0 TARGET SECONDS [libFuzzer flags...]" >&2
  exit 2
fi
target=$1 seconds=$2
shift 2
src=$(cd "$(dirname "$0")/../.." && pwd)
build=${SPORA_FUZZ_BUILD:-$src/build-fuzz}
seeds=$src/tests/fuzz/corpus/$target
if [ ! -d "$seeds" ]; then
  echo "$0: no target '$target' (no $seeds)" >&2
  exit 2
fi
if [ ! -f "$build/build.ninja" ] && [ ! -f "$build/Makefile" ]; then
  gen=()
  command -v ninja >/dev/null && gen=(-G Ninja)
  cmake -S "$src" -B "$build" "${gen[@]}" -DSPORA_FUZZ=ON -DCMAKE_CXX_COMPILER="${CXX:-clang++}" \
    -DCMAKE_C_COMPILER="${CC:-clang}" -DSPORA_WITH_TESTS=OFF >/dev/null
fi
cmake --build "$build" -j"${SPORA_FUZZ_JOBS:-2}" --target "fuzz_$target"
export SPORA_FUZZ_PLUGIN_DIR=${SPORA_FUZZ_PLUGIN_DIR-$src/build/lib/spora/plugins}
[ -d "$SPORA_FUZZ_PLUGIN_DIR" ] || SPORA_FUZZ_PLUGIN_DIR=
work=$build/corpus/$target
artifacts=$build/artifacts/$target
mkdir -p "$work" "$artifacts"
# Leak checking is off (also at exit: fuzz_device.cpp): LeakSanitizer dies
# once the sim plugin's threads are up ("Tracer caught signal 11"), and the
# targets keep their device for the whole process on purpose. Sizes: inputs
# up to 64 KiB (the seeds are a few KiB), 2 GiB of memory (a loader that
# trusts a size claim shows up as an out-of-memory report), 10 s per input
# (a hang).
flags=(-max_len=65536 -detect_leaks=0 -rss_limit_mb=2048 -malloc_limit_mb=2048 -timeout=10 -print_final_stats=1
  "-artifact_prefix=$artifacts/")
# A dictionary of the format's tokens, where there is one.
case $target in
  graph_json | graph_compile) dict=$src/tests/fuzz/graph_json.dict ;;
  *) dict=$src/tests/fuzz/$target.dict ;;
esac
[ -f "$dict" ] && flags+=("-dict=$dict")
if [ "$seconds" = 0 ]; then
  exec "$build/fuzz/fuzz_$target" "${flags[@]}" -runs=0 "$@" "$seeds"
fi
exec "$build/fuzz/fuzz_$target" "${flags[@]}" -max_total_time="$seconds" "$@" "$work" "$seeds"
