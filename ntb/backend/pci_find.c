/* SPDX-License-Identifier: MIT */
/* PCI device discovery for the pci backend: selectors, profiles, and a libpci scan whose
 * fatal-error callback longjmps back to us instead of exiting the host program. */
#include "ntb/backend/pci_int.h"

#include <ctype.h>
#include <dlfcn.h>
#include <errno.h>
#include <pci/pci.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "util/compiler.h"
#include "util/log.h"

/* --- profiles ---------------------------------------------------------------------------- */

static const struct ntb_pci_profile profiles[] = {
	/* QEMU ivshmem (plain or doorbell): BAR0 registers, BAR1 MSI-X, BAR2 shared memory.
	 * ivshmem-doorbell bound to vfio-pci interrupts (pci_vfio.c); ivshmem-plain raises no
	 * interrupts (VFIO finds no MSI-X vector), so its doorbells are polled. */
	{ .name = "ivshmem", .vendor = 0x1af4, .device = 0x1110, .mem_bar = 2, .reg_bar = 0,
	  .has_doorbell_irq = true },
};

const struct ntb_pci_profile *ntb_pci_profile_find(uint16_t vendor, uint16_t device)
{
	for (size_t i = 0; i < ARRAY_SIZE(profiles); i++)
		if (profiles[i].vendor == vendor && profiles[i].device == device)
			return &profiles[i];
	return NULL;
}

/* --- selectors ----------------------------------------------------------------------------- */

/* Parse exactly N..M hex digits from *P into *RET; advances *P. */
static int parse_hex(const char **p, int min_digits, int max_digits, unsigned *ret)
{
	unsigned v = 0;
	int n = 0;

	while (n < max_digits && isxdigit((unsigned char)**p)) {
		char c = (char)tolower((unsigned char)**p);
		v = v * 16 + (unsigned)(c <= '9' ? c - '0' : c - 'a' + 10);
		(*p)++;
		n++;
	}
	if (n < min_digits || isxdigit((unsigned char)**p))
		return -EINVAL;
	*ret = v;
	return 0;
}

static int parse_bdf(const char *s, struct ntb_pci_selector *sel)
{
	const char *p = s;
	unsigned a, b, d, f;

	if (parse_hex(&p, 1, 4, &a) < 0 || *p++ != ':')
		return -EINVAL;
	if (parse_hex(&p, 1, 2, &b) < 0)
		return -EINVAL;
	if (*p == ':') { /* domain:bus:dev.fn */
		p++;
		if (parse_hex(&p, 1, 2, &d) < 0)
			return -EINVAL;
		sel->domain = a;
		sel->bus = b;
	} else { /* bus:dev.fn, domain 0 */
		if (a > 0xff)
			return -EINVAL;
		sel->domain = 0;
		sel->bus = a;
		d = b;
	}
	if (*p++ != '.' || parse_hex(&p, 1, 1, &f) < 0 || *p != '\0')
		return -EINVAL;
	if (d > 0x1f || f > 7)
		return -EINVAL;
	sel->dev = d;
	sel->func = f;
	sel->kind = NTB_PCI_SEL_BDF;
	return 0;
}

int ntb_pci_parse_selector(const char *s, struct ntb_pci_selector *ret_sel)
{
	struct ntb_pci_selector sel;
	const char *p;
	unsigned v, d;

	memset(&sel, 0, sizeof(sel));
	if (s == NULL || *s == '\0') {
		sel.kind = NTB_PCI_SEL_ANY;
		*ret_sel = sel;
		return 0;
	}
	if (strncasecmp(s, "class:", 6) == 0) {
		p = s + 6;
		if (parse_hex(&p, 2, 4, &v) < 0 || *p != '\0')
			return -EINVAL;
		if (p - (s + 6) == 2) { /* base class only */
			sel.class_code = (uint16_t)(v << 8);
			sel.class_mask = 0xff00;
		} else if (p - (s + 6) == 4) {
			sel.class_code = (uint16_t)v;
			sel.class_mask = 0xffff;
		} else {
			return -EINVAL;
		}
		sel.kind = NTB_PCI_SEL_CLASS;
		*ret_sel = sel;
		return 0;
	}
	if (strchr(s, '.') != NULL) {
		if (parse_bdf(s, &sel) < 0)
			return -EINVAL;
		*ret_sel = sel;
		return 0;
	}
	p = s;
	if (parse_hex(&p, 4, 4, &v) < 0 || *p++ != ':' || parse_hex(&p, 4, 4, &d) < 0 || *p != '\0')
		return -EINVAL;
	sel.kind = NTB_PCI_SEL_ID;
	sel.vendor = (uint16_t)v;
	sel.device = (uint16_t)d;
	*ret_sel = sel;
	return 0;
}

