// SPDX-License-Identifier: MIT
/* Credential changes (setuid(), setgid(), setgroups() and the rest): open every configured
 * link, and the table of tcp connections for `ntbsock stat`, before the call. A daemon started
 * as root that becomes another user (memcached -u nobody, nginx workers) would otherwise open
 * them lazily, at its first listen() or connect(), as that user, who may not open the link's
 * file (mode 0600, root's): every connection would stay TCP. Opened before, the process keeps
 * them as it keeps any file it opened before the change: the mappings and the host-table file
 * (path.sideN); nothing is opened later for them. The helper thread starts only at the first
 * socket that needs a link, after the change (pl_links_open_all()). */
#include "preload/pl_int.h"

/* Before a credential call: as root still, open what the library will need. Only the first
 * call of a process does any work (the rest find everything open); errno is kept. */
static void before_cred_change(const char *call)
{
	int saved = errno;

	if (pl_active()) {
		int n = pl_links_open_all();

		pl_tcpstat_open();
		LOG(LL_DEBUG, "%s(): %d of %d link(s) open before the credentials change", call, n,
		    pl_conf->n_links);
	}
	errno = saved;
}

#define PL_CRED(name, params, args)                                                      \
	NTB_EXPORT int name params                                                        \
	{                                                                                \
		before_cred_change(#name);                                               \
		return pl_real.name args;                                                \
	}

PL_CRED(setuid, (uid_t uid), (uid))
PL_CRED(seteuid, (uid_t uid), (uid))
PL_CRED(setreuid, (uid_t ruid, uid_t euid), (ruid, euid))
PL_CRED(setresuid, (uid_t ruid, uid_t euid, uid_t suid), (ruid, euid, suid))
PL_CRED(setgid, (gid_t gid), (gid))
PL_CRED(setegid, (gid_t gid), (gid))
PL_CRED(setregid, (gid_t rgid, gid_t egid), (rgid, egid))
PL_CRED(setresgid, (gid_t rgid, gid_t egid, gid_t sgid), (rgid, egid, sgid))
PL_CRED(setgroups, (size_t n, const gid_t *groups), (n, groups))
PL_CRED(initgroups, (const char *user, gid_t group), (user, group))
