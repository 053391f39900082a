#!/bin/sh
# SPDX-License-Identifier: MIT
# Generate the linker version script (export map) from the X-macro list of intercepted calls:
# every PL_CALL(name, ...) line exports `name`, and so do the entry points that make an
# io_uring (preload/pl_uring.c); nothing else is exported.
echo "{"
echo "  global:"
sed -n 's/^[[:space:]]*PL_CALL([[:space:]]*\([A-Za-z0-9_]*\).*/    \1;/p' "$1"
# Not wrapped calls of the table: where a process makes an io_uring (preload/pl_uring.c)
for n in syscall io_uring_setup io_uring_queue_init io_uring_queue_init_params \
	io_uring_queue_init_mem; do
	echo "    $n;"
done
echo "  local: *;"
echo "};"
