# Checks expect_output.cmake itself: it passes a command that prints the
# expected text and exits as expected, and fails one that prints it and then
# crashes (SIGSEGV, SIGABRT), exits with another status, or prints something
# else. Each case runs the wrapper as ctest would and checks its verdict and
# its reason.
#   cmake -DSH=<sh> -P expect_output_test.cmake
cmake_minimum_required(VERSION 3.16)
set(wrapper ${CMAKE_CURRENT_LIST_DIR}/expect_output.cmake)
set(msg "input 0 ('x', f32) needs 60 bytes")
set(re "input 0 \\('x', f32\\) needs 60 bytes")
set(failures 0)

# run_case(<name> <exit expected by the wrapper> <want: pass | text of the
# wrapper's reason> <shell script>)
function(run_case name expect_exit want script)
  execute_process(COMMAND ${CMAKE_COMMAND} -DEXPECT_EXIT=${expect_exit} "-DEXPECT_OUTPUT=${re}" -P ${wrapper}
                          -- ${SH} -c "${script}"
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(want STREQUAL "pass")
    set(ok FALSE)
    if(rc EQUAL 0)
      set(ok TRUE)
    endif()
  else()
    set(ok FALSE)
    string(FIND "${out}" "${want}" at)
    if(NOT rc EQUAL 0 AND NOT at EQUAL -1)
      set(ok TRUE)
    endif()
  endif()
  if(ok)
    message("ok: ${name}")
  else()
    message("FAILED: ${name}: the wrapper ended with ${rc}, wanted ${want}:\n${out}")
    math(EXPR n "${failures} + 1")
    set(failures ${n} PARENT_SCOPE)
  endif()
endfunction()

run_case("the message, exit 1 as expected" 1 pass "echo \"${msg}\" >&2; exit 1")
run_case("the message, exit 0 as expected" 0 pass "echo \"${msg}\"; exit 0")
run_case("the message, then SIGSEGV" 1 "ended with 'Segmentation fault'" "echo \"${msg}\" >&2; kill -SEGV $$")
run_case("the message, then abort()" 0 "expected exit status 0" "echo \"${msg}\"; kill -ABRT $$")
run_case("the message, then exit 3" 0 "ended with '3', expected exit status 0" "echo \"${msg}\"; exit 3")
run_case("another message, exit 1 as expected" 1 "does not match" "echo 'input 1 is fine' >&2; exit 1")
run_case("no message, exit 0" 0 "does not match" "exit 0")
if(failures)
  message(FATAL_ERROR "${failures} case(s) of expect_output.cmake failed")
endif()
