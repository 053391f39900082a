#!/bin/sh
# SPDX-License-Identifier: MIT
# Dependencies point one way (doc/design.md §2): preload → transport → ntb → util, preload → conf
# → util, glue (conf → ntb/transport parameters) → transport/ntb/conf/util, tools → anything
# but preload. Fails naming each #include that breaks the rule.
cd "$(dirname "$0")/.." || exit 1
bad=0
check() { # dir allowed-dirs...
	dir=$1; shift
	for f in $dir/*.c $dir/*.h; do
		[ -e "$f" ] || continue
		grep -nE '^#include "[a-z_]+/' "$f" | while IFS= read -r line; do
			inc=$(printf '%s' "$line" | sed -E 's/.*#include "([a-z_]+)\/.*/\1/')
			ok=0
			for a in "$dir" "$@"; do [ "$inc" = "$a" ] && ok=1; done
			[ $ok = 1 ] || { echo "layering: $f:${line%%:*} includes $inc/ (not allowed from $dir/)"; echo x; }
		done
	done
}
out=$( { check util; check ntb util; check ntb/backend ntb util; check conf util; check transport ntb util;
	 check glue transport ntb conf util;
	 check preload glue transport ntb conf util; check tools glue transport ntb conf util; } )
if printf '%s' "$out" | grep -q '^x$'; then
	printf '%s\n' "$out" | grep -v '^x$'
	exit 1
fi
echo "layering: ok"
