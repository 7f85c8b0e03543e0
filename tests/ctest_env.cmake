# Read by ctest (TEST_INCLUDE_FILES of tests/) before any test runs; the
# environment set here is inherited by every test process ctest starts.
#
# Issue 4: every graph the suite builds must survive a JSON round trip. With
# this set, the core re-serialises each graph at compile, run_eager, optimize
# and grad and fails on any difference (ir::check_json_roundtrip). Set
# SPORA_CHECK_JSON_ROUNDTRIP=0 before running ctest to switch it off.
if(NOT DEFINED ENV{SPORA_CHECK_JSON_ROUNDTRIP})
  set(ENV{SPORA_CHECK_JSON_ROUNDTRIP} 1)
endif()
