#!/usr/bin/env bash
# The Debian packages: cpack builds one .deb per component; every expected
# package is there with the project's version and exact inter-package
# Depends; no file is in two packages; everything extracts (dpkg-deb -x)
# into one temporary root, from which `spora devices` finds the cpu and sim
# plugins and the C example (examples/c/quickstart.c), built against the
# root's headers and spora.pc, runs on every device. The example finds
# libspora through LD_LIBRARY_PATH=<root>/usr/lib (nothing is installed
# system-wide); bin/spora needs no such help (RUNPATH $ORIGIN/../lib).
# python3-spora: the system interpreter (/usr/bin/python3, the one the
# package's Depends name) imports the root's package in isolated mode and
# checks devices, plugin paths and a gradient against numpy
# (deb_python_check.py).
#
# usage: deb_test.sh BUILD_DIR SOURCE_DIR LIBDIR CPACK C_COMPILER [VENV_PYTHON]
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
build=$1 src=$2 libdir=$3 cpack=$4 cc=$5 venv_python=${6:-}

tmp=$(mktemp -d "${TMPDIR:-/tmp}/spora-sdk-deb.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
unset SPORA_PLUGIN_PATH PKG_CONFIG_PATH LD_LIBRARY_PATH SPORA_LOG_LEVEL

fail() {
  echo "FAIL: $*" >&2
  exit 1
}
step() { echo "== $*"; }

config=$build/CPackConfig.cmake
[ -f "$config" ] || fail "$config does not exist (configure the build first)"
# Components with no package (install() rules without COMPONENT) are
# recorded at configure time.
unpackaged=$(sed -n 's/^set(CPACK_SPORA_UNPACKAGED_COMPONENTS "\(.*\)")$/\1/p' "$config")
[ -z "$unpackaged" ] || fail "install components without a package: $unpackaged (see packaging/SporaPackaging.cmake)"
components=$(sed -n 's/^set(CPACK_COMPONENTS_ALL "\(.*\)")$/\1/p' "$config" | tr ';' ' ')
version=$(sed -n 's/^set(CPACK_PACKAGE_VERSION "\(.*\)")$/\1/p' "$config")

step "cpack -G DEB ($components)"
"$cpack" -G DEB --config "$config" -B "$tmp/pkgs" >"$tmp/cpack.log" 2>&1 || {
  cat "$tmp/cpack.log"
  fail "cpack failed"
}

expected="libspora libspora-dev spora-tools spora-plugin-cpu spora-plugin-sim"
# python3-spora exists when the build has the Python frontend (the build
# tree's package is there); the wheel's component never becomes a package.
[ ! -f "$build/python/spora/__init__.py" ] || expected="$expected python3-spora"
wheel_only=$(sed -n 's/^set(CPACK_SPORA_WHEEL_ONLY_COMPONENTS "\(.*\)")$/\1/p' "$config")
[ -z "$wheel_only" ] || fail "components '$wheel_only' (the wheel's layout) are installed by a plain CMake build"
for c in $components $expected; do
  [ -f "$tmp/pkgs/${c}_${version}_$(dpkg --print-architecture).deb" ] || {
    ls "$tmp/pkgs"
    fail "no package for component $c"
  }
done

step "control fields"
deb() { echo "$tmp/pkgs/${1}_${version}_$(dpkg --print-architecture).deb"; }
for c in $components; do
  [ "$(dpkg-deb -f "$(deb "$c")" Package)" = "$c" ] || fail "$c: Package is $(dpkg-deb -f "$(deb "$c")" Package)"
  [ "$(dpkg-deb -f "$(deb "$c")" Version)" = "$version" ] || fail "$c: Version is not $version"
  printf '  %-18s Depends: %s\n' "$c" "$(dpkg-deb -f "$(deb "$c")" Depends)"
done
depends_on() { # <package> <dependency text>
  dpkg-deb -f "$(deb "$1")" Depends | tr ',' '\n' | sed 's/^ *//' | grep -qxF "$2" ||
    fail "$1 does not depend on '$2': $(dpkg-deb -f "$(deb "$1")" Depends)"
}
for c in $components; do
  case $c in
    libspora) ;;
    python3-spora)
      depends_on "$c" "libspora (= $version)"
      depends_on "$c" "spora-plugin-cpu (= $version)"
      depends_on "$c" "python3-numpy"
      # _C is built for one CPython minor version: the Depends pin it.
      pyabi=$(sed -n 's/^SPORA_PYTHON_ABI_VERSION:INTERNAL=//p' "$build/CMakeCache.txt")
      depends_on "$c" "python3 (>= $pyabi)"
      depends_on "$c" "python3 (<< ${pyabi%%.*}.$((${pyabi#*.} + 1)))"
      ;;
    *) depends_on "$c" "libspora (= $version)" ;;
  esac
