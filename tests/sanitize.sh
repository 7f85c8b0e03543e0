#!/usr/bin/env bash
# The whole test suite under AddressSanitizer and UBSan (docs/security.md):
# configures a build directory of its own with -DSPORA_SANITIZE, builds it
# and runs every test there. Not part of CI (it takes far longer than the
# normal suite); run it after changing a loader, a kernel or the runtime.
#
#   tests/sanitize.sh [BUILD_DIR [SANITIZERS [ctest arguments...]]]
#
# BUILD_DIR defaults to build-asan, SANITIZERS to address,undefined
# ("address" or "undefined" alone also work). JOBS (default 2) sets the
# parallelism of both the build and ctest; NICE (default 15) its niceness,
# so other work on the machine keeps priority.
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$src/build-asan}
san=${2:-address,undefined}
shift $(($# > 2 ? 2 : $#))
jobs=${JOBS:-2}
nice=${NICE:-15}
gen=()
command -v ninja >/dev/null && gen=(-G Ninja)
# -O1 -g1: symbolised reports with file:line, at a fraction of -O2 -g's
# compile time (the core asks for -O2 itself).
cmake -S "$src" -B "$build" "${gen[@]}" -DSPORA_SANITIZE="$san" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG" "-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG"
start=$(date +%s)
nice -n "$nice" cmake --build "$build" -j"$jobs"
built=$(date +%s)
status=0
nice -n "$nice" ctest --test-dir "$build" -j"$jobs" --timeout 600 --output-on-failure "$@" || status=$?
echo "sanitize.sh ($san): build $((built - start)) s, tests $(($(date +%s) - built)) s"
exit $status
