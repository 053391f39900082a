/* SPDX-License-Identifier: MIT */
/* Unit tests for the pci backend through the public link API (ntb/pci.c): a fake sysfs tree
 * whose BAR file is also opened by the shm backend, so one process holds a pci side and a shm
 * side of the same region — the interoperation the ivshmem test checks across a VM. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "ntb/ntb.h"
#include "ntb/backend/pci_int.h"

#define BAR2_SIZE (1u << 20)
#define WIN       (256u << 10)
#define BDF       "0000:00:03.0"

static char root[128], bar_path[240], dev_dir[200];

static void write_file(const char *dir, const char *name, const char *text)
{
	char path[600];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

static int setup(void **state)
{
	char dir[512];
	int fd;

	(void)state;
	snprintf(root, sizeof(root), "/tmp/ntbsock-test-pcilink-%d", (int)getpid());
	assert_int_equal(mkdir(root, 0700), 0);
	snprintf(dir, sizeof(dir), "%s/devices", root);
	assert_int_equal(mkdir(dir, 0700), 0);
	snprintf(dev_dir, sizeof(dev_dir), "%s/devices/%s", root, BDF);
	assert_int_equal(mkdir(dev_dir, 0700), 0);
	write_file(dev_dir, "vendor", "0x1af4\n");
	write_file(dev_dir, "device", "0x1110\n");
	write_file(dev_dir, "class", "0x050000\n");
	write_file(dev_dir, "resource",
		   "0x00000000fea00000 0x00000000fea000ff 0x0000000000040200\n"
		   "0x0000000000000000 0x0000000000000000 0x0000000000000000\n"
		   "0x00000000fc000000 0x00000000fc0fffff 0x000000000014220c\n"
		   "0x0000000000000000 0x0000000000000000 0x0000000000000000\n"
		   "0x0000000000000000 0x0000000000000000 0x0000000000000000\n"
		   "0x0000000000000000 0x0000000000000000 0x0000000000000000\n");
	snprintf(bar_path, sizeof(bar_path), "%s/resource2_wc", dev_dir);
	fd = open(bar_path, O_RDWR | O_CREAT | O_EXCL, 0600);
	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, BAR2_SIZE), 0); /* zeroed, like a fresh ivshmem BAR */
	close(fd);
	ntb_pci_set_sysfs_root(root);
	return 0;
}

static int teardown(void **state)
{
	char cmd[600];

	(void)state;
	ntb_pci_set_sysfs_root(NULL);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
	assert_int_equal(system(cmd), 0);
	return 0;
}

static void pci_params(struct ntb_link_params *p, int side, const char *device)
{
	ntb_link_params_init(p);
	snprintf(p->name, sizeof(p->name), "pcitest");
	snprintf(p->backend, sizeof(p->backend), "pci");
	p->side = side;
	p->window_size = WIN;
	p->heartbeat_ms = 20;
	p->link_timeout_ms = 2000;
	snprintf(p->device, sizeof(p->device), "%s", device);
}

static void shm_params(struct ntb_link_params *p, int side)
{
	ntb_link_params_init(p);
	snprintf(p->name, sizeof(p->name), "pcitest");
	snprintf(p->backend, sizeof(p->backend), "shm");
	p->side = side;
	p->window_size = WIN;
	p->heartbeat_ms = 20;
	p->link_timeout_ms = 2000;
	snprintf(p->path, sizeof(p->path), "%s", bar_path);
}

static bool bar_header_zero(void)
{
	uint8_t buf[4096], zero[4096] = { 0 };
	int fd = open(bar_path, O_RDONLY);

	assert_true(fd >= 0);
	assert_int_equal(pread(fd, buf, sizeof(buf), 0), (ssize_t)sizeof(buf));
	close(fd);
	return memcmp(buf, zero, sizeof(buf)) == 0;
}

/* Both links up: PCI side 0 (initialises the zeroed BAR), shm side 1 on the same file. */
static void open_pair(struct ntb_link **pci, struct ntb_link **shm)
{
	struct ntb_link_params p;

	pci_params(&p, 0, "1af4:1110");
	assert_int_equal(ntb_link_open(&p, pci), 0);
	shm_params(&p, 1);
	assert_int_equal(ntb_link_open(&p, shm), 0);
	assert_int_equal(ntb_link_enable(*pci), 0);
	assert_int_equal(ntb_link_enable(*shm), 0);
	for (int i = 0; i < 200 && !(ntb_link_tick(*pci) && ntb_link_tick(*shm)); i++)
		usleep(5000);
	assert_true(ntb_link_is_up(*pci));
	assert_true(ntb_link_is_up(*shm));
}

