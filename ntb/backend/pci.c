/* SPDX-License-Identifier: MIT */
/* The pci backend: finds the device with libpci, maps its shared-memory BAR from sysfs and
 * drives the common region layout (ntb_int.h) in it. Doorbells are interrupts when the device
 * has them and is bound to vfio-pci (ivshmem-doorbell, pci_vfio.c), else polled. */
#include <errno.h>
#include <stdio.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ntb/ntb_int.h"
#include "ntb/backend/pci_int.h"
#include "util/log.h"

struct pci_priv {
	struct ntb_pci_found   dev;
	struct ntb_pci_bar_map map;
	int bar;
	bool has_vfio;                 /* interrupt doorbells through vfio-pci */
	struct ntb_pci_vfio_db vfio;
};

/* The driver bound to BDF ("" when none). */
static void bound_driver(const char *bdf, char *buf, size_t len)
{
	char path[512], target[512];

	buf[0] = '\0';
	snprintf(path, sizeof(path), "%s/devices/%s/driver", ntb_pci_sysfs_root(), bdf);
	ssize_t n = readlink(path, target, sizeof(target) - 1);
	if (n > 0) {
		target[n] = '\0';
		const char *slash = strrchr(target, '/');
		const char *name = slash ? slash + 1 : target;
		if (strlen(name) < len)
			memcpy(buf, name, strlen(name) + 1);
	}
}

/* Interrupt doorbells when the function is bound to vfio-pci and its profile has them. Done
 * before the BAR is mapped: opening the device through VFIO powers it up (vfio-pci keeps an
 * idle function in D3hot). Failing here only means polled doorbells. */
static void open_doorbells(struct ntb_link *link, struct pci_priv *pp)
{
	char drv[64], err[512];
	const struct ntb_pci_profile *prof = pp->dev.profile;

	bound_driver(pp->dev.bdf, drv, sizeof(drv));
	if (strcmp(drv, "vfio-pci") != 0 || prof == NULL || !prof->has_doorbell_irq ||
	    link->params.inspect_only || !link->params.doorbell)
		return;
	int rc = ntb_pci_vfio_db_open(pp->dev.bdf, prof->reg_bar, &pp->vfio, err, sizeof(err));
	if (rc < 0) {
		LOG(LL_DEBUG, "ntb/pci: link %s: no interrupt doorbells: %s", link->params.name,
		    err);
		return;
	}
	pp->has_vfio = true;
	link->caps |= NTB_CAP_EVENT_DB;
	link->db_id = pp->vfio.own_id + 1;
	LOG(LL_DEBUG, "ntb/pci: link %s: interrupt doorbells through vfio-pci, ivshmem id %u",
	    link->params.name, pp->vfio.own_id);
}

static int pci_open(struct ntb_link *link)
{
	const struct ntb_link_params *p = &link->params;
	struct ntb_pci_selector sel;
	struct pci_priv *pp;
	char err[512];
	int rc;

	if (ntb_pci_parse_selector(p->device, &sel) < 0) {
		ntb_set_detail("pci link %s: bad device \"%s\" (want a BDF like 0000:00:04.0, "
			       "vendor:device like 1af4:1110, or class:0500)", p->name, p->device);
		return -EINVAL;
	}
	/* Side claiming by pid liveness only works among the processes of one host; across a
	 * PCI link the other side's pids are meaningless, so the side must be configured. */
	if (!(p->side == 0 || p->side == 1 || (p->side == -1 && p->inspect_only))) {
		ntb_set_detail("pci link %s: side must be 0 or 1 (automatic side claiming is for "
			       "the shm backend only)", p->name);
		return -EINVAL;
	}
	if (p->bar < -1 || p->bar >= NTB_PCI_BARS) {
		ntb_set_detail("pci link %s: bar %d out of range 0..5", p->name, p->bar);
		return -EINVAL;
	}
	pp = calloc(1, sizeof(*pp));
	if (pp == NULL) {
		ntb_set_detail("pci link %s: out of memory", p->name);
		return -ENOMEM;
	}
	rc = ntb_pci_find(&sel, p->bar >= 0, &pp->dev, err, sizeof(err));
	if (rc < 0) {
		ntb_set_detail("pci link %s: device \"%s\": %s", p->name, p->device, err);
		goto err_free;
	}
	pp->bar = p->bar >= 0 ? p->bar : pp->dev.profile->mem_bar;
	link->caps = 0; /* no FUTEX_WAKE: our doorbells wake no futex */
	open_doorbells(link, pp);
	rc = ntb_pci_map_bar(pp->dev.bdf, pp->bar, &pp->map, err, sizeof(err));
	if (rc < 0) {
		ntb_set_detail("pci link %s: %s", p->name, err);
		goto err_free;
	}
	link->base = (uint8_t *)pp->map.base;
	link->map_size = pp->map.size;
	link->wc = pp->map.wc;
	link->side_hint = p->side < 0 ? 0 : p->side;
	link->priv = pp;
	/* Side 0 initialises a zeroed BAR; side 1 and inspectors wait for it (-EAGAIN). */
	rc = ntb_region_prepare(link->base, link->map_size, p->window_size,
				p->side == 0 && !p->inspect_only, &link->hdr);
	if (rc < 0)
		goto err_unmap;
	LOG(LL_DEBUG, "ntb/pci: link %s on %s (%04x:%04x, %s) BAR%d %zu bytes%s, window %llu",
	    p->name, pp->dev.bdf, pp->dev.vendor, pp->dev.device,
	    pp->dev.profile ? pp->dev.profile->name : "no profile", pp->bar, pp->map.size,
	    pp->map.wc ? " WC" : "", (unsigned long long)link->hdr.win_size);
	return 0;

err_unmap:
	ntb_pci_unmap_bar(&pp->map);
	link->base = NULL;
	link->map_size = 0;
	link->priv = NULL;
err_free:
	if (pp->has_vfio)
		ntb_pci_vfio_db_close(&pp->vfio);
	link->caps = 0;
	link->db_id = 0;
	free(pp);
	return rc;
}

