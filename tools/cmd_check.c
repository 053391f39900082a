// SPDX-License-Identifier: MIT
/* `ntbsock check`: validate a config, print its resolved view and the state of each link. */
#include "tools/tools_int.h"
#include "glue/conf_params.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "conf/conf.h"
#include "ntb/ntb.h"
#include "transport/transport.h"

#define PCI_LIST_MAX 64

/* "16 MiB", "4 KiB", "12345 B". */
const char *tool_size_str(uint64_t v, char *buf, size_t len)
{
	static const char *const units[] = { "B", "KiB", "MiB", "GiB", "TiB" };
	int u = 0;

	while (u < 4 && v >= 1024 && v % 1024 == 0) {
		v /= 1024;
		u++;
	}
	snprintf(buf, len, "%llu %s", (unsigned long long)v, units[u]);
	return buf;
}

static void print_side(int side, int claims, bool enabled, uint32_t epoch)
{
	printf("    side %d: claimed by %d handle%s, %s", side, claims, claims == 1 ? "" : "s",
	       enabled ? "enabled" : "not enabled");
	if (enabled && epoch)
		printf(", epoch %#010x", epoch);
	printf("\n");
}

/* The link's administrative state on this host (`ntbsock link down|up`). */
static void print_admin(const struct ntb_link_params *p)
{
	char flag[NTB_PATH_MAX + 32];

	if (tp_link_admin_path(p, flag, sizeof(flag)) == 0 && tp_link_admin_get(p) == 1)
		printf("    admin down (%s exists): connections use tcp; `ntbsock link up %s' "
		       "ends it\n", flag, p->name);
	else
		printf("    admin up\n");
}

/* Open the link in inspect mode (no side claimed, nothing written) and describe it. Returns
 * 0, or a negative errno when the link exists but cannot be inspected. */
/* What the window holds with the tunables TPP (tp_geometry()): how many connections at once
 * and what each costs. False when it holds none (the link could never carry a connection). */
static bool print_capacity(const char *path, const struct conf_link *cl,
			   const struct tp_params *tpp)
{
	struct tp_geometry g;
	char w[32], ring[32];
	int rc = tp_geometry(tpp, cl->window_size, &g);

	tool_size_str(cl->window_size, w, sizeof(w));
	if (rc) {
		printf("    capacity: none: %s\n", rc == -ENOSPC ?
		       "the window is too small for the connections and transfer contexts" :
		       strerror(-rc));
		fprintf(stderr, "ntbsock check: %s: link %s: a window of %s cannot hold %u transfer "
			"contexts (data rings of at least 4 KiB%s) beside the connection slots "
			"(%u inline slots of 128 B each): lower contexts, connections or "
			"queue_size, or enlarge window_size\n", path, cl->name, w, tpp->contexts,
			tpp->queue_size ? ", or the queue_size given" : "", tpp->inline_slots);
		return false;
	}
	printf("    capacity: %u connections at once, each %.1f KiB of window per direction "
	       "(control words, its news word and %u inline slots of 128 B; %.0f %% of the "
	       "window)\n", g.connections, (g.slot_size + 8u) / 1024.0, g.inline_slots,
	       100.0 * g.connections * (double)(g.slot_size + 8u) / (double)cl->window_size);
	printf("    transfers: %u at once through data rings of %s (transfer contexts, granted "
	       "per transfer; a connection without one sends through its inline slots)\n",
	       g.contexts, tool_size_str(g.queue_size, ring, sizeof(ring)));
	return true;
}

/* S with mountinfo's escapes (\ooo: a space, tab, newline or backslash) decoded, in place. */
static void mount_unescape(char *s)
{
	char *o = s;

	for (; *s; s++, o++) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] >= '0' && s[2] <= '7' &&
		    s[3] >= '0' && s[3] <= '7') {
			*o = (char)((s[1] - '0') * 64 + (s[2] - '0') * 8 + (s[3] - '0'));
			s += 3;
		} else {
			*o = *s;
		}
	}
	*o = 0;
}

/* The mount of the directory that holds PATH (its longest mount point, the last mounted there):
 * its filesystem type into FS and its super-block options into OPTS. 0, or -errno (the
 * directory cannot be resolved; -ENOENT: none found). */
static int mount_of(const char *path, char *fs, size_t fslen, char *opts, size_t optslen)
{
	char dir[PATH_MAX], real[PATH_MAX], line[4096], mp[PATH_MAX];
	FILE *f;
	size_t best = 0;
	bool found = false;

	snprintf(dir, sizeof(dir), "%s", path);
	char *slash = strrchr(dir, '/');

	if (!slash)
		return -EINVAL;
	slash[slash == dir ? 1 : 0] = 0;
	if (!realpath(dir, real) || !(f = fopen("/proc/self/mountinfo", "re")))
		return -errno;
	/* ID PARENT MAJ:MIN ROOT MOUNT-POINT OPTIONS [OPTIONAL...] - TYPE SOURCE SUPER-OPTIONS */
	while (fgets(line, sizeof(line), f)) {
		char t[64], o[1024];
		const char *dash = strstr(line, " - ");

		if (!dash || sscanf(line, "%*s %*s %*s %*s %4095s", mp) != 1 ||
		    sscanf(dash + 3, "%63s %*s %1023s", t, o) != 2)
			continue;
		mount_unescape(mp);
		size_t n = strlen(mp);

		if (n < best || strncmp(real, mp, n) != 0 ||
		    (n > 1 && real[n] != 0 && real[n] != '/'))
			continue;
		best = n;
		snprintf(fs, fslen, "%s", t);
		snprintf(opts, optslen, "%s", o);
		found = true;
	}
	fclose(f);
	return found ? 0 : -ENOENT;
}

