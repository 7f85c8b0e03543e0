#!/usr/bin/env bash
# Runs the conformance kit (`spora plugin check`) on every device plugin
# behind a device that `spora devices` lists, so a plugin found at run time
# (SPORA_PLUGIN_PATH, the plugin directory) is checked against cpu without
# anyone registering a test for it. This is the device-vs-cpu half of the
# backend tests; tests/backend keeps cpu vs numpy and the gradient checks.
#   check_every_device.sh <path to spora> [plugin check options...]
# The options (e.g. --ops add,mul) go to every plugin's check.
# cpu is the reference: checking it against itself only repeats its kernels,
# so it gets --quick (the ABI and runtime parts in full, one case per op x
# dtype). Exit status 1 when any plugin fails, or when no device is listed.
set -uo pipefail
spora=${1:?usage: check_every_device.sh <path to spora> [plugin check options...]}
shift

# Under SPORA_SANITIZE, listing the plugins initialises Open MPI, whose
# leaks LeakSanitizer can attribute only with these ASan options
# (cmake/SporaSanitize.cmake); the plugin checks below run without them.
listing=$(ASAN_OPTIONS="${ASAN_OPTIONS:-}${SPORA_SANITIZE_MPI_ASAN_OPTIONS:+:$SPORA_SANITIZE_MPI_ASAN_OPTIONS}" "$spora" devices 2>&1)
status=$?
echo "$listing"
if [ $status -ne 0 ]; then
  echo "error: 'spora devices' exited with $status"
  exit 1
fi

# plugins:            "  <name> <kind> ok|UNAVAILABLE <path>"
# devices:            "  <name>:<index>" then "    plugin <name>" among its properties
declare -A path_of
plugins=()
section=
while IFS= read -r line; do
  case "$line" in
    plugins:) section=plugins; continue ;;
    devices:) section=devices; continue ;;
  esac
  read -r a b c d <<<"$line"
  if [ "$section" = plugins ] && [ "$b" = device ] && [ "$c" = ok ]; then
    path_of[$a]=$d
  elif [ "$section" = devices ] && [ "$a" = plugin ] && [ -n "$b" ]; then
    # One check per plugin: the kit checks the plugin's first device.
    case " ${plugins[*]-} " in *" $b "*) ;; *) plugins+=("$b") ;; esac
  fi
done <<<"$listing"

if [ ${#plugins[@]} -eq 0 ]; then
  echo "error: 'spora devices' lists no device (cpu at least is expected)"
  exit 1
fi

failed=()
for name in "${plugins[@]}"; do
  target=${path_of[$name]:-}
  if [ -z "$target" ]; then
    echo "error: device plugin '$name' has a device but no 'ok' line in the plugin list"
    failed+=("$name")
    continue
  fi
  args=("$@")
  [ "$name" = cpu ] && args+=(--quick)
  echo
  echo "==== spora plugin check $target ${args[*]-}"
  out=$("$spora" plugin check "$target" "${args[@]}" 2>&1)
  rc=$?
  echo "$out"
  if [ $rc -ne 0 ] || ! grep -q "^$name: CERTIFIED" <<<"$out"; then
    echo "error: plugin '$name' is not certified (exit status $rc)"
    failed+=("$name")
  fi
done

echo
echo "checked device plugins: ${plugins[*]}"
if [ ${#failed[@]} -ne 0 ]; then
  echo "FAILED: ${failed[*]}"
  exit 1
fi
echo "every device plugin certified against cpu"
