/* SPDX-License-Identifier: MIT */
/* Interrupt doorbells of an ivshmem-doorbell device bound to vfio-pci: ring a peer through the
 * Doorbell register in BAR0 ((peer id << 16) | vector), receive MSI-X vector 0 as an eventfd.
 * The shared memory (BAR2) stays mapped through sysfs (pci_map.c): vfio-pci claims a BAR only
 * when it is accessed through VFIO, and sysfs gives a write-combining mapping where VFIO's is
 * uncached. */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <linux/pci_regs.h>
#include <linux/vfio.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "ntb/backend/pci_int.h"
#include "util/fdpark.h"
#include "util/rawsys.h"

#define IVSHMEM_REG_IVPOSITION 8
#define IVSHMEM_REG_DOORBELL   12

static void close_fd(int *fd)
{
	fd_close_own(*fd);
	*fd = -1;
}

/* The IOMMU group number of BDF, from <sysfs root>/devices/<bdf>/iommu_group. */
static int iommu_group_of(const char *bdf, char *err, size_t errlen)
{
	char path[512], target[512];

	snprintf(path, sizeof(path), "%s/devices/%s/iommu_group", ntb_pci_sysfs_root(), bdf);
	ssize_t n = readlink(path, target, sizeof(target) - 1);
	if (n < 0) {
		snprintf(err, errlen, "%s: %s (no IOMMU group: boot with an IOMMU)", path,
			 strerror(errno));
		return -ENODEV;
	}
	target[n] = '\0';
	char *end;
	long g = strtol(basename(target), &end, 10);
	if (*end != '\0' || g < 0) {
		snprintf(err, errlen, "%s: unexpected group %s", path, target);
		return -EINVAL;
	}
	return (int)g;
}

static int vfio_fail(struct ntb_pci_vfio_db *v, int rc, char *err, size_t errlen,
		     const char *what)
{
	snprintf(err, errlen, "vfio: %s: %s", what, strerror(-rc));
	ntb_pci_vfio_db_close(v);
	return rc;
}