/* The selected word of /sys/kernel/mm/transparent_hugepage/shmem_enabled ("deny" and "force"
 * override every tmpfs mount's huge= option), or "" when it cannot be read. */
static const char *shmem_thp(char *buf, size_t len)
{
	FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/shmem_enabled", "re");
	char line[256] = "";
	const char *a, *b;

	buf[0] = 0;
	if (f) {
		if (!fgets(line, sizeof(line), f))
			line[0] = 0;
		fclose(f);
	}
	if ((a = strchr(line, '[')) && (b = strchr(a, ']')))
		snprintf(buf, len, "%.*s", (int)(b - a - 1), a + 1);
	return buf;
}

/* OPTS (comma-separated) has OPT (name=value, or a prefix such as "pagesize=")? Its value. */
static const char *mount_opt(const char *opts, const char *opt)
{
	size_t n = strlen(opt);

	for (const char *p = opts; p && *p; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL)
		if (strncmp(p, opt, n) == 0)
			return p + n;
	return NULL;
}

/* The size of the pages a shm link's file at PATH is mapped with, from its filesystem: a tmpfs
 * mounted huge=always, within_size or advise (the backend asks, madvise(MADV_HUGEPAGE)) gives
 * 2 MiB pages, hugetlbfs its own. */
static void print_pages(const char *path)
{
	char fs[64], opts[1024], sys[32];
	const char *huge;
	int rc = mount_of(path, fs, sizeof(fs), opts, sizeof(opts));

	if (rc < 0) {
		printf("    pages: unknown (the directory of %s: %s)\n", path, strerror(-rc));
		return;
	}
	if (strcmp(fs, "hugetlbfs") == 0) {
		printf("    pages: hugetlbfs cannot hold a link file (its size is not a multiple of "
		       "the huge page): use a tmpfs mounted huge=always\n");
		return;
	}
	bool tmpfs = strcmp(fs, "tmpfs") == 0;

	huge = tmpfs ? mount_opt(opts, "huge=") : NULL;
	shmem_thp(sys, sizeof(sys));
	if (tmpfs && (strcmp(sys, "force") == 0 || strcmp(sys, "deny") == 0)) {
		printf("    pages: %s (tmpfs; transparent_hugepage/shmem_enabled is %s)\n",
		       sys[0] == 'f' ? "2 MiB" : "4 KiB", sys);
		return;
	}
	if (huge && (strncmp(huge, "always", 6) == 0 || strncmp(huge, "within_size", 11) == 0 ||
		     strncmp(huge, "advise", 6) == 0)) {
		printf("    pages: 2 MiB (tmpfs huge=%.*s)\n", (int)strcspn(huge, ","), huge);
		return;
	}
	printf("    pages: 4 KiB (%s%s%.*s): each process maps a data ring it uses for the first "
	       "time one 4 KiB page at a time; a tmpfs mounted huge=always maps it in 2 MiB pages "
	       "(ntbsock.conf(5), path)\n", fs, huge ? " huge=" : "",
	       huge ? (int)strcspn(huge, ",") : 0, huge ? huge : "");
}

