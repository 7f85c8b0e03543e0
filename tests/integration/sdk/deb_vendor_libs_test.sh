#!/usr/bin/env bash
# Plugin packages whose plugin links libraries no Debian package owns (CUDA
# in /usr/local/cuda, ROCm in /opt/rocm, driver stubs): cpack must still
# build every package (packaging/SporaCPackPlugins.cmake), name those
# libraries in the package description, and keep the Depends it can know.
# Uses the small project in vendor_libs/, packaged by Spora's own
# packaging/*.cmake.
#
# usage: deb_vendor_libs_test.sh SOURCE_DIR CMAKE CPACK C_COMPILER GENERATOR [MAKE_PROGRAM]
set -euo pipefail
src=$1 cmake=$2 cpack=$3 cc=$4 gen=$5 make_program=${6:-}

tmp=$(mktemp -d "${TMPDIR:-/tmp}/spora-sdk-vendor.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail() {
  echo "FAIL: $*" >&2
  exit 1
}
args=(-G "$gen" -DCMAKE_C_COMPILER="$cc" -DSPORA_SOURCE_DIR="$src")
[ -n "$make_program" ] && args+=(-DCMAKE_MAKE_PROGRAM="$make_program")
"$cmake" "${args[@]}" -S "$src/tests/integration/sdk/vendor_libs" -B "$tmp/build" >"$tmp/configure.log" 2>&1 || {
  cat "$tmp/configure.log"
  fail "configuring tests/integration/sdk/vendor_libs failed"
}
"$cmake" --build "$tmp/build" >"$tmp/build.log" 2>&1 || {
  cat "$tmp/build.log"
  fail "building tests/integration/sdk/vendor_libs failed"
}
# The premise: both plugins need a library dpkg knows nothing about.
plugin() { find "$tmp/build" -name "libspora-device-$1.so" | head -1; }
readelf -d "$(plugin fakeaccel)" | grep -q 'NEEDED.*\[libvendor.so.1\]' || fail "fakeaccel does not link libvendor.so.1"
readelf -d "$(plugin fakedriver)" | grep -q 'NEEDED.*\[libstub.so.2\]' || fail "fakedriver does not link libstub.so.2"

(cd "$tmp/build" && "$cpack" -G DEB --config CPackConfig.cmake -B "$tmp/pkgs") >"$tmp/cpack.log" 2>&1 || {
  cat "$tmp/cpack.log"
  fail "cpack failed on plugins linking libraries no Debian package owns"
}
arch=$(dpkg --print-architecture)
accel=$tmp/pkgs/spora-plugin-fakeaccel_0.1.0_$arch.deb
driver=$tmp/pkgs/spora-plugin-fakedriver_0.1.0_$arch.deb
[ -f "$accel" ] && [ -f "$driver" ] || {
  ls "$tmp/pkgs"
  fail "missing plugin package"
}
for d in "$accel" "$driver"; do
  printf '%s\n  Depends: %s\n' "$(dpkg-deb -f "$d" Package)" "$(dpkg-deb -f "$d" Depends)"
  dpkg-deb -f "$d" Description | sed 's/^/  /'
done
# Found but unowned: shlibs Depends for the rest, the library named.
dpkg-deb -f "$accel" Depends | grep -q '^libspora (= 0.1.0), libc6 (>= ' || fail "fakeaccel: Depends lacks libspora/libc6"
! dpkg-deb -f "$accel" Depends | grep -q vendor || fail "fakeaccel: Depends names the unowned library"
dpkg-deb -f "$accel" Description | tr -s ' \n' '  ' | grep -q "needs libvendor.so.1 (in [^)]*/vendor/lib), which no Debian package provides" ||
  fail "fakeaccel: the description does not name libvendor.so.1"
# Not found: no shlibs Depends, the library named, and a warning.
[ "$(dpkg-deb -f "$driver" Depends)" = "libspora (= 0.1.0)" ] || fail "fakedriver: Depends is not just libspora"
dpkg-deb -f "$driver" Description | tr -s ' \n' '  ' | grep -q "needs libstub.so.2, not found on the machine that built" ||
  fail "fakedriver: the description does not name libstub.so.2"
tr -s ' \n' '  ' <"$tmp/cpack.log" | grep -q "spora-plugin-fakedriver: dpkg-shlibdeps cannot resolve" ||
  fail "cpack did not warn about fakedriver"
# The plugins are in their packages, where the loader looks.
dpkg-deb -c "$accel" | grep -q "/usr/lib/spora/plugins/libspora-device-fakeaccel.so$" || fail "fakeaccel: plugin not packaged"
echo "sdk vendor-library packaging test: all checks passed"
