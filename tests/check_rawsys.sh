#!/bin/sh
# SPDX-License-Identifier: MIT
# Code below preload/ (transport/, ntb/, util/) runs inside programs whose libc socket calls the
# preload library interposes (preload/intercept.def); it reaches the kernel through util/rawsys.h
# only. Fails naming each line of transport/, ntb/ or util/ that calls an interposed name
# (close(), getsockopt(), ...) or makes its system call with syscall(SYS_...) outside
# util/rawsys.h. Comments and string literals are not looked at.
# Usage: check_rawsys.sh [file...] (default: every .c and .h under transport/, ntb/, util/).
cd "$(dirname "$0")/.." || exit 1
CC=${CC:-cc}

# syscall(SYS_x) for an interposed x, left in files another change is rewriting, as
# "file:name" (to go once they use util/rawsys.h); a new call of another name still fails.
allow="transport/tp_fo_watch.c:epoll_create1 transport/tp_fo_watch.c:epoll_ctl
transport/tp_fo_watch.c:epoll_pwait"

names=$(sed -nE 's/^PL_CALL\(([a-z_0-9]+),.*/\1/p' preload/intercept.def | paste -sd'|' -)
[ -n "$names" ] || { echo "rawsys: no names in preload/intercept.def"; exit 1; }

if [ $# -eq 0 ]; then
	set -- $(ls transport/*.[ch] ntb/*.[ch] ntb/backend/*.[ch] util/*.[ch] 2>/dev/null)
fi

# FILE without comments (the preprocessor's, macros left alone) and with empty string
# literals, each line prefixed "FILE:LINE:".
code() {
	"$CC" -fpreprocessed -dD -E "$1" 2>/dev/null |
		awk -v f="$1" '/^# [0-9]+ "/ { ln = $2 - 1; next } { ln++; print f ":" ln ":" $0 }' |
		sed -E 's/"([^"\\]|\\.)*"/""/g'
}

bad=$(for f in "$@"; do
	[ "$f" = util/rawsys.h ] && continue
	code "$f" | grep -E "^[^:]*:[0-9]+:(.*[^A-Za-z0-9_.>])?($names)[[:space:]]*\\(" |
		sed 's/^/calls the interposed wrapper: /'
	code "$f" | grep -oE "^[^:]*:[0-9]+:|SYS_($names)\\b" | awk -v f="$f" -v allow="$allow" '
		BEGIN { n = split(allow, a, /[ \n]+/); for (i = 1; i <= n; i++) ok[a[i]] = 1 }
		/^[^:]*:[0-9]+:$/ { where = $0; next }
		{ name = substr($0, 5)
		  if (!ok[f ":" name]) print "syscall() outside util/rawsys.h: " where " SYS_" name }'
done)
if [ -n "$bad" ]; then
	printf 'rawsys: %s\n' "$bad" | sed '2,$s/^/rawsys: /'
	echo "rawsys: below preload/, call the kernel through util/rawsys.h (raw_close(), ...)"
	exit 1
fi
echo "rawsys: ok"
