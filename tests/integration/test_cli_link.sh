#!/bin/sh
# SPDX-License-Identifier: MIT
# `ntbsock link down|up NAME`: the admin-down flag file beside the link file (created empty with
# mode 0644, removed; both idempotent), its state in `check` and in `stat` (table and --json),
# NTBSOCK_CONF without -c, a pci link's flag under /dev/shm, an unknown link and usage errors.
# No flag file is left behind.
. "$(dirname "$0")/lib.sh"
pl_setup clilink
NTB=$BUILD/ntbsock
[ -x "$NTB" ] || pl_skip "$NTB not built"
FLAG=$PL_LINK.admin-down
# the pci link below: its flag sits at /dev/shm/ntbsock-<name>.admin-down
PCI=tclilink$$
PCI_FLAG=/dev/shm/ntbsock-$PCI.admin-down
trap 'rm -f "$FLAG" "$PCI_FLAG"; pl_cleanup' EXIT
umask 022
out=$PL_TMP/out

# expect RC COMMAND...: run COMMAND (output into $out), fail unless its status is RC.
expect() {
	want=$1; shift
	"$@" >"$out" 2>&1; rc=$?
	[ "$rc" -eq "$want" ] || { cat "$out"; pl_fail "'$*': rc $rc, want $want"; }
}
# has TEXT: the last command's output has the line TEXT (whole line, fixed string).
has() { grep -qxF -- "$1" "$out" || { cat "$out"; pl_fail "no line '$1'"; }; }
# stat_admin CONF: the admin state of link ab in `stat --json -c CONF`.
stat_admin() {
	"$NTB" stat --json -c "$1" | python3 -c '
import json, sys
d = json.load(sys.stdin)
print(",".join(l["name"] + "=" + l["admin"] for l in d["links"]))'
}

[ -e "$FLAG" ] && pl_fail "$FLAG exists before the test"

# --- down ---------------------------------------------------------------------------------
expect 0 "$NTB" link down ab -c "$PL_TMP/a.conf"
has "link ab: down (admin): connections move to another link or to tcp; new connections avoid it"
[ "$(wc -l <"$out")" -eq 1 ] || pl_fail "link down printed more than one line"
[ -f "$FLAG" ] || pl_fail "no flag file $FLAG"
[ -s "$FLAG" ] && pl_fail "flag file not empty"
[ "$(stat -c %a "$FLAG")" = 644 ] || pl_fail "flag mode $(stat -c %a "$FLAG"), want 644"
[ -e "$PL_LINK" ] && pl_fail "link down created the link file"
echo "ok: link down creates $FLAG"
expect 0 "$NTB" link down ab -c "$PL_TMP/a.conf"
[ -f "$FLAG" ] || pl_fail "a second link down removed the flag"
echo "ok: link down is idempotent"

expect 0 "$NTB" check -c "$PL_TMP/a.conf"
has "    admin down ($FLAG exists): connections use tcp; \`ntbsock link up ab' ends it"
# the emulated hosts share the link file's directory: B's view is the same flag
expect 0 "$NTB" check -c "$PL_TMP/b.conf"
has "    admin down ($FLAG exists): connections use tcp; \`ntbsock link up ab' ends it"
echo "ok: check shows admin down"
expect 0 "$NTB" stat -c "$PL_TMP/a.conf"
has "link ab: admin down (connections use tcp)"
has "no connections"
[ "$(stat_admin "$PL_TMP/a.conf")" = ab=down ] || pl_fail "stat --json: $(stat_admin "$PL_TMP/a.conf")"
echo "ok: stat shows admin down (table and --json)"

# --- up -----------------------------------------------------------------------------------
expect 0 "$NTB" link up ab -c "$PL_TMP/a.conf"
has "link ab: up (admin): new connections use ntb; those moved to tcp stay there"
[ -e "$FLAG" ] && pl_fail "link up left $FLAG"
expect 0 "$NTB" link up ab -c "$PL_TMP/a.conf"
echo "ok: link up removes the flag, and is idempotent"
expect 0 "$NTB" check -c "$PL_TMP/a.conf"
has "    admin up"
grep -q 'admin down' "$out" && pl_fail "check still says admin down"
expect 0 "$NTB" stat -c "$PL_TMP/a.conf"
has "link ab: admin up"
[ "$(stat_admin "$PL_TMP/a.conf")" = ab=up ] || pl_fail "stat --json: $(stat_admin "$PL_TMP/a.conf")"
echo "ok: check and stat show admin up"

# --- the config from NTBSOCK_CONF; options anywhere ---------------------------------------
expect 0 env NTBSOCK_CONF="$PL_TMP/b.conf" "$NTB" link down ab
[ -f "$FLAG" ] || pl_fail "link down with NTBSOCK_CONF: no flag"
expect 0 "$NTB" link -c "$PL_TMP/b.conf" up ab
[ -e "$FLAG" ] && pl_fail "link -c CONF up: flag left"
echo "ok: NTBSOCK_CONF, and -c before the action"

# --- a pci link: its flag under /dev/shm (the link has no file) ----------------------------
sed "s#backend = \"shm\";#backend = \"pci\"; device = \"1af4:1110\";#; /path = /d; \
     s#name = \"ab\"#name = \"$PCI\"#; s#link = \"ab\"#link = \"$PCI\"#" \
	"$PL_TMP/a.conf" >"$PL_TMP/pci.conf"
expect 0 "$NTB" link down "$PCI" -c "$PL_TMP/pci.conf"
[ -f "$PCI_FLAG" ] || pl_fail "pci link: no flag $PCI_FLAG"
expect 0 "$NTB" stat -c "$PL_TMP/pci.conf"
has "link $PCI: admin down (connections use tcp)"
expect 0 "$NTB" link up "$PCI" -c "$PL_TMP/pci.conf"
[ -e "$PCI_FLAG" ] && pl_fail "pci link: link up left $PCI_FLAG"
echo "ok: a pci link's flag is $PCI_FLAG"

# --- errors -------------------------------------------------------------------------------
expect 2 "$NTB" link down xy -c "$PL_TMP/a.conf"
has "ntbsock link: no link 'xy' in $PL_TMP/a.conf (its links: ab)"
[ -e /dev/shm/ntbsock-xy.admin-down ] && pl_fail "an unknown link got a flag file"
[ -e "$FLAG" ] && pl_fail "an unknown link set ab down"
echo "ok: an unknown link is a usage error naming the link and the config"
expect 2 "$NTB" link -c "$PL_TMP/a.conf"
grep -q 'missing action' "$out" || pl_fail "no action: $(cat "$out")"
expect 2 "$NTB" link sideways ab -c "$PL_TMP/a.conf"
grep -q "unknown action 'sideways'" "$out" || pl_fail "bad action: $(cat "$out")"
expect 2 "$NTB" link down -c "$PL_TMP/a.conf"
grep -q 'missing link name' "$out" || pl_fail "no name: $(cat "$out")"
expect 2 "$NTB" link down ab extra -c "$PL_TMP/a.conf"
expect 1 "$NTB" link down ab -c "$PL_TMP/none.conf"
grep -qF "$PL_TMP/none.conf" "$out" || pl_fail "missing config not named: $(cat "$out")"
[ -e "$FLAG" ] && pl_fail "a failed command left $FLAG"
echo "ok: usage errors (2), a missing config (1)"
echo "test_cli_link: all passed"
