/* SPDX-License-Identifier: MIT */
/* Unit tests for the pci backend's discovery and BAR mapping (ntb/pci_find.c, ntb/pci_map.c)
 * against a fake sysfs tree: selectors, profiles, ntb_pci_list(), error mapping, and libpci
 * fatal errors that must come back as errors instead of exiting the program. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "ntb/ntb.h"
#include "ntb/backend/pci_int.h"

#define BAR2_SIZE (1u << 20)

static char root[256];

/* --- fake sysfs ------------------------------------------------------------------------------ */

static void write_file(const char *dir, const char *name, const char *text)
{
	char path[512];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

static void sized_file(const char *dir, const char *name, off_t size)
{
	char path[512];
	int fd;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, size), 0);
	close(fd);
}

static const char *ivshmem_resource =
	"0x00000000fea00000 0x00000000fea000ff 0x0000000000040200\n" /* BAR0 registers, mem */
	"0x0000000000000000 0x0000000000000000 0x0000000000000000\n"
	"0x00000000fc000000 0x00000000fc0fffff 0x000000000014220c\n" /* BAR2 1 MiB, prefetch */
	"0x0000000000000000 0x0000000000000000 0x0000000000000000\n"
	"0x0000000000000000 0x0000000000000000 0x0000000000000000\n"
	"0x0000000000000000 0x0000000000000000 0x0000000000000000\n"
	"0x0000000000000000 0x0000000000000000 0x0000000000000000\n";

static const char *virtio_resource =
	"0x000000000000c000 0x000000000000c03f 0x0000000000040101\n" /* BAR0 I/O ports */
	"0x00000000fe000000 0x00000000fe000fff 0x0000000000040200\n"
	"0x0000000000000000 0x0000000000000000 0x0000000000000000\n"
	"0x0000000000000000 0x0000000000000000 0x0000000000000000\n"
	"0x0000000000000000 0x0000000000000000 0x0000000000000000\n"
	"0x0000000000000000 0x0000000000000000 0x0000000000000000\n"
	"0x0000000000000000 0x0000000000000000 0x0000000000000000\n";

static void add_device(const char *bdf, const char *vendor, const char *device,
		       const char *class_code, const char *resource)
{
	char dir[512];

	snprintf(dir, sizeof(dir), "%s/devices/%s", root, bdf);
	assert_int_equal(mkdir(dir, 0755), 0);
	write_file(dir, "vendor", vendor);
	write_file(dir, "device", device);
	write_file(dir, "class", class_code);
	write_file(dir, "resource", resource);
}

static void dev_path(char *buf, size_t len, const char *bdf, const char *name)
{
	snprintf(buf, len, "%s/devices/%s/%s", root, bdf, name);
}

static int setup_tree(void **state)
{
	char dir[512];

	(void)state;
	snprintf(root, sizeof(root), "/tmp/ntbsock-test-pci-%d", (int)getpid());
	assert_int_equal(mkdir(root, 0755), 0);
	snprintf(dir, sizeof(dir), "%s/devices", root);
	assert_int_equal(mkdir(dir, 0755), 0);
	/* added in reverse BDF order: discovery must sort */
	add_device("0000:00:05.0", "0x1af4\n", "0x1110\n", "0x050000\n", ivshmem_resource);
	add_device("0000:00:03.0", "0x1af4\n", "0x1110\n", "0x050000\n", ivshmem_resource);
	add_device("0000:00:01.0", "0x1af4\n", "0x1041\n", "0x020000\n", virtio_resource);
	snprintf(dir, sizeof(dir), "%s/devices/0000:00:03.0", root);
	sized_file(dir, "resource0", 256);
	sized_file(dir, "resource2", BAR2_SIZE);
	sized_file(dir, "resource2_wc", BAR2_SIZE);
	snprintf(dir, sizeof(dir), "%s/devices/0000:00:05.0", root);
	sized_file(dir, "resource2", BAR2_SIZE); /* no _wc file */
	ntb_pci_set_sysfs_root(root);
	return 0;
}

static int teardown_tree(void **state)
{
	char cmd[600];

	(void)state;
	ntb_pci_set_sysfs_root(NULL);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
	assert_int_equal(system(cmd), 0);
	return 0;
}

/* --- selectors and profiles ---------------------------------------------------------------- */

