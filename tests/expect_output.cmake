# Runs a command and passes only when BOTH its exit status equals
# EXPECT_EXIT and its output (stdout and stderr together) matches the regex
# EXPECT_OUTPUT. ctest's PASS_REGULAR_EXPRESSION alone ignores the exit
# status, so a program that prints the expected message and then crashes
# would pass; a crash (a signal) never equals a number here.
#
#   cmake -DEXPECT_EXIT=<n> -DEXPECT_OUTPUT=<regex> -P expect_output.cmake -- <command> [args...]
cmake_minimum_required(VERSION 3.16)
if(NOT DEFINED EXPECT_EXIT OR NOT DEFINED EXPECT_OUTPUT)
  message(FATAL_ERROR "expect_output.cmake: set -DEXPECT_EXIT=<n> and -DEXPECT_OUTPUT=<regex>")
endif()
set(cmd)
set(after_dashes FALSE)
math(EXPR last "${CMAKE_ARGC} - 1")
foreach(i RANGE ${last})
  if(after_dashes)
    # A ';' inside an argument must not split it into two.
    string(REPLACE ";" "\\;" arg "${CMAKE_ARGV${i}}")
    list(APPEND cmd "${arg}")
  elseif("${CMAKE_ARGV${i}}" STREQUAL "--")
    set(after_dashes TRUE)
  endif()
endforeach()
if(NOT cmd)
  message(FATAL_ERROR "expect_output.cmake: no command after --")
endif()

execute_process(COMMAND ${cmd} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
message("${out}")
list(JOIN cmd " " cmd)
# The reasons go out as plain messages: FATAL_ERROR text is re-wrapped.
if(NOT "${rc}" STREQUAL "${EXPECT_EXIT}")
  message("expect_output.cmake: '${cmd}' ended with '${rc}', expected exit status ${EXPECT_EXIT}")
  message(FATAL_ERROR "wrong exit status")
endif()
if(NOT "${out}" MATCHES "${EXPECT_OUTPUT}")
  message("expect_output.cmake: the output of '${cmd}' does not match '${EXPECT_OUTPUT}'")
  message(FATAL_ERROR "wrong output")
endif()
