#!/usr/bin/env bash
# Builds libjpeg-turbo and libpng from their source trees with the fuzz
# build's instrumentation (-fsanitize=fuzzer-no-link,address,undefined) as
# static libraries, and points the fuzz build directory at them, so that
# fuzz_image gets coverage feedback from inside the decoders (linked against
# the system's shared libraries it steers by Spora's side only):
#
#   tests/fuzz/image_libs.sh LIBJPEG_TURBO_SRC LIBPNG_SRC
#   tests/fuzz/run.sh image 1800
#
# The sources are the unpacked upstream releases the system libraries come
# from (Debian 12: libjpeg-turbo 2.1.5, libpng 1.6.39; `apt-get source
# libjpeg-turbo libpng1.6` with deb-src lines, or the projects' tarballs).
# SIMD is off in libjpeg-turbo: its assembly is not instrumented, and the C
# paths are what a sanitizer can see. To go back to the system libraries,
# configure the build directory with -DSPORA_FUZZ_IMAGE_LIBS= (empty).
# Environment: SPORA_FUZZ_BUILD (default build-fuzz), CC (default clang).
set -euo pipefail
if [ $# -ne 2 ] || [ ! -f "$1/jpeglib.h" ] || [ ! -f "$2/png.h" ]; then
  echo "usage: $0 LIBJPEG_TURBO_SRC LIBPNG_SRC (unpacked source trees: jpeglib.h, png.h at their tops)" >&2
  exit 2
fi
jpeg_src=$(cd "$1" && pwd) png_src=$(cd "$2" && pwd)
src=$(cd "$(dirname "$0")/../.." && pwd)
build=${SPORA_FUZZ_BUILD:-$src/build-fuzz}
cc=${CC:-clang}
prefix=$build/image-libs
flags="-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer -gline-tables-only -O1"
gen=()
command -v ninja >/dev/null && gen=(-G Ninja)

cmake -S "$jpeg_src" -B "$prefix/build-jpeg" "${gen[@]}" -DCMAKE_C_COMPILER="$cc" -DCMAKE_C_FLAGS="$flags" \
  -DCMAKE_BUILD_TYPE=None -DCMAKE_INSTALL_PREFIX="$prefix" -DCMAKE_INSTALL_LIBDIR=lib -DENABLE_SHARED=OFF \
  -DENABLE_STATIC=ON -DWITH_SIMD=OFF -DWITH_TURBOJPEG=OFF -DWITH_JAVA=OFF >/dev/null
cmake --build "$prefix/build-jpeg" -j"${SPORA_FUZZ_JOBS:-2}" --target jpeg-static
# Only the library and its headers (the tools would need the sanitizer
# runtime at link time, and nothing here uses them).
install -d "$prefix/include" "$prefix/lib"
cp "$prefix/build-jpeg/libjpeg.a" "$prefix/lib/"
cp "$jpeg_src/jpeglib.h" "$jpeg_src/jmorecfg.h" "$jpeg_src/jerror.h" "$prefix/build-jpeg/jconfig.h" "$prefix/include/"

cmake -S "$png_src" -B "$prefix/build-png" "${gen[@]}" -DCMAKE_C_COMPILER="$cc" -DCMAKE_C_FLAGS="$flags" \
  -DCMAKE_BUILD_TYPE=None -DPNG_SHARED=OFF -DPNG_STATIC=ON -DPNG_TESTS=OFF -DPNG_EXECUTABLES=OFF \
  -DPNG_HARDWARE_OPTIMIZATIONS=OFF >/dev/null
cmake --build "$prefix/build-png" -j"${SPORA_FUZZ_JOBS:-2}" --target png_static
cp "$prefix/build-png/libpng16.a" "$prefix/lib/"
cp "$png_src/png.h" "$png_src/pngconf.h" "$prefix/build-png/pnglibconf.h" "$prefix/include/"

# fuzz_image links these before the core's own libraries, so the core's
# objects, compiled against the system's headers, take the instrumented
# copies (hence the same versions: checked here against /usr/include).
for h in jconfig.h:LIBJPEG_TURBO_VERSION png.h:PNG_LIBPNG_VER_STRING; do
  file=${h%%:*} macro=${h#*:}
  sys=$(grep -h "define $macro" "/usr/include/$file" "/usr/include/$(gcc -print-multiarch 2>/dev/null)/jconfig.h" 2>/dev/null | head -1 | tr -s " \t" "  " || true)
  ours=$(grep -h "define $macro" "$prefix/include/$file" "$prefix/include/jconfig.h" 2>/dev/null | head -1 | tr -s " \t" "  " || true)
  if [ -n "$sys" ] && [ "$sys" != "$ours" ]; then
    echo "$0: the system's $file has '$sys', the sources '$ours': use the sources of the installed version" >&2
    exit 1
  fi
done
if [ ! -f "$build/build.ninja" ] && [ ! -f "$build/Makefile" ]; then
  cmake -S "$src" -B "$build" "${gen[@]}" -DSPORA_FUZZ=ON -DCMAKE_CXX_COMPILER="${CXX:-clang++}" \
    -DCMAKE_C_COMPILER="$cc" -DSPORA_WITH_TESTS=OFF >/dev/null
fi
cmake "$build" -DSPORA_FUZZ_IMAGE_LIBS="$prefix/lib" >/dev/null
echo "$0: fuzz_image in $build now links the instrumented $prefix/lib/libjpeg.a and libpng16.a"