static void test_selector_bdf(void **state)
{
	struct ntb_pci_selector s;

	(void)state;
	assert_int_equal(ntb_pci_parse_selector("0000:00:04.0", &s), 0);
	assert_int_equal(s.kind, NTB_PCI_SEL_BDF);
	assert_int_equal(s.domain, 0);
	assert_int_equal(s.bus, 0);
	assert_int_equal(s.dev, 4);
	assert_int_equal(s.func, 0);
	assert_int_equal(ntb_pci_parse_selector("0001:3a:1f.7", &s), 0);
	assert_int_equal(s.domain, 1);
	assert_int_equal(s.bus, 0x3a);
	assert_int_equal(s.dev, 0x1f);
	assert_int_equal(s.func, 7);
	assert_int_equal(ntb_pci_parse_selector("3A:00.1", &s), 0); /* bus:dev.fn, domain 0 */
	assert_int_equal(s.kind, NTB_PCI_SEL_BDF);
	assert_int_equal(s.domain, 0);
	assert_int_equal(s.bus, 0x3a);
	assert_int_equal(s.func, 1);
}

static void test_selector_id_class_any(void **state)
{
	struct ntb_pci_selector s;

	(void)state;
	assert_int_equal(ntb_pci_parse_selector("1af4:1110", &s), 0);
	assert_int_equal(s.kind, NTB_PCI_SEL_ID);
	assert_int_equal(s.vendor, 0x1af4);
	assert_int_equal(s.device, 0x1110);
	assert_int_equal(ntb_pci_parse_selector("class:0500", &s), 0);
	assert_int_equal(s.kind, NTB_PCI_SEL_CLASS);
	assert_int_equal(s.class_code, 0x0500);
	assert_int_equal(s.class_mask, 0xffff);
	assert_int_equal(ntb_pci_parse_selector("CLASS:05", &s), 0);
	assert_int_equal(s.class_code, 0x0500);
	assert_int_equal(s.class_mask, 0xff00);
	assert_int_equal(ntb_pci_parse_selector("", &s), 0);
	assert_int_equal(s.kind, NTB_PCI_SEL_ANY);
}

static void test_selector_invalid(void **state)
{
	static const char *bad[] = {
		"1af4", "1af4:", "1af4:11100", "1af:1110", "g af4:1110", "1af4:1110 ",
		"0000:00:20.0" /* dev > 0x1f */, "0000:00:04.8" /* fn > 7 */, "0000:00:04.",
		"0000:00:04.0x", "00000:00:04.0", "0000:000:04.0", "100:04.0",
		"class:", "class:5", "class:050", "class:05000", "class:zz", "vendor:1af4",
	};
	struct ntb_pci_selector s = { .kind = NTB_PCI_SEL_ANY, .vendor = 0x5a5a };

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(ntb_pci_parse_selector(bad[i], &s), -EINVAL);
		/* out-parameter untouched on failure */
		assert_int_equal(s.kind, NTB_PCI_SEL_ANY);
		assert_int_equal(s.vendor, 0x5a5a);
	}
}

static void test_profile(void **state)
{
	const struct ntb_pci_profile *p;

	(void)state;
	p = ntb_pci_profile_find(0x1af4, 0x1110);
	assert_non_null(p);
	assert_string_equal(p->name, "ivshmem");
	assert_int_equal(p->mem_bar, 2);
	assert_int_equal(p->reg_bar, 0);
	assert_true(p->has_doorbell_irq); /* ivshmem-doorbell, through vfio-pci */
	assert_null(ntb_pci_profile_find(0x1af4, 0x1041));
	assert_null(ntb_pci_profile_find(0x8086, 0x1110));
}

static void test_selector_match(void **state)
{
	struct ntb_pci_found f = { .bdf = "0000:00:04.0", .vendor = 0x1af4, .device = 0x1110,
				   .class_code = 0x0500 };
	struct ntb_pci_selector s;

	(void)state;
	assert_int_equal(ntb_pci_parse_selector("0000:00:04.0", &s), 0);
	assert_true(ntb_pci_selector_match(&s, &f));
	assert_int_equal(ntb_pci_parse_selector("00:04.0", &s), 0);
	assert_true(ntb_pci_selector_match(&s, &f));
	assert_int_equal(ntb_pci_parse_selector("0000:00:04.1", &s), 0);
	assert_false(ntb_pci_selector_match(&s, &f));
	assert_int_equal(ntb_pci_parse_selector("1af4:1110", &s), 0);
	assert_true(ntb_pci_selector_match(&s, &f));
	assert_int_equal(ntb_pci_parse_selector("1af4:1111", &s), 0);
	assert_false(ntb_pci_selector_match(&s, &f));
	assert_int_equal(ntb_pci_parse_selector("class:05", &s), 0);
	assert_true(ntb_pci_selector_match(&s, &f));
	assert_int_equal(ntb_pci_parse_selector("class:0580", &s), 0);
	assert_false(ntb_pci_selector_match(&s, &f));
	assert_int_equal(ntb_pci_parse_selector("class:02", &s), 0);
	assert_false(ntb_pci_selector_match(&s, &f));
}

