#!/bin/sh
# SPDX-License-Identifier: MIT
# The ntbsock command: check (valid, syntax error, unknown key), run (LD_PRELOAD, NTBSOCK_CONF,
# exit codes), --help/--version/help, unknown commands, and `make install DESTDIR=...` whose
# installed `ntbsock run` finds the installed library.
cd "$(dirname "$0")/../.." || exit 1
BUILD=${BUILD:-build}
case $BUILD in /*) ;; *) BUILD=$(pwd)/$BUILD ;; esac
NTBSOCK=$BUILD/ntbsock
LIB=$BUILD/libntbsock.so
tmp=$(mktemp -d /tmp/ntbsock-test-cli-XXXXXX) || exit 1
trap 'rm -rf "$tmp"' EXIT
fails=0

fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
ok() { echo "ok: $*"; }

# expect_rc WANT DESCRIPTION COMMAND...: run COMMAND, output into $tmp/out, check its status.
expect_rc() {
	want=$1; what=$2; shift 2
	"$@" >"$tmp/out" 2>&1; rc=$?
	if [ "$rc" -eq "$want" ]; then ok "$what (rc $rc)"; else
		fail "$what: rc $rc, want $want"; sed 's/^/    /' "$tmp/out" | head -20; fi
}
# expect_out PATTERN DESCRIPTION: the last command's output matches the grep -E PATTERN.
expect_out() {
	if grep -qE -- "$1" "$tmp/out"; then ok "$2"; else
		fail "$2: no /$1/ in output"; sed 's/^/    /' "$tmp/out" | head -20; fi
}

[ -x "$NTBSOCK" ] || { echo "FAIL: $NTBSOCK not built"; exit 1; }
[ -f "$LIB" ] || { echo "FAIL: $LIB not built"; exit 1; }

# --- help, version, dispatch --------------------------------------------------------------
expect_rc 0 "--help" "$NTBSOCK" --help
for c in run check stat perf link help; do expect_out "^  $c " "--help lists $c"; done
expect_rc 0 "--version" "$NTBSOCK" --version
expect_out '^ntbsock [0-9]+\.[0-9]+\.[0-9]+$' "--version prints the version"
for c in run check stat perf link; do
	expect_rc 0 "help $c" "$NTBSOCK" help "$c"
	expect_out "^usage: ntbsock $c" "help $c prints its usage"
	expect_rc 0 "$c --help" "$NTBSOCK" "$c" --help
	expect_out "^usage: ntbsock $c" "$c --help prints its usage"
done
expect_rc 2 "unknown command" "$NTBSOCK" frobnicate
expect_out "unknown command 'frobnicate'" "unknown command is named"
"$NTBSOCK" frobnicate 2>/dev/null | grep -q . && fail "unknown command: usage went to stdout"
expect_rc 2 "no command" "$NTBSOCK"
expect_rc 2 "help of an unknown command" "$NTBSOCK" help frobnicate
expect_rc 2 "unknown option of check" "$NTBSOCK" check --frobnicate

# --- check ----------------------------------------------------------------------------------
expect_rc 0 "check demo-a.conf" "$NTBSOCK" check -c conf/examples/demo-a.conf
expect_out '^host: A' "check prints the resolved host"
expect_out 'peer B via link ab' "check prints the peers"
expect_out '^link state:' "check prints the link state"
expect_out 'demo-a.conf: valid$' "check says valid"
# 256 MiB window, 8 inline slots: connection slots of 512 + 8 x 128 B, as many as a quarter of
# the window holds up to 16384 (24 MiB, 9 %); 256 transfer contexts share the rest: the largest
# power-of-two ring of (256M - 64K - 24M) / 256 is 512 KiB
expect_out 'capacity: 16384 connections at once, each 1.5 KiB of window per direction .*8 inline slots.* 9 % of the window' \
	"check prints the link's capacity and cost per connection"
expect_out 'transfers: 256 at once through data rings of 512 KiB' \
	"check prints the transfer contexts"
printf 'tunables = { contexts = 1024; connections = 10000; };\n' | cat conf/examples/demo-a.conf - >"$tmp/ctx1024.conf"
expect_rc 0 "check with 1024 contexts" "$NTBSOCK" check -c "$tmp/ctx1024.conf"
expect_out 'capacity: 10000 connections at once' "check's capacity follows the connections tunable"
expect_out 'transfers: 1024 at once through data rings of 128 KiB' \
	"check's transfers follow the contexts tunable"
# the page size of the window: its file's tmpfs, mounted here in a mount namespace of our own
# (root: the test runner's private /dev/shm needs one too)
mkdir "$tmp/h"
sed "s#/dev/shm/ntbsock-demo\"#$tmp/h/ab\"#" conf/examples/demo-a.conf >"$tmp/h.conf"
ms="always within_size advise never"
if ! unshare -m true 2>/dev/null; then
	echo "SKIP (part): the page-size checks need a mount namespace (unshare -m: root)"; ms=""
fi
for m in $ms; do
	expect_rc 0 "check, link file on a tmpfs huge=$m" unshare -m sh -c \
		"mount -t tmpfs -o huge=$m tmpfs '$tmp/h' && exec '$NTBSOCK' check -c '$tmp/h.conf'"
	if [ $m = never ]; then
		expect_out '^    pages: 4 KiB \(tmpfs\): each process maps a data ring' \
			"check: a tmpfs huge=never maps the window in 4 KiB pages"
	else
		expect_out "^    pages: 2 MiB \\(tmpfs huge=$m\\)\$" \
			"check: a tmpfs huge=$m maps the window in 2 MiB pages"
	fi
done
expect_rc 0 "check demo-b.conf" "$NTBSOCK" check -c conf/examples/demo-b.conf
expect_out '^host: B' "check demo-b prints host B"
expect_rc 0 "check via NTBSOCK_CONF" env NTBSOCK_CONF=conf/examples/demo-b.conf "$NTBSOCK" check
expect_out '^host: B' "NTBSOCK_CONF is used when -c is absent"

cat >"$tmp/syntax.conf" <<'EOF'
host = {
  name = "A";
  addresses = [ "127.0.0.1" ;
};
EOF
expect_rc 1 "check with a syntax error" "$NTBSOCK" check -c "$tmp/syntax.conf"
expect_out "$tmp/syntax.conf:[0-9]+: syntax error" "syntax error names FILE:LINE"

sed 's/^\(\s*window_size.*\)$/\1\n    colour = "red";/' conf/examples/demo-a.conf >"$tmp/unknown.conf"
line=$(grep -n 'colour' "$tmp/unknown.conf" | cut -d: -f1)
[ -n "$line" ] || fail "could not build the unknown-key config"
expect_rc 1 "check with an unknown key" "$NTBSOCK" check -c "$tmp/unknown.conf"
expect_out "$tmp/unknown.conf:$line: .*colour.*unknown key" "unknown key named with FILE:LINE"

expect_rc 1 "check a missing file" "$NTBSOCK" check -c "$tmp/none.conf"
expect_out "$tmp/none.conf" "missing file named"
expect_rc 1 "check with a bad NTBSOCK_FAULT" env NTBSOCK_FAULT=drop=2 \
	"$NTBSOCK" check -c conf/examples/demo-a.conf
expect_out 'NTBSOCK_FAULT' "bad environment override named"

# A live link: check reports "not created" for a missing file and then the state of a fresh one.
shm=/dev/shm/ntbsock-test-cli-$$
sed "s#path = \"[^\"]*\"#path = \"$shm\"#" conf/examples/demo-a.conf >"$tmp/live.conf"
grep -q "$shm" "$tmp/live.conf" || fail "could not point the config at $shm"
expect_rc 0 "check with no link file" "$NTBSOCK" check -c "$tmp/live.conf"
expect_out 'not created \(no process has opened it\)' "missing link file reported"
expect_out '^    admin up$' "check shows the admin state (test_cli_link.sh: down)"

# --- run ------------------------------------------------------------------------------------
libabs=$(readlink -f "$LIB")
confabs=$(readlink -f conf/examples/demo-a.conf)
expect_rc 0 "run sh" env -u LD_PRELOAD "$NTBSOCK" run -c conf/examples/demo-a.conf -- \
	sh -c 'echo "preload=$LD_PRELOAD"; echo "conf=$NTBSOCK_CONF"'
expect_out "^preload=$libabs\$" "LD_PRELOAD is the absolute library path"
expect_out "^conf=$confabs\$" "NTBSOCK_CONF is the absolute config path"

other=$(readlink -f /lib/x86_64-linux-gnu/libm.so.6 2>/dev/null || echo /lib/libm.so.6)
expect_rc 0 "run with an existing LD_PRELOAD" env LD_PRELOAD="$other" \
	"$NTBSOCK" run -c conf/examples/demo-a.conf -- sh -c 'echo "preload=$LD_PRELOAD"'
expect_out "^preload=$libabs:$other\$" "the library is prepended to LD_PRELOAD"

expect_rc 0 "run without -c keeps NTBSOCK_CONF" env NTBSOCK_CONF=/some/where.conf \
	"$NTBSOCK" run -- sh -c 'echo "conf=$NTBSOCK_CONF"'
expect_out "^conf=/some/where.conf\$" "NTBSOCK_CONF untouched without -c"
expect_rc 0 "run passes arguments and options through" "$NTBSOCK" run sh -c 'echo "[$1|$2]"' x -c 'a b'
expect_out '^\[-c\|a b\]$' "arguments reach the program unchanged"
expect_rc 3 "run returns the program's status" "$NTBSOCK" run -- sh -c 'exit 3'
expect_rc 127 "run a missing program" "$NTBSOCK" run -- ntbsock-no-such-program-$$
expect_out 'ntbsock-no-such-program' "missing program named"
expect_rc 126 "run a non-executable file" "$NTBSOCK" run -- "$tmp/syntax.conf"
expect_rc 1 "run with a missing config" "$NTBSOCK" run -c "$tmp/none.conf" -- true
expect_rc 2 "run without a program" "$NTBSOCK" run -c conf/examples/demo-a.conf
expect_rc 1 "run with a missing NTBSOCK_LIB" env NTBSOCK_LIB="$tmp/nolib.so" "$NTBSOCK" run -- true
expect_out 'NTBSOCK_LIB' "missing NTBSOCK_LIB named"
expect_rc 0 "NTBSOCK_LIB overrides" env -u LD_PRELOAD NTBSOCK_LIB=/dev/null \
	"$NTBSOCK" run -- sh -c 'echo "preload=$LD_PRELOAD"'
expect_out '^preload=/dev/null$' "NTBSOCK_LIB is used"

# --- make install ------------------------------------------------------------------------------
dest=$tmp/dest
if make --no-print-directory BUILD="$BUILD" DESTDIR="$dest" PREFIX=/usr/local install \
	>"$tmp/install.log" 2>&1; then
	ok "make install DESTDIR"
	for f in usr/local/bin/ntbsock usr/local/lib/ntbsock/libntbsock.so \
		 usr/local/share/man/man1/ntbsock.1 usr/local/share/man/man5/ntbsock.conf.5 \
		 usr/local/share/man/man7/ntbsock.7 etc/ntbsock.conf.example; do
		[ -s "$dest/$f" ] && ok "installed $f" || fail "not installed: $f"
	done
	expect_rc 0 "installed run" env -u LD_PRELOAD -u NTBSOCK_LIB \
		"$dest/usr/local/bin/ntbsock" run -- sh -c 'echo "preload=$LD_PRELOAD"'
	expect_out "^preload=$dest/usr/local/lib/ntbsock/libntbsock.so\$" \
		"installed run finds the installed library"
	if command -v man >/dev/null 2>&1; then
		for m in man1/ntbsock.1 man7/ntbsock.7; do
			MANWIDTH=80 man --warnings -l "$dest/usr/local/share/man/$m" \
				>"$tmp/man.out" 2>"$tmp/man.err"
			if [ -s "$tmp/man.out" ] && [ ! -s "$tmp/man.err" ]; then ok "man -l $m renders"
			else fail "man -l $m: $(head -5 "$tmp/man.err")"; fi
		done
	fi
else
	fail "make install DESTDIR"; tail -20 "$tmp/install.log"
fi

rm -f "$shm" "$shm".side*
if [ $fails -ne 0 ]; then echo "test_cli: $fails failed"; exit 1; fi
echo "test_cli: all passed"
