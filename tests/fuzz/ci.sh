#!/usr/bin/env bash
# The fuzz targets' CI run (ctest: fuzz_corpus): builds them with clang in
# their own build directory and replays every committed seed and regression
# input (tests/fuzz/corpus) through each target once -- seconds, and
# deterministic; long runs are run.sh's. Skips (exit 77, which ctest shows
# as "Not Run") when no clang with libFuzzer is installed.
#
#   ci.sh SOURCE_DIR BUILD_DIR PLUGIN_DIR
set -euo pipefail
src=$1 build=$2 plugins=$3
# Debian's clang-14 (packaging/install-deps.sh installs it for plugins/ze)
# may come without the unversioned names.
cxx=${SPORA_FUZZ_CXX:-clang++} cc=${SPORA_FUZZ_CC:-clang}
if ! command -v "$cxx" >/dev/null && command -v clang++-14 >/dev/null; then
  cxx=clang++-14 cc=clang-14
fi
probe=$(mktemp -d)
trap 'rm -rf "$probe"' EXIT
printf 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) { return 0; }\n' >"$probe/p.cpp"
if ! command -v "$cxx" >/dev/null || ! "$cxx" -fsanitize=fuzzer,address,undefined "$probe/p.cpp" -o "$probe/p" 2>/dev/null; then
  echo "SKIP fuzz_corpus: no $cxx with libFuzzer and the sanitizers (-fsanitize=fuzzer,address,undefined);"
  echo "     install clang (Debian: apt-get install clang) to build and replay the fuzz targets"
  exit 77
fi
start=$(date +%s)
if [ ! -f "$build/CMakeCache.txt" ]; then
  gen=()
  command -v ninja >/dev/null && gen=(-G Ninja)
  cmake -S "$src" -B "$build" "${gen[@]}" -DSPORA_FUZZ=ON -DCMAKE_CXX_COMPILER="$cxx" \
    -DCMAKE_C_COMPILER="$cc" -DSPORA_WITH_TESTS=OFF >/dev/null
fi
cmake --build "$build" -j2 --target spora_fuzz_all | tail -3
built=$(date +%s)
export SPORA_FUZZ_PLUGIN_DIR=$plugins
status=0
for dir in "$src"/tests/fuzz/corpus/*/; do
  t=$(basename "$dir")
  n=$(find "$dir" -type f | wc -l)
  if "$build/fuzz/fuzz_$t" -runs=0 -detect_leaks=0 -rss_limit_mb=2048 -malloc_limit_mb=2048 -timeout=30 "$dir" \
      >"$build/fuzz_$t.log" 2>&1; then
    echo "fuzz_$t: $n inputs, clean"
  else
    echo "fuzz_$t: FAILED on its corpus ($n inputs); the report:"
    tail -40 "$build/fuzz_$t.log"
    status=1
  fi
done
echo "fuzz_corpus: build $((built - start)) s, replay $(($(date +%s) - built)) s"
exit $status