bool ntb_pci_selector_match(const struct ntb_pci_selector *sel, const struct ntb_pci_found *f)
{
	unsigned dom, bus, dev, fn;

	switch (sel->kind) {
	case NTB_PCI_SEL_ANY:
		return true;
	case NTB_PCI_SEL_ID:
		return f->vendor == sel->vendor && f->device == sel->device;
	case NTB_PCI_SEL_CLASS:
		return (f->class_code & sel->class_mask) == sel->class_code;
	case NTB_PCI_SEL_BDF:
		if (sscanf(f->bdf, "%x:%x:%x.%x", &dom, &bus, &dev, &fn) != 4)
			return false;
		return dom == sel->domain && bus == sel->bus && dev == sel->dev && fn == sel->func;
	}
	return false;
}

/* --- sysfs root ---------------------------------------------------------------------------- */

static char sysfs_root[NTB_PATH_MAX + 1] = "/sys/bus/pci";

void ntb_pci_set_sysfs_root(const char *root)
{
	snprintf(sysfs_root, sizeof(sysfs_root), "%s", root ? root : "/sys/bus/pci");
}

const char *ntb_pci_sysfs_root(void)
{
	return sysfs_root;
}

/* --- libpci with trapped errors -------------------------------------------------------------
 * libpci reports fatal errors through pacc->error, documented as "write error message and
 * quit"; its default calls exit(1). We install our own: it records the message and longjmps
 * to the scan's setjmp, so the host program never exits because of a PCI problem. The state is
 * per thread, so concurrent scans in different threads do not mix. */

static __thread jmp_buf *trap_jmp;
static __thread char trap_msg[256];

static void __attribute__((noreturn)) trap_error(char *msg, ...)
{
	va_list ap;

	va_start(ap, msg);
	vsnprintf(trap_msg, sizeof(trap_msg), msg, ap);
	va_end(ap);
	if (trap_jmp != NULL)
		longjmp(*trap_jmp, 1);
	/* Called outside a trapped section: never return into libpci, never exit. */
	LOG(LL_ERROR, "ntb/pci: libpci fatal error outside a scan: %s", trap_msg);
	abort();
}

static void trap_warning(char *msg, ...)
{
	char buf[256];
	va_list ap;

	va_start(ap, msg);
	vsnprintf(buf, sizeof(buf), msg, ap);
	va_end(ap);
	LOG(LL_DEBUG, "ntb/pci: libpci warning: %s", buf);
}

static void trap_debug(char *msg, ...)
{
	(void)msg; /* libpci debugging stays off (pacc->debugging = 0) */
}

/* --- libpci, loaded on first use -------------------------------------------------------------
 * Linked, libpci (with the libudev and libz it needs) was loaded into every program the
 * library is preloaded into: 0.6 ms of CPU at each start on the development VM, for a backend
 * few links use. The calls used here, by the default versions libpci.so.3 exports (those its
 * header names). */
#define NTB_LIBPCI_SO "libpci.so.3"

static struct {
	__typeof__(&pci_alloc) alloc;
	__typeof__(&pci_init) init;
	__typeof__(&pci_cleanup) cleanup;
	__typeof__(&pci_scan_bus) scan_bus;
	__typeof__(&pci_fill_info) fill_info;
	__typeof__(&pci_set_param) set_param;
} lpci;
static pthread_once_t lpci_once = PTHREAD_ONCE_INIT;
static char lpci_err[160]; /* why it could not be loaded (written once, under lpci_once) */