/* --- discovery through libpci on the fake tree ------------------------------------------- */

static void test_list(void **state)
{
	struct ntb_pci_dev_info d[4];

	(void)state;
	memset(d, 0xee, sizeof(d));
	assert_int_equal(ntb_pci_list(d, 4), 2); /* the virtio device has no profile */
	assert_string_equal(d[0].bdf, "0000:00:03.0");
	assert_string_equal(d[1].bdf, "0000:00:05.0");
	assert_int_equal(d[0].vendor, 0x1af4);
	assert_int_equal(d[0].device, 0x1110);
	assert_string_equal(d[0].profile, "ivshmem");
	assert_int_equal(d[0].bar, 2);
	assert_int_equal(d[0].bar_size, BAR2_SIZE);
	/* MAX smaller than the number of devices: only MAX written */
	memset(d, 0xee, sizeof(d));
	assert_int_equal(ntb_pci_list(d, 1), 1);
	assert_string_equal(d[0].bdf, "0000:00:03.0");
	assert_int_equal((uint8_t)d[1].bdf[0], 0xee);
	assert_int_equal(ntb_pci_list(NULL, 0), 0);
	assert_int_equal(ntb_pci_list(NULL, 3), -EINVAL);
}

static void test_find(void **state)
{
	struct ntb_pci_selector s;
	struct ntb_pci_found f;
	char err[256];

	(void)state;
	assert_int_equal(ntb_pci_parse_selector("1af4:1110", &s), 0);
	assert_int_equal(ntb_pci_find(&s, false, &f, err, sizeof(err)), 0);
	assert_string_equal(f.bdf, "0000:00:03.0"); /* the first in BDF order */
	assert_non_null(f.profile);
	assert_int_equal(f.bar_size[0], 256);
	assert_int_equal(f.bar_size[2], BAR2_SIZE);

	assert_int_equal(ntb_pci_parse_selector("0000:00:05.0", &s), 0);
	assert_int_equal(ntb_pci_find(&s, false, &f, err, sizeof(err)), 0);
	assert_string_equal(f.bdf, "0000:00:05.0");

	assert_int_equal(ntb_pci_parse_selector("class:0500", &s), 0);
	assert_int_equal(ntb_pci_find(&s, false, &f, err, sizeof(err)), 0);
	assert_string_equal(f.bdf, "0000:00:03.0");

	/* a device without profile: refused unless the caller names the BAR */
	assert_int_equal(ntb_pci_parse_selector("1af4:1041", &s), 0);
	assert_int_equal(ntb_pci_find(&s, false, &f, err, sizeof(err)), -ENODEV);
	assert_non_null(strstr(err, "no device profile"));
	assert_int_equal(ntb_pci_find(&s, true, &f, err, sizeof(err)), 0);
	assert_string_equal(f.bdf, "0000:00:01.0");
	assert_null(f.profile);

	assert_int_equal(ntb_pci_parse_selector("0000:00:09.0", &s), 0);
	assert_int_equal(ntb_pci_find(&s, true, &f, err, sizeof(err)), -ENODEV);
	assert_non_null(strstr(err, "none of the 3 PCI devices"));
}

/* libpci's fatal errors must come back as -EIO; the process must not exit. Each case runs
 * twice to show the trap is re-armed after a fatal error. */
