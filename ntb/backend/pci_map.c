/* SPDX-License-Identifier: MIT */
/* Mapping a PCI BAR into this process through sysfs (<root>/devices/<bdf>/resourceN, or
 * resourceN_wc for prefetchable BARs), with one clear sentence per failure. */
#include "ntb/backend/pci_int.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/log.h"
#include "util/rawsys.h"

/* Linux include/linux/ioport.h resource flags, as printed in the sysfs `resource` file. */
#define IORESOURCE_IO       0x00000100u
#define IORESOURCE_MEM      0x00000200u
#define IORESOURCE_PREFETCH 0x00002000u
#define IORESOURCE_DISABLED 0x10000000u
#define IORESOURCE_UNSET    0x20000000u

const char *ntb_pci_errno_hint(int err)
{
	switch (err) {
	case EACCES:
		return "permission denied: mapping a BAR through sysfs needs root (CAP_SYS_ADMIN) "
		       "or write access to the resource file";
	case EPERM:
		return "operation not permitted: not root, or the kernel is in lockdown mode "
		       "(Secure Boot), which forbids mapping PCI BARs from user space";
	case EINVAL:
		return "the kernel rejected the mapping (BAR not memory, size or offset beyond the "
		       "BAR, or write-combining not supported)";
	case EBUSY:
		return "the device is owned by a kernel driver; unbind it first "
		       "(echo <bdf> > /sys/bus/pci/devices/<bdf>/driver/unbind)";
	case ENOENT:
		return "no such device or BAR in sysfs";
	case ENODEV:
		return "the BAR cannot be mapped (not a memory BAR)";
	default:
		return strerror(err);
	}
}

/* Read line BAR of <dir>/resource: "start end flags" in hex. */
static int read_resource_line(const char *dir, int bar, uint64_t *ret_start, uint64_t *ret_end,
			      uint64_t *ret_flags)
{
	char path[PATH_MAX], line[128];
	unsigned long long s, e, fl;
	FILE *f;
	int i = 0, rc = -EINVAL;

	if ((size_t)snprintf(path, sizeof(path), "%s/resource", dir) >= sizeof(path))
		return -ENAMETOOLONG;
	f = fopen(path, "re");
	if (f == NULL)
		return -errno;
	while (fgets(line, sizeof(line), f) != NULL) {
		if (i++ != bar)
			continue;
		if (sscanf(line, "%llx %llx %llx", &s, &e, &fl) == 3) {
			*ret_start = s;
			*ret_end = e;
			*ret_flags = fl;
			rc = 0;
		}
		break;
	}
	fclose(f);
	return rc;
}

/* The driver bound to the device, "" when none. */
static void read_driver(const char *dir, char *buf, size_t len)
{
	char path[PATH_MAX], target[PATH_MAX];
	ssize_t n;
	const char *slash;

	buf[0] = '\0';
	if ((size_t)snprintf(path, sizeof(path), "%s/driver", dir) >= sizeof(path))
		return;
	n = readlink(path, target, sizeof(target) - 1);
	if (n <= 0)
		return;
	target[n] = '\0';
	slash = strrchr(target, '/');
	if ((size_t)snprintf(buf, len, "%s", slash ? slash + 1 : target) >= len)
		buf[len - 1] = '\0'; /* a truncated driver name still means "owned" */
}

/* Drivers that bind without claiming the BARs, so user space may still map them (vfio-pci
 * claims a BAR only when it is accessed through VFIO: the pci backend uses VFIO for the
 * register BAR and the interrupts, never for the shared-memory BAR). */
static bool driver_leaves_bars(const char *drv)
{
	return strcmp(drv, "pci-stub") == 0 || strcmp(drv, "uio_pci_generic") == 0 ||
	       strcmp(drv, "vfio-pci") == 0;
}

