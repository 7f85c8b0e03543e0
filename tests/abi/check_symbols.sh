#!/usr/bin/env bash
# Exported dynamic symbols of libspora.so must equal the golden list: only
# spora_* names, and no accidental additions or removals. To accept an
# intended change: run with --update.
set -euo pipefail
lib=$1
golden=$2
actual=$(nm -D --defined-only "$lib" | awk '{print $3}' | sed 's/@.*//' | sort -u)
if [ "${3:-}" = "--update" ]; then
  echo "$actual" > "$golden"
  echo "updated $golden"
  exit 0
fi
bad=$(echo "$actual" | grep -v '^spora_' || true)
if [ -n "$bad" ]; then
  echo "libspora.so exports symbols outside spora_*:"
  echo "$bad"
  exit 1
fi
if ! diff -u "$golden" <(echo "$actual"); then
  echo "exported symbols differ from $golden (run tests/abi/check_symbols.sh <lib> <golden> --update if intended)"
  exit 1
fi
echo "libspora.so exports $(echo "$actual" | wc -l) symbols, all spora_*, matching the golden list"