int ntb_pci_vfio_db_open(const char *bdf, int reg_bar, struct ntb_pci_vfio_db *v, char *err,
			 size_t errlen)
{
	char path[64];
	int rc;

	v->container = v->group = v->device = v->evfd = -1;
	int g = iommu_group_of(bdf, err, errlen);
	if (g < 0)
		return g;
	v->container = fd_park(open("/dev/vfio/vfio", O_RDWR | O_CLOEXEC));
	if (v->container < 0)
		return vfio_fail(v, -errno, err, errlen, "/dev/vfio/vfio");
	if (raw_ioctl(v->container, VFIO_GET_API_VERSION, 0) != VFIO_API_VERSION ||
	    raw_ioctl(v->container, VFIO_CHECK_EXTENSION, VFIO_TYPE1v2_IOMMU) <= 0)
		return vfio_fail(v, -ENOTSUP, err, errlen, "no type1v2 IOMMU");
	snprintf(path, sizeof(path), "/dev/vfio/%d", g);
	v->group = fd_park(open(path, O_RDWR | O_CLOEXEC));
	if (v->group < 0) /* EBUSY: another process holds the group (and the doorbells) */
		return vfio_fail(v, -errno, err, errlen, path);
	struct vfio_group_status st = { .argsz = sizeof(st) };
	if (raw_ioctl(v->group, VFIO_GROUP_GET_STATUS, &st) < 0)
		return vfio_fail(v, -errno, err, errlen, "group status");
	if (!(st.flags & VFIO_GROUP_FLAGS_VIABLE))
		return vfio_fail(v, -EPERM, err, errlen,
				 "group not viable (bind every device of the group to vfio-pci)");
	if (raw_ioctl(v->group, VFIO_GROUP_SET_CONTAINER, &v->container) < 0 ||
	    raw_ioctl(v->container, VFIO_SET_IOMMU, VFIO_TYPE1v2_IOMMU) < 0)
		return vfio_fail(v, -errno, err, errlen, "set container / IOMMU");
	v->device = fd_park(raw_ioctl(v->group, VFIO_GROUP_GET_DEVICE_FD, bdf));
	if (v->device < 0)
		return vfio_fail(v, -errno, err, errlen, "get device fd");
	struct vfio_region_info reg = { .argsz = sizeof(reg),
					.index = VFIO_PCI_BAR0_REGION_INDEX + (uint32_t)reg_bar };
	if (raw_ioctl(v->device, VFIO_DEVICE_GET_REGION_INFO, &reg) < 0)
		return vfio_fail(v, -errno, err, errlen, "register BAR info");
	if (reg.size < IVSHMEM_REG_DOORBELL + 4)
		return vfio_fail(v, -EINVAL, err, errlen, "register BAR too small");
	v->reg_off = reg.offset;
	uint32_t pos;
	if (syscall(SYS_pread64, v->device, &pos, sizeof(pos),
		    (off_t)(v->reg_off + IVSHMEM_REG_IVPOSITION)) !=
	    (ssize_t)sizeof(pos))
		return vfio_fail(v, -EIO, err, errlen, "read IVPosition");
	v->own_id = pos & 0xffffu;
	struct vfio_irq_info irq = { .argsz = sizeof(irq), .index = VFIO_PCI_MSIX_IRQ_INDEX };
	if (raw_ioctl(v->device, VFIO_DEVICE_GET_IRQ_INFO, &irq) < 0 || irq.count < 1)
		return vfio_fail(v, -ENOTSUP, err, errlen,
				 "no MSI-X vector (ivshmem-plain, or vectors=0)");
	/* MSI-X messages are memory writes by the device: without Bus Master Enable they are
	 * dropped (vfio-pci enables memory decoding, not bus mastering). */
	struct vfio_region_info cfg = { .argsz = sizeof(cfg),
					.index = VFIO_PCI_CONFIG_REGION_INDEX };
	uint16_t cmd;
	if (raw_ioctl(v->device, VFIO_DEVICE_GET_REGION_INFO, &cfg) < 0 ||
	    syscall(SYS_pread64, v->device, &cmd, sizeof(cmd), (off_t)(cfg.offset + PCI_COMMAND)) !=
	    (long)sizeof(cmd))
		return vfio_fail(v, -EIO, err, errlen, "read the command register");
	cmd |= PCI_COMMAND_MASTER;
	if (syscall(SYS_pwrite64, v->device, &cmd, sizeof(cmd), (off_t)(cfg.offset + PCI_COMMAND)) !=
	    (long)sizeof(cmd))
		return vfio_fail(v, -EIO, err, errlen, "enable bus mastering");
	v->evfd = fd_park(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
	if (v->evfd < 0)
		return vfio_fail(v, -errno, err, errlen, "eventfd");
	struct {
		struct vfio_irq_set set;
		int32_t fd;
	} s = { .set = { .argsz = sizeof(s),
			 .flags = VFIO_IRQ_SET_DATA_EVENTFD | VFIO_IRQ_SET_ACTION_TRIGGER,
			 .index = VFIO_PCI_MSIX_IRQ_INDEX, .start = 0, .count = 1 },
		.fd = v->evfd };
	if (raw_ioctl(v->device, VFIO_DEVICE_SET_IRQS, &s) < 0) {
		rc = -errno;
		return vfio_fail(v, rc, err, errlen, "MSI-X vector 0 → eventfd");
	}
	return 0;
}

int ntb_pci_vfio_db_ring(struct ntb_pci_vfio_db *v, uint32_t peer_id, uint32_t vector)
{
	uint32_t val = (peer_id << 16) | (vector & 0xffffu);

	/* A posted write of the register (QEMU: an ioeventfd or an eventfd write on the host). */
	if (syscall(SYS_pwrite64, v->device, &val, sizeof(val),
		    (off_t)(v->reg_off + IVSHMEM_REG_DOORBELL)) !=
	    (ssize_t)sizeof(val))
		return -EIO;
	return 0;
}

void ntb_pci_vfio_db_close(struct ntb_pci_vfio_db *v)
{
	close_fd(&v->evfd);
	close_fd(&v->device);
	close_fd(&v->group);
	close_fd(&v->container);
}