static void test_pci_shm_interop(void **state)
{
	struct ntb_link *pci, *shm;
	const volatile uint8_t *in;
	size_t sz;
	uint32_t v, seen;
	uint8_t msg[1000];

	(void)state;
	open_pair(&pci, &shm);
	assert_string_equal(ntb_link_backend(pci), "pci");
	assert_int_equal(ntb_link_side(pci), 0);
	assert_int_equal(ntb_link_peer_epoch(pci), ntb_link_epoch(shm));
	assert_int_equal(ntb_link_peer_epoch(shm), ntb_link_epoch(pci));
	assert_int_equal(ntb_out_size(pci), WIN);
	assert_int_equal(ntb_db_fd(pci), -ENOTSUP);

	/* pci → shm: payload, barrier, publish */
	for (size_t i = 0; i < sizeof(msg); i++)
		msg[i] = (uint8_t)(i * 7 + 1);
	assert_int_equal(ntb_write(pci, 4096, msg, sizeof(msg)), 0);
	ntb_to_peer_barrier(pci);
	assert_int_equal(ntb_write32(pci, 0, 0xabcd1234), 0);
	ntb_wc_flush(pci);
	in = ntb_in_window(shm, &sz);
	assert_int_equal(sz, WIN);
	assert_int_equal(*(const volatile uint32_t *)in, 0xabcd1234);
	assert_memory_equal((const void *)(in + 4096), msg, sizeof(msg));
	assert_int_equal(ntb_write(pci, WIN - 10, msg, 11), -EINVAL); /* out of bounds */

	/* shm → pci */
	assert_int_equal(ntb_write64(shm, 8, 0x1122334455667788ull), 0);
	in = ntb_in_window(pci, &sz);
	assert_int_equal(*(const volatile uint64_t *)(in + 8), 0x1122334455667788ull);

	/* scratchpads both ways */
	assert_int_equal(ntb_peer_spad_write(pci, 3, 0x55aa), 0);
	assert_int_equal(ntb_spad_read(shm, 3, &v), 0);
	assert_int_equal(v, 0x55aa);
	assert_int_equal(ntb_peer_spad_write(shm, 4, 0x77), 0);
	assert_int_equal(ntb_spad_read(pci, 4, &v), 0);
	assert_int_equal(v, 0x77);

	/* doorbells: the pci side polls (no interrupt) and still sees a ring */
	seen = ntb_db_read(pci);
	assert_int_equal(ntb_db_wait(pci, seen, 30), -ETIMEDOUT);
	assert_int_equal(ntb_peer_db_ring(shm), 0);
	assert_int_equal(ntb_db_wait(pci, seen, 1000), 0);
	assert_int_not_equal(ntb_db_read(pci), seen);
	seen = ntb_db_read(shm);
	assert_int_equal(ntb_peer_db_ring(pci), 0);
	assert_int_equal(ntb_db_wait(shm, seen, 1000), 0);

	/* pci side goes away → shm sees the link down */
	ntb_link_close(pci);
	for (int i = 0; i < 200 && ntb_link_tick(shm); i++)
		usleep(5000);
	assert_false(ntb_link_is_up(shm));
	ntb_link_close(shm);
}

/* Side 1 never initialises: on a zeroed BAR it reports -EAGAIN and writes nothing; an
 * inspect-only open does the same. After side 0 initialised it, both open. */
static void test_side1_waits_for_init(void **state)
{
	struct ntb_link_params p;
	struct ntb_link *a = NULL, *b = NULL, *c = NULL;

	(void)state;
	pci_params(&p, 1, BDF);
	assert_int_equal(ntb_link_open(&p, &b), -EAGAIN);
	assert_null(b);
	pci_params(&p, -1, "class:0500");
	p.inspect_only = true;
	assert_int_equal(ntb_link_open(&p, &c), -EAGAIN);
	assert_true(bar_header_zero());

	pci_params(&p, 0, "class:05");
	assert_int_equal(ntb_link_open(&p, &a), 0);
	assert_false(bar_header_zero());
	pci_params(&p, 1, BDF);
	assert_int_equal(ntb_link_open(&p, &b), 0);
	assert_int_equal(ntb_link_side(b), 1);
	pci_params(&p, -1, "1af4:1110");
	p.inspect_only = true;
	assert_int_equal(ntb_link_open(&p, &c), 0);
	ntb_link_close(c);
	ntb_link_close(b);
	ntb_link_close(a);
}

static void expect_open_error(struct ntb_link_params *p, int err, const char *needle)
{
	struct ntb_link *l = NULL;

	assert_int_equal(ntb_link_open(p, &l), err);
	assert_null(l);
	if (strstr(ntb_strerror_detail(), needle) == NULL)
		fail_msg("detail \"%s\" lacks \"%s\"", ntb_strerror_detail(), needle);
}

static void test_open_errors(void **state)
{
	struct ntb_link_params p;
	char path[600];

	(void)state;
	pci_params(&p, 0, "1af4");
	expect_open_error(&p, -EINVAL, "bad device");
	pci_params(&p, -1, BDF);
	expect_open_error(&p, -EINVAL, "side must be 0 or 1");
	pci_params(&p, 0, "1af4:9999");
	expect_open_error(&p, -ENODEV, "none of the 1 PCI devices");
	pci_params(&p, 0, "0000:00:03.0");
	p.bar = 1; /* unimplemented BAR */
	expect_open_error(&p, -EINVAL, "not an assigned memory BAR");
	pci_params(&p, 0, BDF);
	p.window_size = 1u << 20; /* 0x5000 + 2 MiB does not fit a 1 MiB BAR */
	expect_open_error(&p, -EINVAL, "too small");

	snprintf(path, sizeof(path), "%s/driver", dev_dir);
	assert_int_equal(symlink("../../../bus/pci/drivers/ivshmem_drv", path), 0);
	pci_params(&p, 0, BDF);
	expect_open_error(&p, -EBUSY, "unbind");
	assert_int_equal(unlink(path), 0);

	snprintf(path, sizeof(path), "%s/devices/not-a-bdf", root);
	assert_int_equal(mkdir(path, 0700), 0); /* libpci fatal error while scanning */
	pci_params(&p, 0, BDF);
	expect_open_error(&p, -EIO, "libpci");
	assert_int_equal(rmdir(path), 0);
	ntb_pci_set_sysfs_root("/nonexistent/ntbsock-test");
	pci_params(&p, 0, BDF);
	expect_open_error(&p, -ENODEV, "no PCI devices at all");
	ntb_pci_set_sysfs_root(root);
	assert_true(bar_header_zero()); /* no failed open wrote anything */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_pci_shm_interop, setup, teardown),
		cmocka_unit_test_setup_teardown(test_side1_waits_for_init, setup, teardown),
		cmocka_unit_test_setup_teardown(test_open_errors, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