static void pci_close(struct ntb_link *link)
{
	struct pci_priv *pp = link->priv;

	if (pp == NULL)
		return;
	ntb_pci_unmap_bar(&pp->map);
	if (pp->has_vfio)
		ntb_pci_vfio_db_close(&pp->vfio);
	free(pp);
	link->priv = NULL;
	link->base = NULL;
	link->map_size = 0;
}

/* A store fence: on a write-combining mapping, drains the WC buffers so that every earlier
 * store reaches the device before any later one (pairs with the peer's acquire load of the
 * published word). On an uncached or cached mapping, x86 keeps store order; the release fence
 * stops the compiler from reordering. */
static void pci_wc_flush(struct ntb_link *link)
{
	if (link->wc) {
#if defined(__x86_64__) || defined(__i386__)
		__asm__ __volatile__("sfence" ::: "memory");
#else
		atomic_thread_fence(memory_order_seq_cst);
#endif
	} else {
		atomic_thread_fence(memory_order_release);
	}
}

/* Payload before publish: the same fence (pairs with the acquire load of the published
 * index/flag on the peer). */
static void pci_to_peer_barrier(struct ntb_link *link)
{
	pci_wc_flush(link);
}

/* After the doorbell word was stored: interrupt the peer's process that takes doorbells. */
static void pci_db_wake(struct ntb_link *link, _Atomic uint32_t *peer_db)
{
	struct pci_priv *pp = link->priv;
	uint32_t target = ntb_peer_db_target(link);

	(void)peer_db;
	if (pp->has_vfio && target)
		ntb_pci_vfio_db_ring(&pp->vfio, target - 1, 0);
}

/* With interrupt doorbells: sleep on MSI-X vector 0's eventfd. Without (ivshmem-plain, or
 * another process of this side takes them): poll the doorbell word with a growing sleep (50 µs
 * doubling to 1 ms) until it changes or SLICE_MS passes. The word lives in our inbound control
 * page, i.e. local memory, so polling it costs no link traffic (doc/design.md §3 rule 1). */
static int pci_db_wait_slice(struct ntb_link *link, _Atomic uint32_t *db, uint32_t seen,
			     int slice_us)
{
	struct pci_priv *pp = link->priv;
	uint64_t deadline = clock_mono_ns() + (uint64_t)(slice_us > 0 ? slice_us : 1) * 1000ull;
	long sleep_ns = 50000;

	if (pp->has_vfio && ntb_db_event_mine(link))
		return ntb_evfd_wait_slice(pp->vfio.evfd, db, seen,
					   slice_us > 0 ? (slice_us + 999) / 1000 : 1);
	for (;;) {
		/* acquire: pairs with the peer's release store of the doorbell in its ring */
		if (atomic_load_explicit(db, memory_order_acquire) != seen)
			return 0;
		uint64_t now = clock_mono_ns();
		if (now >= deadline)
			return 0;
		if ((uint64_t)sleep_ns > deadline - now)
			sleep_ns = (long)(deadline - now);
		struct timespec ts = { 0, sleep_ns };
		if (nanosleep(&ts, NULL) < 0 && errno == EINTR)
			return -EINTR;
		if (sleep_ns < 1000000)
			sleep_ns *= 2;
	}
}

static const char *pci_location(const struct ntb_link *link)
{
	return link->params.device;
}

static int pci_db_fd(const struct ntb_link *link)
{
	const struct pci_priv *pp = link->priv;

	return pp && pp->has_vfio ? pp->vfio.evfd : -ENOTSUP;
}

const struct ntb_backend_ops ntb_pci_ops = {
	.name = "pci",
	.open = pci_open,
	.close = pci_close,
	.write = NULL, /* plain stores into the mapped BAR */
	.to_peer_barrier = pci_to_peer_barrier,
	.wc_flush = pci_wc_flush,
	.db_wake = pci_db_wake,
	.db_wait_slice = pci_db_wait_slice,
	.check_mapping = NULL,
	.location = pci_location,
	.db_fd = pci_db_fd,
};
