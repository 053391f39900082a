#!/bin/sh
# SPDX-License-Identifier: MIT
# Generate the linker version script (export map) from the X-macro list of intercepted calls:
# every PL_CALL(name, ...) line exports `name`; nothing else is exported.
echo "{"
echo "  global:"
sed -n 's/^[[:space:]]*PL_CALL([[:space:]]*\([A-Za-z0-9_]*\).*/    \1;/p' "$1"
echo "  local: *;"
echo "};"