static void lpci_load(void)
{
	void *lib = dlopen(NTB_LIBPCI_SO, RTLD_NOW | RTLD_LOCAL);
	const struct { void **fn; const char *name; } sym[] = {
		{ (void **)&lpci.alloc, "pci_alloc" },
		{ (void **)&lpci.init, "pci_init" },
		{ (void **)&lpci.cleanup, "pci_cleanup" },
		{ (void **)&lpci.scan_bus, "pci_scan_bus" },
		{ (void **)&lpci.fill_info, "pci_fill_info" },
		{ (void **)&lpci.set_param, "pci_set_param" },
	};

	for (size_t i = 0; i < ARRAY_SIZE(sym); i++)
		if (!lib || !(*sym[i].fn = dlsym(lib, sym[i].name))) {
			const char *e = dlerror();

			snprintf(lpci_err, sizeof(lpci_err), "cannot load %s: %s", NTB_LIBPCI_SO,
				 e ? e : "unknown error");
			lpci.alloc = NULL; /* (the mark of a failed load) */
			return;
		}
}

/* 0 once libpci is loaded, else -ENOENT with the reason in ERR. */
static int lpci_get(char *err, size_t errlen)
{
	pthread_once(&lpci_once, lpci_load);
	if (lpci.alloc)
		return 0;
	if (err != NULL)
		snprintf(err, errlen, "libpci: %s", lpci_err);
	LOG(LL_DEBUG, "ntb/pci: %s", lpci_err);
	return -ENOENT;
}

static int found_cmp(const void *a, const void *b)
{
	const struct ntb_pci_found *x = a, *y = b;

	return strcmp(x->bdf, y->bdf); /* fixed-width lower-case hex: string order is BDF order */
}

static void fill_found(struct pci_dev *d, struct ntb_pci_found *f)
{
	memset(f, 0, sizeof(*f));
	lpci.fill_info(d, PCI_FILL_IDENT | PCI_FILL_CLASS | PCI_FILL_BASES | PCI_FILL_SIZES);
	snprintf(f->bdf, sizeof(f->bdf), "%04x:%02x:%02x.%x", (unsigned)d->domain & 0xffff,
		 (unsigned)d->bus & 0xff, (unsigned)d->dev & 0x1f, (unsigned)d->func & 7);
	f->vendor = d->vendor_id;
	f->device = d->device_id;
	f->class_code = d->device_class;
	for (int i = 0; i < NTB_PCI_BARS; i++)
		f->bar_size[i] = (uint64_t)d->size[i];
	f->profile = ntb_pci_profile_find(f->vendor, f->device);
}

/* Scan into a malloc'ed, BDF-sorted array. Returns the count or -EIO/-ENOMEM. */
static int scan_all(struct ntb_pci_found **ret_arr, char *err, size_t errlen)
{
	struct pci_access *volatile pacc = NULL;
	struct ntb_pci_found *volatile arr = NULL;
	volatile int n = 0;
	jmp_buf jb;
	struct pci_dev *d;
	volatile int cap = 0;
	char devdir[NTB_PATH_MAX + 16];
	struct stat st;

	/* No PCI bus in sysfs (a container, a non-PCI machine): no devices, not a libpci error. */
	snprintf(devdir, sizeof(devdir), "%s/devices", sysfs_root);
	if (stat(devdir, &st) < 0 && errno == ENOENT) {
		*ret_arr = NULL;
		return 0;
	}
	if (lpci_get(err, errlen) < 0)
		return -EIO;
	trap_msg[0] = '\0';
	if (setjmp(jb) != 0) {
		trap_jmp = NULL;
		if (err != NULL)
			snprintf(err, errlen, "libpci: %s", trap_msg);
		LOG(LL_DEBUG, "ntb/pci: libpci fatal error trapped: %s", trap_msg);
		/* pci_cleanup is safe on a half-initialised access: it checks methods != NULL. */
		if (pacc != NULL)
			lpci.cleanup(pacc);
		free(arr);
		return -EIO;
	}
	trap_jmp = &jb;

	pacc = lpci.alloc();
	if (pacc == NULL) {
		trap_jmp = NULL;
		if (err != NULL)
			snprintf(err, errlen, "libpci: out of memory");
		return -ENOMEM;
	}
	pacc->error = trap_error;
	pacc->warning = trap_warning;
	pacc->debug = trap_debug;
	pacc->debugging = 0;
	pacc->method = PCI_ACCESS_SYS_BUS_PCI;
	lpci.set_param(pacc, "sysfs.path", sysfs_root);
	lpci.init(pacc);
	lpci.scan_bus(pacc);

	for (d = pacc->devices; d != NULL; d = d->next) {
		if (n == cap) {
			int ncap = cap ? cap * 2 : 16;
			struct ntb_pci_found *na = realloc(arr, (size_t)ncap * sizeof(*na));
			if (na == NULL) {
				trap_jmp = NULL;
				lpci.cleanup(pacc);
				free(arr);
				if (err != NULL)
					snprintf(err, errlen, "out of memory");
				return -ENOMEM;
			}
			arr = na;
			cap = ncap;
		}
		fill_found(d, &arr[n]);
		n++;
	}
	trap_jmp = NULL;
	lpci.cleanup(pacc);
	if (n > 0)
		qsort(arr, (size_t)n, sizeof(*arr), found_cmp);
	*ret_arr = arr;
	return n;
}

