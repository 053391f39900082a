/* SPDX-License-Identifier: MIT */
/* Private interface of the shm backend: its client of an ivshmem server (shm_ivshmem.c). */
#ifndef NTBSOCK_NTB_SHM_INT_H
#define NTBSOCK_NTB_SHM_INT_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define NTB_IVS_PEERS 16

/* This process as a peer of an ivshmem server. Fields under LOCK after ntb_ivs_join(). */
struct ntb_ivs_client {
	pthread_mutex_t lock;
	int      sock;                     /* the server's socket; -1: closed */
	uint32_t own_id;                   /* our ivshmem peer id */
	int      rx_fd;                    /* eventfd of our vector 0: peers ring us on it */
	int64_t  peer_id[NTB_IVS_PEERS];   /* -1: free */
	int      peer_fd[NTB_IVS_PEERS];   /* eventfd of that peer's vector 0 */
};

/* Connect to the server at PATH and read the set-up: our id, the shared memory (its fd in
 * *RET_SHM_FD, the caller's to close), the other peers, our vector 0. 0 or -errno with the
 * reason in ERR; on error nothing stays open. */
int ntb_ivs_join(const char *path, struct ntb_ivs_client *c, int *ret_shm_fd, char *err,
		 size_t errlen);
/* Interrupt PEER_ID on vector 0 (reading the server's notifications first when PEER_ID is not
 * known yet). 0, -ENOENT (no such peer connected), -EIO. Thread-safe. */
int ntb_ivs_ring(struct ntb_ivs_client *c, uint32_t peer_id);
/* Close everything. */
void ntb_ivs_leave(struct ntb_ivs_client *c);

#endif
