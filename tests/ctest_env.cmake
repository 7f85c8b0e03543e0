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

# Issue 11: the sim device runs behind the host, as a real GPU does. No item
# queued on a sim stream starts earlier than SPORA_SIM_LAG_US microseconds
# after it was enqueued (an earliest start, not a per-item cost: a long queue
# is not slowed down, only each wait for the device), so a host that reads a
# result without waiting, or overwrites a pinned source before the copy ran,
# gets stale bytes in every test. The value keeps the suite's run time within
# about 10% of what it is without it (measured: docs/plugin-guide.md). Set
# SPORA_SIM_LAG_US=0 before running ctest to switch it off.
if(NOT DEFINED ENV{SPORA_SIM_LAG_US})
  set(ENV{SPORA_SIM_LAG_US} 200)
endif()
