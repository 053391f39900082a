#!/bin/sh
# SPDX-License-Identifier: MIT
# tests/check_rawsys.sh catches a call it must catch and passes what it must pass: a file with
# an interposed call, a syscall() for an interposed name, and the same names in comments,
# strings, member calls and util/rawsys.h calls.
cd "$(dirname "$0")/.." || exit 1
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
cat >"$tmp/probe.c" <<'SRC'
/* close(fd) in a comment */
static int probe(struct ops *o, int fd)
{
	int v;
	socklen_t l = sizeof(v);

	o->close(fd); /* a member call */
	raw_close(fd);
	log_str("getsockopt(fd)");
	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &v, &l) < 0)
		return -1;
	return (int)syscall(SYS_shutdown, fd, SHUT_WR);
}
SRC
out=$(sh tests/check_rawsys.sh "$tmp/probe.c")
rc=$?
fail=0
[ $rc -ne 0 ] || { echo "check_rawsys_test: passed a file that calls getsockopt()"; fail=1; }
echo "$out" | grep -q "probe.c:10: .*getsockopt" ||
	{ echo "check_rawsys_test: getsockopt() on line 10 not named"; fail=1; }
echo "$out" | grep -q "probe.c:12: SYS_shutdown" ||
	{ echo "check_rawsys_test: syscall(SYS_shutdown) on line 12 not named"; fail=1; }
n=$(echo "$out" | grep -c "probe.c:")
[ "$n" -eq 2 ] || { echo "check_rawsys_test: $n lines named, not 2:"; echo "$out"; fail=1; }
[ $fail -eq 0 ] && echo "check_rawsys_test: ok"
exit $fail