int ntb_pci_map_bar(const char *bdf, int bar, struct ntb_pci_bar_map *ret_map,
		    char *err, size_t errlen)
{
	char dir[PATH_MAX], path[PATH_MAX], drv[64];
	uint64_t start = 0, end = 0, flags = 0, len;
	struct stat st;
	bool prefetch, wc = false;
	void *p;
	int fd, rc;

	if (bar < 0 || bar >= NTB_PCI_BARS) {
		snprintf(err, errlen, "BAR %d out of range 0..5", bar);
		return -EINVAL;
	}
	if ((size_t)snprintf(dir, sizeof(dir), "%s/devices/%s", ntb_pci_sysfs_root(), bdf) >=
	    sizeof(dir) - 16) { /* room for "/resourceN_wc" */
		snprintf(err, errlen, "PCI device %s: sysfs path too long", bdf);
		return -ENAMETOOLONG;
	}
	if (stat(dir, &st) < 0) {
		rc = -errno;
		snprintf(err, errlen, "PCI device %s: %s: %s", bdf, dir, ntb_pci_errno_hint(-rc));
		return rc;
	}
	rc = read_resource_line(dir, bar, &start, &end, &flags);
	if (rc < 0) {
		snprintf(err, errlen, "PCI device %s: cannot read BAR %d from %s/resource: %s",
			 bdf, bar, dir, rc == -EINVAL ? "no such line" : strerror(-rc));
		return rc == -EINVAL ? -EINVAL : rc;
	}
	if (!(flags & IORESOURCE_MEM) || (flags & (IORESOURCE_DISABLED | IORESOURCE_UNSET)) ||
	    end <= start) {
		snprintf(err, errlen, "PCI device %s: BAR %d is not an assigned memory BAR "
			 "(flags 0x%" PRIx64 ")", bdf, bar, flags);
		return -EINVAL;
	}
	len = end - start + 1;
	if (len > SIZE_MAX) {
		snprintf(err, errlen, "PCI device %s: BAR %d too large", bdf, bar);
		return -EINVAL;
	}
	read_driver(dir, drv, sizeof(drv));
	if (drv[0] != '\0' && !driver_leaves_bars(drv)) {
		snprintf(err, errlen, "PCI device %s is owned by kernel driver %s; unbind it first "
			 "(echo %s > %s/driver/unbind)", bdf, drv, bdf, dir);
		return -EBUSY;
	}
	prefetch = (flags & IORESOURCE_PREFETCH) != 0;

	fd = -1;
	if (prefetch) {
		if ((size_t)snprintf(path, sizeof(path), "%s/resource%d_wc", dir, bar) >= sizeof(path))
			return -ENAMETOOLONG; /* cannot happen: checked above */
		fd = open(path, O_RDWR | O_CLOEXEC);
		if (fd >= 0)
			wc = true;
		else if (errno != ENOENT) {
			rc = -errno;
			goto err_open;
		}
	}
	if (fd < 0) {
		if ((size_t)snprintf(path, sizeof(path), "%s/resource%d", dir, bar) >= sizeof(path))
			return -ENAMETOOLONG; /* cannot happen: checked above */
		fd = open(path, O_RDWR | O_CLOEXEC);
		if (fd < 0) {
			rc = -errno;
			goto err_open;
		}
	}
	/* The resource file's size is the BAR size; a mismatch means a stale or fake file. */
	if (fstat(fd, &st) < 0 || (uint64_t)st.st_size != len) {
		snprintf(err, errlen, "PCI device %s: %s has size %lld, BAR %d is %" PRIu64 " bytes",
			 bdf, path, (long long)st.st_size, bar, len);
		raw_close(fd);
		return -EINVAL;
	}
	p = mmap(NULL, (size_t)len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED) {
		rc = -errno;
		snprintf(err, errlen, "PCI device %s: mmap %s: %s", bdf, path,
			 ntb_pci_errno_hint(-rc));
		raw_close(fd);
		return rc;
	}
	raw_close(fd); /* the mapping stays valid */
	LOG(LL_DEBUG, "ntb/pci: mapped %s (%" PRIu64 " bytes%s)", path, len, wc ? ", WC" : "");
	ret_map->base = p;
	ret_map->size = (size_t)len;
	ret_map->wc = wc;
	ret_map->prefetch = prefetch;
	return 0;

err_open:
	snprintf(err, errlen, "PCI device %s: open %s: %s", bdf, path, ntb_pci_errno_hint(-rc));
	return rc;
}

void ntb_pci_unmap_bar(struct ntb_pci_bar_map *map)
{
	if (map == NULL || map->base == NULL)
		return;
	munmap((void *)map->base, map->size);
	map->base = NULL;
	map->size = 0;
}
