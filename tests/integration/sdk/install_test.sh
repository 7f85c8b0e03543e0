#!/usr/bin/env bash
# The installed SDK, used the way a vendor and an application use it:
#   1. `cmake --install` into a fresh prefix; check the layout, SONAME,
#      RPATHs, exported plugin symbols, relocatability;
#   2. copy the plugin template out of the prefix; configuring it unfilled
#      must stop with a message saying where to fill it in; filled in, it is
#      configured and built as a separate CMake project that knows nothing
#      but CMAKE_PREFIX_PATH=<prefix>;
#   3. the installed `spora devices` lists the new plugin with
#      SPORA_PLUGIN_PATH pointing at it, and `spora plugin check` (the
#      conformance kit, once the tool has it) certifies it;
#   4. a C program built with `pkg-config --cflags --libs spora` runs `add`
#      on the template's device; the C API guide's example, built through
#      find_package(Spora) and Spora::spora, runs on cpu and sim;
#   5. misuse gives clear messages: spora_add_plugin with a wrong KIND or
#      missing NAME/SOURCES, a plugin directory that does not exist, a
#      Spora version that does not match.
# Nothing from the build tree is used except through the installed prefix.
#
# usage: install_test.sh BUILD_DIR SOURCE_DIR LIBDIR CMAKE C_COMPILER GENERATOR [MAKE_PROGRAM]
set -euo pipefail
# A SPORA_SANITIZE=address build's libspora needs the ASan runtime loaded
# before it: a plain (uninstrumented) program or interpreter run against it
# gets SPORA_TEST_ASAN_PRELOAD preloaded, with leak checks off as for the
# suite's Python (tests/integration/sdk/CMakeLists.txt). Empty otherwise.
# `spora devices` initialises Open MPI, whose leaks LeakSanitizer can
# attribute only with SPORA_SANITIZE_MPI_ASAN_OPTIONS (cmake/SporaSanitize.cmake);
# given to that command alone, as plugin checks take far longer with them.
mpi_asan() {
  ASAN_OPTIONS="${ASAN_OPTIONS:-}${SPORA_SANITIZE_MPI_ASAN_OPTIONS:+:$SPORA_SANITIZE_MPI_ASAN_OPTIONS}" "$@"
}
asan_run() {
  if [ -n "${SPORA_TEST_ASAN_PRELOAD:-}" ]; then
    LD_PRELOAD="$SPORA_TEST_ASAN_PRELOAD${LD_PRELOAD:+:$LD_PRELOAD}" \
      ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" "$@"
  else
    "$@"
  fi
}
build=$1 src=$2 libdir=$3 cmake=$4 cc=$5 gen=$6 make_program=${7:-}