static void test_libpci_fatal_no_exit(void **state)
{
	struct ntb_pci_selector s;
	struct ntb_pci_found f;
	struct ntb_pci_dev_info d[2];
	char err[256], dir[512];

	(void)state;
	assert_int_equal(ntb_pci_parse_selector("", &s), 0);
	/* a device directory whose name libpci cannot parse: libpci calls its fatal-error
	 * callback ("Couldn't parse entry name"), whose default exits the program */
	snprintf(dir, sizeof(dir), "%s/devices/garbage", root);
	assert_int_equal(mkdir(dir, 0755), 0);
	for (int round = 0; round < 2; round++) {
		err[0] = '\0';
		assert_int_equal(ntb_pci_find(&s, true, &f, err, sizeof(err)), -EIO);
		assert_non_null(strstr(err, "libpci:"));
		assert_non_null(strstr(err, "garbage"));
		assert_int_equal(ntb_pci_list(d, 2), -EIO);
	}
	assert_int_equal(rmdir(dir), 0);
	/* a device without its mandatory "vendor" file: another fatal error */
	snprintf(dir, sizeof(dir), "%s/devices/0000:00:05.0/vendor", root);
	assert_int_equal(unlink(dir), 0);
	err[0] = '\0';
	assert_int_equal(ntb_pci_find(&s, true, &f, err, sizeof(err)), -EIO);
	assert_non_null(strstr(err, "vendor"));
	write_file(strcat(strcpy(dir, root), "/devices/0000:00:05.0"), "vendor", "0x1af4\n");
	/* and the library works again afterwards */
	assert_int_equal(ntb_pci_list(d, 2), 2);
}

/* No PCI bus in sysfs (containers): an empty list, and a sentence saying so. */
static void test_no_pci_bus(void **state)
{
	struct ntb_pci_selector s;
	struct ntb_pci_found f;
	struct ntb_pci_dev_info d[2];
	char err[256];

	(void)state;
	ntb_pci_set_sysfs_root("/nonexistent/ntbsock-test");
	assert_int_equal(ntb_pci_list(d, 2), 0);
	assert_int_equal(ntb_pci_parse_selector("1af4:1110", &s), 0);
	assert_int_equal(ntb_pci_find(&s, false, &f, err, sizeof(err)), -ENODEV);
	assert_non_null(strstr(err, "no PCI devices at all"));
	ntb_pci_set_sysfs_root(root);
}

/* --- BAR mapping ------------------------------------------------------------------------------- */

static void test_map_wc_and_write_through(void **state)
{
	struct ntb_pci_bar_map m = { 0 };
	char err[512], path[512];
	uint32_t v = 0;
	int fd;

	(void)state;
	assert_int_equal(ntb_pci_map_bar("0000:00:03.0", 2, &m, err, sizeof(err)), 0);
	assert_non_null(m.base);
	assert_int_equal(m.size, BAR2_SIZE);
	assert_true(m.prefetch);
	assert_true(m.wc); /* prefetchable and resource2_wc exists */
	((volatile uint32_t *)m.base)[100] = 0xfeedf00d;
	ntb_pci_unmap_bar(&m);
	assert_null(m.base);
	ntb_pci_unmap_bar(&m); /* twice is harmless */
	dev_path(path, sizeof(path), "0000:00:03.0", "resource2_wc");
	fd = open(path, O_RDONLY);
	assert_true(fd >= 0);
	assert_int_equal(pread(fd, &v, 4, 400), 4);
	close(fd);
	assert_int_equal(v, 0xfeedf00d);

	/* prefetchable, but no _wc file: the plain resource file, not WC */
	assert_int_equal(ntb_pci_map_bar("0000:00:05.0", 2, &m, err, sizeof(err)), 0);
	assert_true(m.prefetch);
	assert_false(m.wc);
	ntb_pci_unmap_bar(&m);

	/* a non-prefetchable memory BAR (ivshmem's registers) */
	assert_int_equal(ntb_pci_map_bar("0000:00:03.0", 0, &m, err, sizeof(err)), 0);
	assert_int_equal(m.size, 256);
	assert_false(m.prefetch);
	assert_false(m.wc);
	ntb_pci_unmap_bar(&m);
}

