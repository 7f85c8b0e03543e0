#!/usr/bin/env bash
# Layering: plugins include only plugin-api/ and the SDK's header-only helpers
# (sdk/include/spora/sdk/, e.g. spora/sdk/plugin_table.h), besides their own
# and third-party headers; frontends, examples and benches include only
# core/include/.
set -euo pipefail
root=$1
fail=0
# Plugins must not see the core or its public API.
if grep -rnE '#\s*include\s*[<"](\.\./)*(core/|spora/spora\.h|spora/spora\.hpp|runtime/|ops/|ir/|abi/|support/)' \
    "$root/plugins" "$root/tests/loader/plugins" "$root/sdk/template" 2>/dev/null; then
  echo "error: a plugin includes core headers; plugins may include only plugin-api/ (spora/plugin.h) and spora/sdk/"
  fail=1
fi
# Frontends (and other API consumers) must not reach into core/src.
if grep -rnE '#\s*include\s*[<"](\.\./)*(core/src/|src/|runtime/|ops/|ir/|abi/|support/)' \
    "$root/frontends" "$root/examples" "$root/bench" 2>/dev/null; then
  echo "error: a frontend includes core internals; frontends may include only core/include/"
  fail=1
fi
# The conformance kit's test plugins are plugins too.
if grep -rnE '#\s*include\s*[<"](\.\./)*(core/|spora/spora\.h|spora/spora\.hpp|runtime/|ops/|ir/|abi/|support/)' \
    "$root/tests/conformance/plugins" 2>/dev/null; then
  echo "error: a conformance test plugin includes core headers; plugins may include only plugin-api/"
  fail=1
fi
# The conformance kit (sdk/conformance) is a host of its own and an API
# consumer: spora/plugin.h and core/include/ (spora.h, spora.hpp), never core
# internals.
if grep -rnE '#\s*include\s*[<"](\.\./)*(core/src/|src/|runtime/|ops/|ir/|abi/|support/|sched/|passes/|autodiff/)' \
    "$root/sdk/conformance" 2>/dev/null; then
  echo "error: the conformance kit includes core internals; it may include only spora/plugin.h and core/include/"
  fail=1
fi
# The plugin API header must stay self-contained C.
if grep -nE '#\s*include' "$root/plugin-api/include/spora/plugin.h" | grep -vE '<(stddef|stdint)\.h>'; then
  echo "error: plugin.h includes something beyond <stddef.h> and <stdint.h>"
  fail=1
fi
# The SDK's header-only helpers sit on plugin.h and the standard library only.
if grep -rnE '#\s*include' "$root/sdk/include" | grep -vE '<(spora/plugin\.h|spora/sdk/[a-z_]+\.h|[a-z_]+(\.h)?)>'; then
  echo "error: a header in sdk/include includes something beyond spora/plugin.h and the standard library"
  fail=1
fi
# Core's own layers: support <- ir <- ops <- {autodiff, passes} <- runtime <-
# sched <- {io, data} <- abi, and no core -> plugins include.
python3 "$root/tests/abi/check_core_layers.py" "$root" || fail=1
[ $fail = 0 ] && echo "layering ok: plugins see only plugin-api/, frontends only core/include/ (and the conformance kit), the kit only plugin-api/ and core/include/"
exit $fail
