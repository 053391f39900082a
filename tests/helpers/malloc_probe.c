// SPDX-License-Identifier: MIT
/* The library must leave the host program's memory allocator as it found it: a block of 512 KiB
 * is one glibc serves from mmap() (its default mmap threshold is 128 KiB), unless something
 * before main() freed a larger mmap'ed block and so raised the threshold (the library's config
 * buffer once did, and every large calloc() of the program then cleared heap pages). Each
 * block's own chunk header says whether mmap() served it (glibc's IS_MMAPPED bit: another
 * allocator, a sanitizer's, gives other answers, which the test compares with a run without
 * the library).
 *
 *   malloc_probe [HOST PORT]
 *       with HOST and PORT, first a TCP connection there (the library's first-connection
 *       paths run); prints "mmapped N": how many of 4 blocks of 512 KiB came from mmap(). */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	if (argc == 3) {
		struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[2])) };
		int fd = socket(AF_INET, SOCK_STREAM, 0);

		if (fd < 0 || inet_pton(AF_INET, argv[1], &sa.sin_addr) != 1 ||
		    connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
			perror("malloc_probe: connect");
			return 1;
		}
		close(fd);
	}
	void *p[4];
	int mapped = 0;

	for (int i = 0; i < 4; i++) {
		size_t hdr = 0;

		p[i] = malloc(512 * 1024);
		if (p[i]) /* the chunk's size word, in front of the block */
			memcpy(&hdr, (const void *)((uintptr_t)p[i] - sizeof(hdr)), sizeof(hdr));
		mapped += (hdr & 2u) != 0; /* (IS_MMAPPED) */
	}
	for (int i = 0; i < 4; i++)
		free(p[i]);
	printf("mmapped %d\n", mapped);
	return 0;
}