static void test_map_errors(void **state)
{
	struct ntb_pci_bar_map m = { 0 };
	char err[512], path[512], target[600];

	(void)state;
	/* no such device */
	assert_int_equal(ntb_pci_map_bar("0000:00:09.0", 2, &m, err, sizeof(err)), -ENOENT);
	assert_non_null(strstr(err, "0000:00:09.0"));
	/* BAR out of range, unimplemented BAR, I/O BAR */
	assert_int_equal(ntb_pci_map_bar("0000:00:03.0", 6, &m, err, sizeof(err)), -EINVAL);
	assert_int_equal(ntb_pci_map_bar("0000:00:03.0", 1, &m, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "not an assigned memory BAR"));
	assert_int_equal(ntb_pci_map_bar("0000:00:01.0", 0, &m, err, sizeof(err)), -EINVAL);
	/* a memory BAR whose resource file is missing */
	assert_int_equal(ntb_pci_map_bar("0000:00:01.0", 1, &m, err, sizeof(err)), -ENOENT);
	assert_non_null(strstr(err, "resource1"));
	/* size mismatch between the resource line and the file */
	dev_path(path, sizeof(path), "0000:00:05.0", "resource2");
	assert_int_equal(truncate(path, 4096), 0);
	assert_int_equal(ntb_pci_map_bar("0000:00:05.0", 2, &m, err, sizeof(err)), -EINVAL);
	assert_int_equal(truncate(path, BAR2_SIZE), 0);
	/* owned by a kernel driver → -EBUSY naming it; pci-stub leaves the BARs alone */
	dev_path(path, sizeof(path), "0000:00:05.0", "driver");
	snprintf(target, sizeof(target), "../../../bus/pci/drivers/virtio-pci");
	assert_int_equal(symlink(target, path), 0);
	assert_int_equal(ntb_pci_map_bar("0000:00:05.0", 2, &m, err, sizeof(err)), -EBUSY);
	assert_non_null(strstr(err, "virtio-pci"));
	assert_non_null(strstr(err, "unbind"));
	assert_int_equal(unlink(path), 0);
	snprintf(target, sizeof(target), "../../../bus/pci/drivers/pci-stub");
	assert_int_equal(symlink(target, path), 0);
	assert_int_equal(ntb_pci_map_bar("0000:00:05.0", 2, &m, err, sizeof(err)), 0);
	ntb_pci_unmap_bar(&m);
	assert_int_equal(unlink(path), 0);
	/* vfio-pci claims a BAR only when it is used through VFIO: the shared memory stays
	 * mappable from sysfs (the pci backend's interrupt doorbells) */
	snprintf(target, sizeof(target), "../../../bus/pci/drivers/vfio-pci");
	assert_int_equal(symlink(target, path), 0);
	assert_int_equal(ntb_pci_map_bar("0000:00:05.0", 2, &m, err, sizeof(err)), 0);
	ntb_pci_unmap_bar(&m);
	assert_int_equal(unlink(path), 0);
}

/* Not permitted: as root, drop to nobody in a child (root bypasses file modes). */
static void test_map_eacces(void **state)
{
	char path[512];
	pid_t pid;
	int status;

	(void)state;
	dev_path(path, sizeof(path), "0000:00:05.0", "resource2");
	assert_int_equal(chmod(path, 0600), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct ntb_pci_bar_map m = { 0 };
		char err[512];
		int rc;

		if (geteuid() == 0) {
			if (setgid(65534) < 0 || setuid(65534) < 0)
				_exit(10);
		} else if (chmod(path, 0) < 0) {
			_exit(11);
		}
		rc = ntb_pci_map_bar("0000:00:05.0", 2, &m, err, sizeof(err));
		if (rc != -EACCES)
			_exit(12);
		if (strstr(err, "root") == NULL)
			_exit(13);
		_exit(0);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	assert_int_equal(chmod(path, 0600), 0);
}

static void test_errno_hints(void **state)
{
	(void)state;
	assert_non_null(strstr(ntb_pci_errno_hint(EACCES), "root"));
	assert_non_null(strstr(ntb_pci_errno_hint(EPERM), "lockdown"));
	assert_non_null(strstr(ntb_pci_errno_hint(EBUSY), "driver"));
	assert_non_null(strstr(ntb_pci_errno_hint(EINVAL), "rejected"));
	assert_string_equal(ntb_pci_errno_hint(EIO), strerror(EIO));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_selector_bdf),
		cmocka_unit_test(test_selector_id_class_any),
		cmocka_unit_test(test_selector_invalid),
		cmocka_unit_test(test_profile),
		cmocka_unit_test(test_selector_match),
		cmocka_unit_test(test_errno_hints),
		cmocka_unit_test_setup_teardown(test_list, setup_tree, teardown_tree),
		cmocka_unit_test_setup_teardown(test_find, setup_tree, teardown_tree),
		cmocka_unit_test_setup_teardown(test_libpci_fatal_no_exit, setup_tree, teardown_tree),
		cmocka_unit_test_setup_teardown(test_no_pci_bus, setup_tree, teardown_tree),
		cmocka_unit_test_setup_teardown(test_map_wc_and_write_through, setup_tree,
						teardown_tree),
		cmocka_unit_test_setup_teardown(test_map_errors, setup_tree, teardown_tree),
		cmocka_unit_test_setup_teardown(test_map_eacces, setup_tree, teardown_tree),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