done
# dpkg-shlibdeps filled in the system libraries.
dpkg-deb -f "$(deb libspora)" Depends | grep -q "libc6" || fail "libspora lacks shlibdeps Depends (libc6)"
dpkg-deb -f "$(deb spora-plugin-cpu)" Depends | grep -q "libdnnl" || fail "spora-plugin-cpu does not depend on libdnnl"
# Other packages can depend on libspora through its shlibs file.
mkdir -p "$tmp/ctrl"
dpkg-deb -e "$(deb libspora)" "$tmp/ctrl"
grep -q "^libspora $(echo "$version" | cut -d. -f1) libspora (>= $version)$" "$tmp/ctrl/shlibs" ||
  fail "libspora's shlibs file: $(cat "$tmp/ctrl/shlibs" 2>/dev/null)"

step "contents: each file in exactly one package, in the right one"
for c in $components; do
  dpkg-deb -c "$(deb "$c")" | awk '$1 !~ /^d/ {print ($(NF-1) == "->") ? $(NF-2) : $NF}' | sed "s|^|$c |"
done >"$tmp/files.txt"
dups=$(awk '{print $2}' "$tmp/files.txt" | sort | uniq -d)
[ -z "$dups" ] || fail "files in more than one package: $dups"
owner() { awk -v f="./usr/$1" '$2 == f {print $1}' "$tmp/files.txt"; }
major=${version%%.*}
[ "$(owner "$libdir/libspora.so.$version")" = libspora ] || fail "libspora.so.$version is not in libspora"
[ "$(owner "$libdir/spora/spora-plugin-probe")" = libspora ] || fail "the probe helper is not in libspora"
[ "$(owner "$libdir/libspora.so")" = libspora-dev ] || fail "the libspora.so link is not in libspora-dev"
[ "$(owner include/spora/plugin.h)" = libspora-dev ] || fail "plugin.h is not in libspora-dev"
[ "$(owner "$libdir/cmake/Spora/SporaConfig.cmake")" = libspora-dev ] || fail "SporaConfig.cmake is not in libspora-dev"
[ "$(owner "$libdir/pkgconfig/spora.pc")" = libspora-dev ] || fail "spora.pc is not in libspora-dev"
[ "$(owner share/spora/template/device.c)" = libspora-dev ] || fail "the template is not in libspora-dev"
[ "$(owner bin/spora)" = spora-tools ] || fail "bin/spora is not in spora-tools"
for p in cpu sim; do
  [ "$(owner "$libdir/spora/plugins/libspora-device-$p.so")" = "spora-plugin-$p" ] ||
    fail "libspora-device-$p.so is not in spora-plugin-$p"
done
pydist=lib/python3/dist-packages
if [[ " $components " == *" python3-spora "* ]]; then
  [ "$(owner $pydist/spora/__init__.py)" = python3-spora ] || fail "spora/__init__.py is not in python3-spora"
  [ "$(owner $pydist/spora/nn/__init__.py)" = python3-spora ] || fail "spora/nn is not in python3-spora"
  ext=$(awk '$1 == "python3-spora" && $2 ~ /\/spora\/_C\..*so$/ {print $2}' "$tmp/files.txt")
  [ -n "$ext" ] || fail "python3-spora has no spora/_C*.so"
  ! grep '^python3-spora ' "$tmp/files.txt" | grep -qE '\.pyc$|__pycache__' || fail "python3-spora ships bytecode"
fi

step "dpkg-deb -x every package into one root"
root=$tmp/root
for c in $components; do dpkg-deb -x "$(deb "$c")" "$root"; done

step "<root>/usr/bin/spora devices"
SPORA_PLUGIN_CACHE_DIR="$tmp/verdicts" SPORA_LOG_LEVEL=debug mpi_asan "$root/usr/bin/spora" devices >"$tmp/devices.txt" 2>&1 || {
  cat "$tmp/devices.txt"
  fail "spora devices from the packages failed"
}
grep -qE "probe sandbox: [1-9][0-9]* probe process\(es\) started" "$tmp/devices.txt" || {
  cat "$tmp/devices.txt"
  fail "libspora from the packages did not vet its plugins with its probe helper"
}
for p in cpu sim; do
  grep -qE "^  $p +device +ok +$root/usr/$libdir/spora/plugins/libspora-device-$p.so$" "$tmp/devices.txt" || {
    cat "$tmp/devices.txt"
    fail "spora devices from the packages does not list $p as ok from the root"
  }
done
sed -n '1,3p' "$tmp/devices.txt"

