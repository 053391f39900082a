#!/bin/sh
# SPDX-License-Identifier: MIT
# No environment knob lets an unprivileged user steer a set-uid program that has the library:
# a set-uid-root copy of tests/helpers/fail_secure, run by user nobody with NTBSOCK_CONF,
# NTBSOCK_LOG_FILE and NTBSOCK_FAULT set, must ignore all three (secure_getenv: AT_SECURE) —
# in conf/ (config path, overrides) and in the library's initialisation (dlopen()ed, then a
# socket made through it: no log file appears in a directory only root may write). A control
# run without set-uid shows that the same probe does see the variables.
. "$(dirname "$0")/lib.sh"
pl_need setpriv
[ "$(id -u)" = 0 ] || pl_skip "needs root (installs a set-uid copy, runs it as nobody)"
id nobody >/dev/null 2>&1 || pl_skip "no user nobody"
pl_setup security-setuid
P=$BUILD/tests/fail_secure
[ -x "$P" ] || pl_skip "$P not built"
T=$(mktemp -d /tmp/ntbsock-test-setuid-XXXXXX)
trap 'pl_cleanup; rm -rf "$T"' EXIT
chmod 755 "$T"; mkdir -m 755 "$T/rootonly"
cp "$P" "$T/probe"; cp "$PL_LIB" "$T/libntbsock.so"; cp "$PL_TMP/a.conf" "$T/good.conf"
cp "$PL_TMP/a.conf" "$T/evil.conf"
chmod 644 "$T/good.conf" "$T/evil.conf" "$T/libntbsock.so"
evil="NTBSOCK_CONF=$T/evil.conf NTBSOCK_LOG_FILE=$T/rootonly/evil.log NTBSOCK_FAULT=drop=0.5,corrupt=0.25 NTBSOCK_LOG=debug"

# control: not set-uid, run by root: the probe sees every variable
env $evil "$T/probe" "$T/libntbsock.so" "$T/good.conf" >"$T/control.out" 2>&1
cat "$T/control.out"
grep -q "conf_path=$T/evil.conf" "$T/control.out" || pl_fail "control: NTBSOCK_CONF not seen (probe broken?)"
grep -q 'fault=0.5/0.25' "$T/control.out" || pl_fail "control: NTBSOCK_FAULT not seen (probe broken?)"
[ -e "$T/rootonly/evil.log" ] || pl_fail "control: NTBSOCK_LOG_FILE not used by the library (probe broken?)"
rm -f "$T/rootonly/evil.log"

# set-uid root, run by nobody
chown root:root "$T/probe"; chmod 4755 "$T/probe"
setpriv --reuid=65534 --regid=65534 --clear-groups env $evil "$T/probe" "$T/libntbsock.so" "$T/good.conf" \
	>"$T/setuid.out" 2>&1
cat "$T/setuid.out"
grep -q 'secure=1' "$T/setuid.out" || pl_skip "AT_SECURE not set for the set-uid copy (nosuid mount?)"
bad=""
grep -q "conf_path=$T/evil.conf" "$T/setuid.out" && bad="$bad NTBSOCK_CONF(conf/)"
grep -q 'fault=0.5' "$T/setuid.out" && bad="$bad NTBSOCK_FAULT(conf/conf_env.c)"
grep -q "log_file=$T" "$T/setuid.out" && bad="$bad NTBSOCK_LOG_FILE(conf/conf_env.c)"
[ -e "$T/rootonly/evil.log" ] && bad="$bad NTBSOCK_LOG_FILE(library initialisation: created $T/rootonly/evil.log as root)"
grep -q 'dlopen=ok' "$T/setuid.out" || pl_fail "the library did not load in the set-uid program"
grep -q 'socket=ok' "$T/setuid.out" || pl_fail "no socket through the library in the set-uid program"
[ -z "$bad" ] || pl_fail "a set-uid program obeyed the caller's environment:$bad"
echo "set-uid program: NTBSOCK_CONF, NTBSOCK_LOG_FILE, NTBSOCK_FAULT ignored under AT_SECURE: ok"
