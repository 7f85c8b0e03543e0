# SPORA_SANITIZE: build everything (core, plugins, tools, tests, the Python
# extension) under AddressSanitizer and/or UndefinedBehaviorSanitizer, so
# that the ctest suite is a sanitizer run (docs/security.md). Accepts
# "address", "undefined" or "address,undefined"; empty (the default) is a
# normal build. Use a build directory of its own:
#
#   cmake -S . -B build-asan -G Ninja -DSPORA_SANITIZE=address,undefined
#
# UBSan findings are not recoverable here (-fno-sanitize-recover=undefined):
# a report ends the process with a failing status, so a test that triggers
# one fails instead of passing with a line in its log.
set(SPORA_SANITIZE "" CACHE STRING "sanitizers for the whole build: address, undefined or address,undefined (empty: none)")

set(SPORA_SANITIZE_ADDRESS OFF)
set(SPORA_SANITIZE_UNDEFINED OFF)
set(SPORA_SANITIZE_RUNTIME "")
# What the tests need from a sanitizer build, for the CMakeLists that
# register them; both are no-ops in a normal build.
#  SPORA_TEST_TIMEOUT_FACTOR: multiplies the TIMEOUT of tests whose normal
#    limit a sanitized build can exceed (ASan makes each process start and
#    each allocation dearer; checkpoint_kill starts 1,000 processes).
#  SPORA_SANITIZE_MPI_TEST_PROPERTIES: test properties for the tests whose
#    process initialises Open MPI (the mpi collective plugin, reached by
#    spora_plugin_describe or a collective). Open MPI keeps allocations past
#    MPI_Finalize (PMIx, hwloc's PCI names) and dlcloses its components
#    there, before LeakSanitizer reports: with the default frame-pointer
#    unwinder their stacks end in those unloaded components ("<unknown
#    module>", google/sanitizers#89) and no suppression by library can match.
#    The DWARF unwinder (fast_unwind_on_malloc=0) records the whole stack,
#    through libmpi/libopen-pal/libopen-rte, which stay loaded, so
#    tests/lsan.supp matches them by library; it makes every allocation
#    about 15 times dearer, so only these tests get it.
#  SPORA_SANITIZE_MPI_ASAN_OPTIONS: the same options alone, for a test
#    script to give only the one command of its test that initialises Open
#    MPI (check_every_device.sh: `spora devices`, not the plugin checks).
set(SPORA_TEST_TIMEOUT_FACTOR 1)
set(SPORA_SANITIZE_MPI_TEST_PROPERTIES)
set(SPORA_SANITIZE_MPI_ASAN_OPTIONS "")
if(NOT SPORA_SANITIZE STREQUAL "")
  string(REPLACE "," ";" _spora_san_list "${SPORA_SANITIZE}")
  foreach(s ${_spora_san_list})
    string(STRIP "${s}" s)
    if(s STREQUAL "address")
      set(SPORA_SANITIZE_ADDRESS ON)
    elseif(s STREQUAL "undefined")
      set(SPORA_SANITIZE_UNDEFINED ON)
    else()
      message(FATAL_ERROR "SPORA_SANITIZE=${SPORA_SANITIZE}: '${s}' is not one of address, undefined")
    endif()
  endforeach()
  set(_spora_san)
  if(SPORA_SANITIZE_ADDRESS)
    list(APPEND _spora_san address)
  endif()
  if(SPORA_SANITIZE_UNDEFINED)
    list(APPEND _spora_san undefined)
  endif()
  string(REPLACE ";" "," _spora_san "${_spora_san}")
  set(_spora_san_flags -fsanitize=${_spora_san} -fno-omit-frame-pointer)
  if(SPORA_SANITIZE_UNDEFINED)
    list(APPEND _spora_san_flags -fno-sanitize-recover=undefined)
  endif()
  # C and C++ only: nvcc and hipcc take none of these.
  foreach(f ${_spora_san_flags})
    add_compile_options($<$<COMPILE_LANGUAGE:C,CXX>:${f}>)
  endforeach()
  add_link_options(${_spora_san_flags})

  # A Python interpreter is not built with ASan, so the runtime must be
  # loaded first when it imports the extension or dlopens libspora.so
  # (tests/ctest_env.cmake sets LD_PRELOAD from this).
  if(SPORA_SANITIZE_ADDRESS)
    if(CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
      set(_spora_asan_lib libclang_rt.asan-${CMAKE_SYSTEM_PROCESSOR}.so)
    else()
      set(_spora_asan_lib libasan.so)
    endif()
    execute_process(COMMAND ${CMAKE_CXX_COMPILER} -print-file-name=${_spora_asan_lib}
      OUTPUT_VARIABLE SPORA_SANITIZE_RUNTIME OUTPUT_STRIP_TRAILING_WHITESPACE)
    if(NOT IS_ABSOLUTE "${SPORA_SANITIZE_RUNTIME}" OR NOT EXISTS "${SPORA_SANITIZE_RUNTIME}")
      message(FATAL_ERROR "SPORA_SANITIZE=${SPORA_SANITIZE}: ${CMAKE_CXX_COMPILER} -print-file-name=${_spora_asan_lib} "
        "found no ASan runtime (got '${SPORA_SANITIZE_RUNTIME}'); the Python tests need it preloaded")
    endif()
    # libstdc++ with it: ASan looks up the real __cxa_throw when it starts;
    # in an interpreter that loads libstdc++ only later (with the extension)
    # it finds none, and the first C++ throw then fails ASan's CHECK
    # ("real___cxa_throw != 0") instead of throwing.
    execute_process(COMMAND ${CMAKE_CXX_COMPILER} -print-file-name=libstdc++.so.6
      OUTPUT_VARIABLE _spora_stdcxx OUTPUT_STRIP_TRAILING_WHITESPACE)
    if(IS_ABSOLUTE "${_spora_stdcxx}" AND EXISTS "${_spora_stdcxx}")
      set(SPORA_SANITIZE_RUNTIME "${SPORA_SANITIZE_RUNTIME}:${_spora_stdcxx}")
    endif()
  endif()

  set(SPORA_TEST_TIMEOUT_FACTOR 3)
  if(SPORA_SANITIZE_ADDRESS)
    set(SPORA_SANITIZE_MPI_ASAN_OPTIONS "fast_unwind_on_malloc=0")
    set(SPORA_SANITIZE_MPI_TEST_PROPERTIES ENVIRONMENT_MODIFICATION "ASAN_OPTIONS=string_append::${SPORA_SANITIZE_MPI_ASAN_OPTIONS}")
  endif()

  # The GPU plugins' device code is compiled by nvcc/hipcc, which the flags
  # above skip, and their tests need a GPU; a sanitizer build leaves them out.
  # Normal variables: they shadow the cache for this configure only.
  set(SPORA_WITH_CUDA OFF)
  set(SPORA_WITH_ROCM OFF)
  message(STATUS "Spora: sanitizer build (-fsanitize=${_spora_san}); the CUDA and ROCm plugins are not built in it")
endif()