step "examples/c/quickstart.c built against the packages (pkg-config) runs on every device"
export PKG_CONFIG_PATH=$root/usr/$libdir/pkgconfig
# shellcheck disable=SC2046
"$cc" -std=c99 -Wall -Wextra -Werror "$src/examples/c/quickstart.c" -o "$tmp/quickstart" $(pkg-config --cflags --libs spora) -lm
inc=$(pkg-config --cflags-only-I spora | sed 's/^ *-I//; s/ *$//')
[ "$inc" -ef "$root/usr/include" ] || fail "pkg-config --cflags points to '$inc', not into the root"
LD_LIBRARY_PATH=$root/usr/$libdir asan_run "$tmp/quickstart" >"$tmp/quickstart.txt" 2>&1 || {
  cat "$tmp/quickstart.txt"
  fail "the quickstart example failed"
}
cat "$tmp/quickstart.txt"
grep -qE "^  cpu:0 .* ok$" "$tmp/quickstart.txt" && grep -qE "^  sim:0 .* ok$" "$tmp/quickstart.txt" ||
  fail "the quickstart example did not run on cpu and sim"

if [[ " $components " == *" python3-spora "* ]]; then
  step "python3-spora: import spora from the root with the system python3"
  # The interpreter the package's Depends name. Its numpy is Debian's
  # python3-numpy when installed; otherwise (install-deps.sh puts numpy only
  # in the venv) a directory holding nothing but links to the venv's numpy,
  # so sys.path is the standard library, the root's dist-packages and numpy.
  sys_python=/usr/bin/python3
  [ -x "$sys_python" ] || fail "$sys_python does not exist (python3-spora targets Debian's python3)"
  is_abi() { "$1" -c "import sys; sys.exit('%d.%d' % sys.version_info[:2] != '$pyabi')"; }
  if ! is_abi "$sys_python"; then
    # A build with another CPython (a pyenv venv, say) makes a package this
    # system's python3 cannot satisfy; check the files with that interpreter,
    # still isolated from its site-packages.
    [ -n "$venv_python" ] && is_abi "$venv_python" ||
      fail "neither $sys_python nor '$venv_python' is Python $pyabi, the version spora._C was built for"
    echo "NOTE: $sys_python is not Python $pyabi (spora._C's); using $venv_python isolated instead"
    sys_python=$venv_python
  fi
  numpy_dirs=()
  if "$sys_python" -I -c "import numpy" 2>/dev/null; then
    py=("$sys_python" -I -B)
    echo "numpy: $sys_python's own ($("$sys_python" -I -c "import numpy; print(numpy.__file__)"))"
  else
    [ -n "$venv_python" ] || fail "$sys_python has no numpy (python3-numpy) and no venv python was given"
    site=$("$venv_python" -c "import numpy, os; print(os.path.dirname(os.path.dirname(numpy.__file__)))") ||
      fail "neither $sys_python nor $venv_python has numpy (packaging/install-deps.sh puts it in the venv)"
    mkdir "$tmp/numpy-only"
    for d in "$site"/numpy "$site"/numpy.libs; do
      [ ! -e "$d" ] || ln -s "$d" "$tmp/numpy-only/"
    done
    numpy_dirs=("$tmp/numpy-only")
    py=("$sys_python" -I -S -B)
    echo "numpy: $sys_python has none (python3-numpy not installed); using only the venv's, from $site"
  fi
  asan_run "${py[@]}" "$src/tests/integration/sdk/deb_python_check.py" \
    "$root" "$root/usr/$pydist" "${numpy_dirs[@]}" || fail "python3-spora from the root does not work"
  ! find "$root/usr/$pydist" -name '*.pyc' | grep -q . || fail "importing wrote bytecode into the root"

  step "python3-spora: a plugin directory that does not exist is named, the root's plugins still load"
  SPORA_PLUGIN_PATH=$tmp/no-such-dir asan_run "${py[@]}" -c '
import sys
sys.path[:0] = sys.argv[1:]
import spora
print(list(spora.devices()))' "$root/usr/$pydist" "${numpy_dirs[@]}" >"$tmp/py-nodir.out" 2>"$tmp/py-nodir.err" || {
    cat "$tmp/py-nodir.out" "$tmp/py-nodir.err"
    fail "import spora with a missing SPORA_PLUGIN_PATH directory failed"
  }
  cat "$tmp/py-nodir.err" "$tmp/py-nodir.out"
  grep -qF "plugin path '$tmp/no-such-dir' (from SPORA_PLUGIN_PATH) does not exist" "$tmp/py-nodir.err" ||
    fail "import spora does not report the missing SPORA_PLUGIN_PATH directory"
  grep -qF "'cpu'" "$tmp/py-nodir.out" || fail "the root's cpu plugin is not found when SPORA_PLUGIN_PATH is missing"
fi

echo "sdk deb test: all checks passed"
