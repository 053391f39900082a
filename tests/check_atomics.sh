#!/bin/sh
# SPDX-License-Identifier: MIT
# One memory-ordering vocabulary for words shared between threads, processes and hosts: C11
# <stdatomic.h> with an explicit order (atomic_load_explicit(), atomic_store_explicit(),
# atomic_fetch_*_explicit(), atomic_exchange_explicit(), atomic_compare_exchange_*_explicit(),
# atomic_thread_fence()). Fails naming each line that uses a GCC __atomic_* or __sync_*
# builtin, or a default-order (seq_cst) call: atomic_load(), atomic_store(), atomic_exchange(),
# atomic_fetch_add() and the other RMWs, atomic_compare_exchange_strong/weak(),
# atomic_flag_test_and_set(), atomic_flag_clear(). Comments and string literals are not looked
# at. What it cannot see: a plain access (x++, x = v) to an _Atomic object, which is seq_cst
# too; nor whether each order carries its comment (its partner, or why relaxed is enough).
# Usage: check_atomics.sh [file or directory...] (default: every .c and .h under preload/,
# transport/, ntb/, util/ and tools/; tests/ may keep what they need).
cd "$(dirname "$0")/.." || exit 1
CC=${CC:-cc}

[ $# -eq 0 ] && set -- preload transport ntb util tools
files=$(for a in "$@"; do
	if [ -d "$a" ]; then find "$a" -name '*.[ch]' | sort; elif [ -f "$a" ]; then echo "$a"; else
		echo "atomics: no such file or directory: $a" >&2; echo "//missing"; fi
done)
case "$files" in *//missing*) exit 1 ;; esac

# FILE without comments (the preprocessor's, macros left alone) and with empty string
# literals, each line prefixed "FILE:LINE:".
code() {
	"$CC" -fpreprocessed -dD -E "$1" 2>/dev/null |
		awk -v f="$1" '/^# [0-9]+ "/ { ln = $2 - 1; next } { ln++; print f ":" ln ":" $0 }' |
		sed -E 's/"([^"\\]|\\.)*"/""/g'
}

dflt='atomic_(load|store|exchange|fetch_(add|sub|or|xor|and)|compare_exchange_(strong|weak)|flag_test_and_set|flag_clear)'
bad=$(for f in $files; do
	code "$f" | grep -E "^[^:]*:[0-9]+:(.*[^A-Za-z0-9_])?__(atomic|sync)_[A-Za-z0-9_]+" |
		sed 's/^/a GCC builtin: /'
	code "$f" | grep -E "^[^:]*:[0-9]+:(.*[^A-Za-z0-9_.>])?$dflt[[:space:]]*\\(" |
		sed 's/^/a default-order (seq_cst) call: /'
done)
if [ -n "$bad" ]; then
	printf 'atomics: %s\n' "$bad" | sed '2,$s/^/atomics: /'
	echo "atomics: use <stdatomic.h>'s *_explicit calls with a named order" \
		"(memory_order_seq_cst, with a comment, where it is really needed)"
	exit 1
fi
echo "atomics: ok"
