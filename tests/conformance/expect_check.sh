#!/usr/bin/env bash
# Runs a command and checks its exit status and output.
#   expect_check.sh <exit status> <regex>... -- <command> [args...]
# Every regex (grep -E) must match the combined stdout and stderr.
set -uo pipefail
want=$1
shift
patterns=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
  patterns+=("$1")
  shift
done
[ "${1:-}" = "--" ] || { echo "usage: expect_check.sh <status> <regex>... -- <command>"; exit 2; }
shift
out=$("$@" 2>&1)
got=$?
echo "$out"
echo "---- exit status $got (expected $want)"
fail=0
if [ "$got" != "$want" ]; then
  echo "error: exit status $got, expected $want"
  fail=1
fi
for p in "${patterns[@]}"; do
  if ! grep -qE -- "$p" <<<"$out"; then
    echo "error: output does not match /$p/"
    fail=1
  fi
done
exit $fail