tmp=$(mktemp -d "${TMPDIR:-/tmp}/spora-sdk-install.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix
unset SPORA_PLUGIN_PATH CMAKE_PREFIX_PATH Spora_DIR PKG_CONFIG_PATH SPORA_LOG_LEVEL

fail() {
  echo "FAIL: $*" >&2
  exit 1
}
step() { echo "== $*"; }
# CMake wraps its messages; compare text with whitespace runs made one space.
flat() { tr -s ' \n' '  ' <"$1"; }
# cmake configure with the same compiler and generator as the main build.
configure() {
  local args=(-G "$gen" -DCMAKE_C_COMPILER="$cc")
  [ -n "$make_program" ] && args+=(-DCMAKE_MAKE_PROGRAM="$make_program")
  "$cmake" "${args[@]}" "$@"
}

step "cmake --install $build --prefix <tmp>"
"$cmake" --install "$build" --prefix "$prefix" >"$tmp/install.log" 2>&1 || {
  cat "$tmp/install.log"
  fail "cmake --install failed"
}

step "layout"
version=$(sed -n 's/^Version: *//p' "$prefix/$libdir/pkgconfig/spora.pc")
major=${version%%.*}
for f in include/spora/spora.h include/spora/spora.hpp include/spora/plugin.h include/spora/sdk/plugin_table.h \
  "$libdir/libspora.so" "$libdir/libspora.so.$major" "$libdir/libspora.so.$version" \
  "$libdir/spora/plugins/libspora-device-cpu.so" "$libdir/spora/plugins/libspora-device-sim.so" \
  "$libdir/spora/spora-plugin-probe" \
  bin/spora \
  "$libdir/cmake/Spora/SporaConfig.cmake" "$libdir/cmake/Spora/SporaConfigVersion.cmake" \
  "$libdir/cmake/Spora/SporaTargets.cmake" "$libdir/cmake/Spora/SporaAddPlugin.cmake" \
  "$libdir/cmake/Spora/plugin.map" "$libdir/pkgconfig/spora.pc" \
  share/spora/template/CMakeLists.txt share/spora/template/device.c \
  share/spora/conformance/cases/basic.json; do
  [ -e "$prefix/$f" ] || fail "missing from the install: $f"
done
[ "$(readlink "$prefix/$libdir/libspora.so")" = "libspora.so.$major" ] || fail "libspora.so is not a link to libspora.so.$major"
[ "$(readlink "$prefix/$libdir/libspora.so.$major")" = "libspora.so.$version" ] ||
  fail "libspora.so.$major is not a link to libspora.so.$version"
soname=$(readelf -d "$prefix/$libdir/libspora.so.$version" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
[ "$soname" = "libspora.so.$major" ] || fail "SONAME is '$soname', expected libspora.so.$major"
# Test plugins (tests/loader, tests/conformance) must never be installed;
# the in-tree plugins of DESIGN.md section 1 may be, when they were built.
extra=$(ls "$prefix/$libdir/spora/plugins" |
  grep -vE '^libspora-(device-(cpu|sim|cuda|rocm|ze)|collective-(mpi|nccl))\.so$' || true)
[ -z "$extra" ] || fail "unexpected files in the plugin directory: $extra"

step "RPATH: bin/spora finds libspora relative to itself; libraries carry none"
runpath() { readelf -d "$1" | sed -n 's/.*(\(RPATH\|RUNPATH\)).*\[\(.*\)\]/\2/p'; }
rel=$(realpath --relative-to="$prefix/bin" "$prefix/$libdir")
[ "$(runpath "$prefix/bin/spora")" = "\$ORIGIN/$rel" ] ||
  fail "bin/spora RUNPATH is '$(runpath "$prefix/bin/spora")', expected \$ORIGIN/$rel"
for f in "$prefix/$libdir/libspora.so.$version" "$prefix/$libdir"/spora/plugins/*.so; do
  [ -z "$(runpath "$f")" ] || fail "$f has RPATH/RUNPATH '$(runpath "$f")'; it should need none"
done
resolved=$(ldd "$prefix/bin/spora" | sed -n "s/.*libspora.so.$major => \(.*\) (0x.*/\1/p")
[ -n "$resolved" ] && [ "$resolved" -ef "$prefix/$libdir/libspora.so.$major" ] ||
  fail "bin/spora does not resolve libspora from the prefix: $(ldd "$prefix/bin/spora" | grep libspora)"

step "plugins export only the probe and entry symbols"
exports() { nm -D --defined-only "$1" | awk '{print $NF}' | sort | tr '\n' ' '; }
for f in "$prefix/$libdir"/spora/plugins/*.so; do
  e=$(exports "$f")
  [ "$e" = "spora_plugin_entry_v1 spora_plugin_probe_v1 " ] || fail "$(basename "$f") exports: $e"
done

step "relocatable: no build or source paths in the CMake package or spora.pc"
if grep -rlF -e "$build" -e "$src" "$prefix/$libdir/cmake" "$prefix/$libdir/pkgconfig"; then
  fail "the files above name the build or source tree"
fi

step "installed spora devices (default plugin directory next to libspora; probe helper beside it)"
SPORA_PLUGIN_CACHE_DIR="$tmp/verdicts" SPORA_LOG_LEVEL=debug mpi_asan "$prefix/bin/spora" devices >"$tmp/devices.txt" 2>&1 || {
  cat "$tmp/devices.txt"
  fail "spora devices failed"
}
for p in cpu sim; do
  grep -qE "^  $p +device +ok +$prefix/$libdir/spora/plugins/libspora-device-$p.so" "$tmp/devices.txt" || {
    cat "$tmp/devices.txt"
    fail "installed spora devices does not list $p as ok from the prefix"
  }
done
grep -qE "probe sandbox: [1-9][0-9]* probe process\(es\) started" "$tmp/devices.txt" || {
  cat "$tmp/devices.txt"
  fail "installed libspora did not vet its plugins with $libdir/spora/spora-plugin-probe"
}

step "template left unfilled: configure stops and says where"
cp -r "$prefix/share/spora/template" "$tmp/myplugin"
if configure -S "$tmp/myplugin" -B "$tmp/unfilled" -DCMAKE_PREFIX_PATH="$prefix" >"$tmp/unfilled.log" 2>&1; then
  fail "configuring the unfilled template succeeded"
fi
flat "$tmp/unfilled.log" | grep -qF "not yet filled in: set PLUGIN_NAME in $tmp/myplugin/CMakeLists.txt" || {
  cat "$tmp/unfilled.log"
  fail "the unfilled template's error does not name PLUGIN_NAME and the file"
}

step "template filled in, built out of tree with CMAKE_PREFIX_PATH=<prefix> only"
# docs/plugin-guide.md's own sed line (its name replaced): it must not touch
# the template's unfilled check.
sed -i 's/"CHANGE_ME"/"tmpl"/' "$tmp/myplugin/CMakeLists.txt"
configure -S "$tmp/myplugin" -B "$tmp/myplugin-build" -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_INSTALL_PREFIX="$tmp/vendor" -DCMAKE_BUILD_TYPE=Release >"$tmp/tmpl-configure.log" 2>&1 || {
  cat "$tmp/tmpl-configure.log"
  fail "configuring the template failed"
}
grep -q "^Spora_DIR:PATH=$prefix/$libdir/cmake/Spora$" "$tmp/myplugin-build/CMakeCache.txt" ||
  fail "the template found Spora elsewhere: $(grep Spora_DIR "$tmp/myplugin-build/CMakeCache.txt")"
"$cmake" --build "$tmp/myplugin-build" >"$tmp/tmpl-build.log" 2>&1 || {
  cat "$tmp/tmpl-build.log"
  fail "building the template failed"
}
plugin=$tmp/myplugin-build/libspora-device-tmpl.so
[ -f "$plugin" ] || fail "the template build made no libspora-device-tmpl.so"
[ "$(exports "$plugin")" = "spora_plugin_entry_v1 spora_plugin_probe_v1 " ] || fail "the template exports: $(exports "$plugin")"
"$cmake" --install "$tmp/myplugin-build" >/dev/null
[ -f "$tmp/vendor/$libdir/spora/plugins/libspora-device-tmpl.so" ] ||
  fail "cmake --install of the template did not put it in <prefix>/$libdir/spora/plugins"

step "SPORA_PLUGIN_PATH=<template build> spora devices"
SPORA_PLUGIN_PATH=$tmp/myplugin-build mpi_asan "$prefix/bin/spora" devices >"$tmp/devices-tmpl.txt" 2>&1 || {
  cat "$tmp/devices-tmpl.txt"
  fail "spora devices failed with the template plugin"
}
grep -qE "^  tmpl +device +ok +$plugin$" "$tmp/devices-tmpl.txt" && grep -qE "^  tmpl:0$" "$tmp/devices-tmpl.txt" || {
  cat "$tmp/devices-tmpl.txt"
  fail "spora devices does not list the template plugin as ok with device tmpl:0"
}
sed -n '1,4p' "$tmp/devices-tmpl.txt"

step "spora plugin check <template build>/libspora-device-tmpl.so (the conformance kit)"
if "$prefix/bin/spora" --help 2>&1 | grep -q "plugin check"; then
  # The installed tool finds the installed cases (share/spora/conformance).
  "$prefix/bin/spora" plugin check "$plugin" >"$tmp/check.txt" 2>&1 || {
    cat "$tmp/check.txt"
    fail "the template plugin does not pass spora plugin check"
  }
  grep -q "^tmpl: CERTIFIED" "$tmp/check.txt" || {
    cat "$tmp/check.txt"
    fail "spora plugin check did not certify the template"
  }
  grep -E "^(ABI|runtime) |^tmpl: " "$tmp/check.txt"
else
  echo "NOTE: this spora has no 'plugin check' command yet; the template was only loaded (spora devices)"
fi

step "pkg-config: a C program built against the prefix runs add on the template device"
export PKG_CONFIG_PATH=$prefix/$libdir/pkgconfig
[ "$(pkg-config --modversion spora)" = "$version" ] || fail "pkg-config --modversion spora: $(pkg-config --modversion spora)"
[ "$(pkg-config --variable=plugindir spora)" -ef "$prefix/$libdir/spora/plugins" ] ||
  fail "pkg-config plugindir is $(pkg-config --variable=plugindir spora)"
# shellcheck disable=SC2046
"$cc" -std=c99 -Wall -Wextra -pedantic -Werror "$src/tests/integration/sdk/template_add.c" -o "$tmp/template_add" \
  $(pkg-config --cflags --libs spora) -Wl,-rpath,"$(pkg-config --variable=libdir spora)"
SPORA_LOG_LEVEL=debug SPORA_PLUGIN_PATH=$tmp/myplugin-build asan_run "$tmp/template_add" tmpl >"$tmp/add.txt" 2>&1 || {
  cat "$tmp/add.txt"
  fail "template_add failed"
}
grep -v '^\[spora' "$tmp/add.txt"
# Same-shape f32 add is the template's own kernel; the broadcast add it
# refuses ran on cpu with copies.
grep -qF "[add] planned kernel on tmpl:0" "$tmp/add.txt" || fail "the template's add kernel was not used"
grep -qF "[add] no kernel on tmpl:0: ran on cpu:0 with copies" "$tmp/add.txt" || fail "the broadcast add did not fall back"
unset PKG_CONFIG_PATH

step "find_package(Spora) + Spora::spora: the C API guide's example runs on cpu and sim"
mkdir -p "$tmp/app"
# The complete example in docs/c-api.md, between its markers.
awk '/<!-- example: c-api-example.c -->/{on=1; next} on && /^```c$/{code=1; next} code && /^```$/{exit} code{print}' \
  "$src/docs/c-api.md" >"$tmp/app/example.c"
[ -s "$tmp/app/example.c" ] || fail "no example found in docs/c-api.md"
cat >"$tmp/app/CMakeLists.txt" <<'EOF'
cmake_minimum_required(VERSION 3.20)
project(spora_app LANGUAGES C)
find_package(Spora 0.1 REQUIRED)
add_executable(example example.c)
set_target_properties(example PROPERTIES C_STANDARD 99 C_STANDARD_REQUIRED ON C_EXTENSIONS OFF)
target_compile_options(example PRIVATE -Wall -Wextra -pedantic -Werror)
target_link_libraries(example PRIVATE Spora::spora)
EOF
configure -S "$tmp/app" -B "$tmp/app-build" -DCMAKE_PREFIX_PATH="$prefix" >"$tmp/app.log" 2>&1 &&
  "$cmake" --build "$tmp/app-build" >>"$tmp/app.log" 2>&1 || {
  cat "$tmp/app.log"
  fail "building the docs/c-api.md example with find_package(Spora) failed"
}
for d in cpu sim; do
  asan_run "$tmp/app-build/example" "$d" >"$tmp/example-$d.txt" 2>&1 || {
    cat "$tmp/example-$d.txt"
    fail "the docs/c-api.md example failed on $d"
  }
  grep -q "^ok on $d$" "$tmp/example-$d.txt" || fail "the docs/c-api.md example did not finish on $d"
  grep -qF "error: [matmul] shapes (2,3) and (2,3) do not contract" "$tmp/example-$d.txt" ||
    fail "the docs/c-api.md example's error message changed: $(grep error "$tmp/example-$d.txt")"
done
diff <(grep -v '^ok on' "$tmp/example-cpu.txt") <(grep -v '^ok on' "$tmp/example-sim.txt") ||
  fail "the docs/c-api.md example prints different numbers on cpu and sim"

step "misuse: clear messages"
# spora_add_plugin's argument checks run before anything is compiled, so a
# project without languages is enough (and fast).
expect_configure_error() { # <label> <cmake body> <expected text>
  local d=$tmp/misuse-$1
  mkdir -p "$d"
  printf 'cmake_minimum_required(VERSION 3.20)\nproject(misuse LANGUAGES NONE)\n%s\n' "$2" >"$d/CMakeLists.txt"
  if "$cmake" -G "$gen" ${make_program:+-DCMAKE_MAKE_PROGRAM="$make_program"} -S "$d" -B "$d/build" \
    -DCMAKE_PREFIX_PATH="$prefix" >"$d/log" 2>&1; then
    fail "$1: configure succeeded"
  fi
  flat "$d/log" | grep -qF "$3" || {
    cat "$d/log"
    fail "$1: the error does not say '$3'"
  }
  echo "  $1: ok"
}
expect_configure_error kind 'find_package(Spora REQUIRED)
spora_add_plugin(NAME x KIND gpu SOURCES x.c)' "KIND must be device or collective, got 'gpu'"
expect_configure_error no-sources 'find_package(Spora REQUIRED)
spora_add_plugin(NAME x KIND device)' "SOURCES is missing for plugin 'x'"
expect_configure_error no-name 'find_package(Spora REQUIRED)
spora_add_plugin(KIND device SOURCES x.c)' "NAME is missing"
expect_configure_error bad-name 'find_package(Spora REQUIRED)
spora_add_plugin(NAME My-Accel KIND device SOURCES x.c)' "NAME 'My-Accel' is not a plugin name"
expect_configure_error version 'find_package(Spora 99 REQUIRED)' "compatible with requested version \"99\""

SPORA_PLUGIN_PATH=$tmp/no-such-dir mpi_asan "$prefix/bin/spora" devices >"$tmp/nodir.txt" 2>&1 || true
grep -qF "plugin path '$tmp/no-such-dir' (from SPORA_PLUGIN_PATH) does not exist" "$tmp/nodir.txt" || {
  cat "$tmp/nodir.txt"
  fail "a missing SPORA_PLUGIN_PATH directory is not reported with its path"
}
echo "  missing plugin directory: ok"

echo "sdk install test: all checks passed"