static int print_link_state(const struct conf_link *cl)
{
	struct ntb_link_params p;
	struct ntb_link_info info;
	struct ntb_link *link;
	struct stat st;
	char size[32];
	int rc, view;

	glue_link_params(cl, &p);
	printf("  %s: backend %s, window %s, ", cl->name, cl->backend,
	       tool_size_str(cl->window_size, size, sizeof(size)));
	if (strcmp(cl->backend, "shm") == 0)
		printf("file %s\n", cl->path);
	else
		printf("device %s\n", cl->device[0] ? cl->device : "(first profile match)");
	print_admin(&p);
	if (strcmp(cl->backend, "shm") == 0) {
		print_pages(cl->path);
		if (stat(cl->path, &st) != 0) {
			if (errno == ENOENT) {
				printf("    not created (no process has opened it)\n");
				return 0;
			}
			printf("    error: %s\n", strerror(errno));
			return -errno;
		}
	}
	p.inspect_only = true;
	p.fault.enabled = false;
	rc = ntb_link_open(&p, &link);
	if (rc < 0) {
		const char *detail = ntb_strerror_detail();

		printf("    error: cannot inspect: %s\n",
		       detail && *detail ? detail : strerror(-rc));
		return rc;
	}
	/* Up means the peer's heartbeat moves: watch it for up to the link timeout. */
	ntb_link_wait_up(link, (int)(cl->link_timeout_ms ? cl->link_timeout_ms : 500));
	rc = ntb_link_info(link, &info);
	if (rc < 0) {
		printf("    error: %s\n", strerror(-rc));
		ntb_link_close(link);
		return rc;
	}
	view = info.side;
	printf("    link %s", info.up ? "up" : "down");
	if (info.up)
		printf(", peer epoch %#010x", info.peer_epoch);
	printf("; this host uses %s\n", cl->loopback ? "both sides (loopback)" :
	       cl->side < 0 ? "a free side" : (cl->side == 0 ? "side 0" : "side 1"));
	unsigned tmo = cl->link_timeout_ms ? cl->link_timeout_ms : 500;

	/* (watched above for the link timeout: a moving heartbeat was seen to change) */
	if (!info.up && info.enabled && info.peer_enabled && info.peer_epoch_word &&
	    (info.peer_hb_age_ms < 0 || info.peer_hb_age_ms >= (int64_t)tmo))
		printf("    peer silent: its side is open (epoch %#010x) but its heartbeat did not "
		       "move for %u ms: its processes are stopped, starved, exited or dead; "
		       "open connections wait up to peer_timeout_ms for it\n", info.peer_epoch_word,
		       tmo);
	print_side(view, info.claims[view], info.enabled, info.epoch);
	print_side(1 - view, info.claims[1 - view], info.peer_enabled, info.peer_epoch_word);
	ntb_link_close(link);
	return 0;
}

static int list_pci(void)
{
	struct ntb_pci_dev_info devs[PCI_LIST_MAX];
	char size[32];
	int n = ntb_pci_list(devs, PCI_LIST_MAX);

	printf("\nPCI devices a backend profile matches:\n");
	if (n < 0) {
		printf("  cannot list PCI devices: %s\n", strerror(-n));
		return n;
	}
	if (n == 0)
		printf("  none\n");
	for (int i = 0; i < n; i++)
		printf("  %s  %04x:%04x  profile %s, BAR%d %s\n", devs[i].bdf, devs[i].vendor,
		       devs[i].device, devs[i].profile, devs[i].bar,
		       tool_size_str(devs[i].bar_size, size, sizeof(size)));
	return 0;
}

int cmd_check(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "conf", required_argument, NULL, 'c' },
		{ "pci", no_argument, NULL, 'p' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *conf_arg = NULL;
	char path[PATH_MAX];
	struct conf_error err;
	struct conf *conf = NULL;
	bool pci = false;
	int opt, rc;

	optind = 1;
	opterr = 0;
	while ((opt = getopt_long(argc, argv, "c:h", opts, NULL)) != -1) {
		switch (opt) {
		case 'c':
			conf_arg = optarg;
			break;
		case 'p':
			pci = true;
			break;
		case 'h':
			tool_print_usage(tool_find_cmd("check"), stdout);
			return TOOL_EXIT_OK;
		default:
			return tool_usage_error("check", "unknown option or missing argument: '%s'",
						argv[optind - 1]);
		}
	}
	if (optind < argc)
		return tool_usage_error("check", "unexpected argument '%s'", argv[optind]);

	rc = conf_find_path(conf_arg, path, sizeof(path));
	if (rc == -ENOENT) {
		fprintf(stderr, "ntbsock check: no config: none given with -c, NTBSOCK_CONF is not "
				"set and %s does not exist (the library would pass every socket "
				"to the kernel)\n", CONF_DEFAULT_PATH);
		if (pci)
			list_pci();
		return TOOL_EXIT_FAIL;
	}
	if (rc < 0) {
		fprintf(stderr, "ntbsock check: config path: %s\n", strerror(-rc));
		return TOOL_EXIT_FAIL;
	}
	memset(&err, 0, sizeof(err));
	rc = conf_load(path, &conf, &err);
	if (rc == 0)
		rc = conf_apply_env(conf, &err);
	if (rc == 0)
		rc = glue_check_backends(conf, &err);
	if (rc < 0) {
		fprintf(stderr, "ntbsock check: %s\n", err.text[0] ? err.text : strerror(-rc));
		conf_free(conf);
		return TOOL_EXIT_FAIL;
	}

	conf_print(conf, stdout);
	printf("\nlink state:\n");
	if (conf->n_links == 0)
		printf("  no links\n");
	struct tp_params tpp;
	bool fits = true;

	glue_tp_params(&conf->tunables, &tpp);
	for (int i = 0; i < conf->n_links; i++) {
		print_link_state(&conf->links[i]);
		fits &= print_capacity(path, &conf->links[i], &tpp);
	}
	if (pci)
		list_pci();
	printf("\n%s: %s\n", path, fits ? "valid" : "invalid");
	conf_free(conf);
	return fits ? TOOL_EXIT_OK : TOOL_EXIT_FAIL;
}
