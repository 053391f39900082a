/* SPDX-License-Identifier: MIT */
/* The table of link backends. A backend is one file in ntb/backend/ that defines its struct
 * ntb_backend_ops (ntb_int.h) and one row here; its name is what a config's `backend` key and
 * struct ntb_link_params.backend say. */
#include <string.h>

#include "ntb/ntb_int.h"

static const struct ntb_backend_ops *const backends[] = {
	&ntb_shm_ops, /* backend/shm.c: a shared-memory file, the emulated link */
	&ntb_pci_ops, /* backend/pci.c: a PCI device's BAR (QEMU ivshmem, NTB adapters) */
};

const struct ntb_backend_ops *ntb_backend_find(const char *name)
{
	for (size_t i = 0; name && i < sizeof(backends) / sizeof(backends[0]); i++)
		if (strcmp(backends[i]->name, name) == 0)
			return backends[i];
	return NULL;
}

const char *ntb_backend_name(int i)
{
	if (i < 0 || (size_t)i >= sizeof(backends) / sizeof(backends[0]))
		return NULL;
	return backends[i]->name;
}

bool ntb_backend_known(const char *name)
{
	return ntb_backend_find(name) != NULL;
}