int ntb_pci_scan(int (*cb)(const struct ntb_pci_found *f, void *arg), void *arg,
		 char *err, size_t errlen)
{
	struct ntb_pci_found *arr = NULL;
	int n, rc = 0;

	n = scan_all(&arr, err, errlen);
	if (n < 0)
		return n;
	for (int i = 0; i < n && rc == 0; i++)
		rc = cb(&arr[i], arg);
	free(arr);
	return rc;
}

struct find_ctx {
	const struct ntb_pci_selector *sel;
	bool allow_no_profile;
	struct ntb_pci_found *ret;
	int seen;  /* devices the selector matched, with or without profile */
	int total; /* devices scanned */
};

static int find_cb(const struct ntb_pci_found *f, void *arg)
{
	struct find_ctx *c = arg;

	c->total++;
	if (!ntb_pci_selector_match(c->sel, f))
		return 0;
	c->seen++;
	if (f->profile == NULL && !c->allow_no_profile)
		return 0;
	*c->ret = *f;
	return 1;
}

int ntb_pci_find(const struct ntb_pci_selector *sel, bool allow_no_profile,
		 struct ntb_pci_found *ret_found, char *err, size_t errlen)
{
	struct ntb_pci_found found;
	struct find_ctx c = { .sel = sel, .allow_no_profile = allow_no_profile, .ret = &found };
	int rc;

	rc = ntb_pci_scan(find_cb, &c, err, errlen);
	if (rc < 0)
		return rc;
	if (rc == 0) {
		if (err != NULL) {
			if (c.total == 0)
				snprintf(err, errlen, "no PCI devices at all (%s/devices is empty or "
					 "missing)", sysfs_root);
			else if (c.seen > 0)
				snprintf(err, errlen, "%d PCI device(s) match, but no device profile "
					 "knows them (set the BAR explicitly)", c.seen);
			else
				snprintf(err, errlen, "none of the %d PCI devices under %s matches",
					 c.total, sysfs_root);
		}
		return -ENODEV;
	}
	*ret_found = found;
	return 0;
}

/* --- ntb_pci_list (ntbsock check --pci) ------------------------------------------------------ */

struct list_ctx {
	struct ntb_pci_dev_info *out;
	int max, n;
};

static int list_cb(const struct ntb_pci_found *f, void *arg)
{
	struct list_ctx *c = arg;
	struct ntb_pci_dev_info *o;

	if (f->profile == NULL)
		return 0;
	if (c->n < c->max) {
		o = &c->out[c->n];
		memset(o, 0, sizeof(*o));
		snprintf(o->bdf, sizeof(o->bdf), "%s", f->bdf);
		o->vendor = f->vendor;
		o->device = f->device;
		snprintf(o->profile, sizeof(o->profile), "%s", f->profile->name);
		o->bar = f->profile->mem_bar;
		o->bar_size = f->bar_size[f->profile->mem_bar];
	}
	c->n++;
	return 0;
}

int ntb_pci_list(struct ntb_pci_dev_info *ret_devs, int max)
{
	struct list_ctx c = { .out = ret_devs, .max = max < 0 ? 0 : max };
	char err[256];
	int rc;

	if (max > 0 && ret_devs == NULL)
		return -EINVAL;
	rc = ntb_pci_scan(list_cb, &c, err, sizeof(err));
	if (rc < 0)
		return rc;
	return c.n < c.max ? c.n : c.max;
}
