/* SPDX-License-Identifier: MIT */
/* Private interface of the pci backend: device selectors, device profiles, libpci discovery
 * (with libpci's fatal errors trapped) and mapping of BARs through sysfs resource files. */
#ifndef NTBSOCK_NTB_PCI_INT_H
#define NTBSOCK_NTB_PCI_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ntb/ntb.h"

#define NTB_PCI_BARS 6

/* What a `device` parameter names. */
enum ntb_pci_sel_kind {
	NTB_PCI_SEL_BDF,   /* "0000:00:04.0" or "00:04.0" (domain 0) */
	NTB_PCI_SEL_ID,    /* "1af4:1110" */
	NTB_PCI_SEL_CLASS, /* "class:0500" (base class + subclass) or "class:05" (base class) */
	NTB_PCI_SEL_ANY,   /* "" : the first device any profile matches */
};

struct ntb_pci_selector {
	enum ntb_pci_sel_kind kind;
	unsigned domain, bus, dev, func;     /* BDF */
	uint16_t vendor, device;             /* ID */
	uint16_t class_code, class_mask;     /* CLASS: (class & mask) == class_code */
};

/* Parse S (see enum above); returns 0 or -EINVAL. */
int ntb_pci_parse_selector(const char *s, struct ntb_pci_selector *ret_sel);

/* A device the pci backend knows how to drive. */
struct ntb_pci_profile {
	const char *name;
	uint16_t    vendor, device;
	int         mem_bar;   /* BAR holding the shared region */
	int         reg_bar;   /* BAR holding registers, -1 if none */
	bool        has_doorbell_irq; /* false: doorbells are polled (ivshmem-plain) */
};

/* The profile matching VENDOR:DEVICE, or NULL. */
const struct ntb_pci_profile *ntb_pci_profile_find(uint16_t vendor, uint16_t device);

/* One PCI function as libpci reports it. */
struct ntb_pci_found {
	char     bdf[16];
	uint16_t vendor, device, class_code;
	uint64_t bar_size[NTB_PCI_BARS];
	const struct ntb_pci_profile *profile; /* NULL when no profile matches */
};

/* Whether SEL selects device F (profile not considered). */
bool ntb_pci_selector_match(const struct ntb_pci_selector *sel, const struct ntb_pci_found *f);

/* Scan the bus with libpci and return the first device (in BDF order) SEL selects that has a
 * profile, or any device SEL selects when ALLOW_NO_PROFILE. libpci fatal errors are trapped
 * (never exit) and returned as -EIO with the message in ERR. -ENODEV when nothing matches. */
int ntb_pci_find(const struct ntb_pci_selector *sel, bool allow_no_profile,
		 struct ntb_pci_found *ret_found, char *err, size_t errlen);

/* Scan and call CB for every device, in BDF order; stops early when CB returns non-zero.
 * Returns 0, CB's value, or -EIO (libpci fatal error, message in ERR). */
int ntb_pci_scan(int (*cb)(const struct ntb_pci_found *f, void *arg), void *arg,
		 char *err, size_t errlen);

/* Root of the PCI sysfs tree, "/sys/bus/pci" by default; both libpci (its sysfs.path
 * parameter) and the BAR mapper use it. Tests point it at a fake tree. NULL → default. */
void ntb_pci_set_sysfs_root(const char *root);
const char *ntb_pci_sysfs_root(void);

/* A mapped BAR. */
struct ntb_pci_bar_map {
	volatile void *base;
	size_t         size;
	bool           wc;        /* mapped through resourceN_wc: needs sfence before publish */
	bool           prefetch;  /* the BAR is prefetchable */
};

/* Map BAR of device BDF read-write through <root>/devices/<bdf>/resource<bar>[_wc] (the _wc
 * file when the BAR is prefetchable and the file exists). Errors, with a sentence in ERR:
 * -ENOENT no such device or BAR file; -EINVAL BAR not memory, unimplemented or size mismatch;
 * -EBUSY a kernel driver owns the device; -EACCES / -EPERM not permitted (not root, or the
 * kernel is locked down); other mmap/open errors as they come. */
int ntb_pci_map_bar(const char *bdf, int bar, struct ntb_pci_bar_map *ret_map,
		    char *err, size_t errlen);

/* Unmap a BAR mapped by ntb_pci_map_bar(). Accepts an unmapped (zeroed) struct. */
void ntb_pci_unmap_bar(struct ntb_pci_bar_map *map);

/* The sentence used for an errno from open()/mmap() of a resource file (for tests and logs). */
const char *ntb_pci_errno_hint(int err);

/* Interrupt doorbells of an ivshmem-doorbell device bound to vfio-pci (pci_vfio.c). */
struct ntb_pci_vfio_db {
	int      container, group, device; /* -1: closed */
	int      evfd;                     /* MSI-X vector 0 */
	uint64_t reg_off;                  /* the register BAR in the device fd */
	uint32_t own_id;                   /* IVPosition: our ivshmem peer id */
};

/* Open BDF through VFIO (its IOMMU group in /dev/vfio), read our id from IVPosition in BAR
 * REG_BAR and route MSI-X vector 0 to V->evfd. 0, or -errno with the reason in ERR (-EBUSY:
 * another process holds the group; -ENODEV: no IOMMU group). Closes what it opened on error. */
int ntb_pci_vfio_db_open(const char *bdf, int reg_bar, struct ntb_pci_vfio_db *v, char *err,
			 size_t errlen);
/* Interrupt peer PEER_ID on VECTOR through the Doorbell register. 0 or -EIO. */
int ntb_pci_vfio_db_ring(struct ntb_pci_vfio_db *v, uint32_t peer_id, uint32_t vector);
/* Close everything (the vector's routing ends with the device fd). Accepts a closed V. */
void ntb_pci_vfio_db_close(struct ntb_pci_vfio_db *v);

#endif
