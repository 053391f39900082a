// SPDX-License-Identifier: MIT
/* `ntbsock perf` side 1 — the forked process that connects and then streams or echoes on
 * command — and the control-socket and transport I/O helpers both sides use. */
#include "tools/perf_int.h"
#include "tools/tools_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* --- helpers ------------------------------------------------------------------------------ */

int perf_full_write(int fd, const void *buf, size_t len)
{
	const char *p = buf;

	while (len) {
		/* MSG_NOSIGNAL: a dead peer process is an error here, not a SIGPIPE */
		ssize_t n = send(fd, p, len, MSG_NOSIGNAL);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -EPIPE;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int perf_full_read(int fd, void *buf, size_t len)
{
	char *p = buf;

	while (len) {
		ssize_t n = read(fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -EPIPE;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

void perf_key(struct tp_key *k, pid_t pid)
{
	static const uint8_t mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };

	/* Laid out as preload/ does it: client 127.0.0.1:<pid>, server 127.0.0.2:PERF_PORT. */
	memset(k, 0, sizeof(*k));
	memcpy(k->bytes, mapped, 12);
	k->bytes[12] = 127;
	k->bytes[15] = 1;
	k->bytes[16] = (uint8_t)((uint16_t)pid >> 8);
	k->bytes[17] = (uint8_t)pid;
	memcpy(k->bytes + 18, mapped, 12);
	k->bytes[30] = 127;
	k->bytes[33] = 2;
	k->bytes[TP_KEY_PORT_OFF] = PERF_PORT >> 8;
	k->bytes[TP_KEY_PORT_OFF + 1] = PERF_PORT & 0xff;
}

/* Whether a wait has lasted PERF_STALL_MS since *SINCE; the clock is read only while waiting
 * (*SINCE 0: the first wait since progress starts the count), never per message. */
static bool stalled(uint64_t *since)
{
	uint64_t now = clock_mono_ns();

	if (!*since) {
		*since = now;
		return false;
	}
	return now - *since > (uint64_t)PERF_STALL_MS * 1000000u;
}

/* Send LEN bytes from BUF, waiting for queue room; 0 or a negative errno. */
int perf_send_all(struct tp_conn *c, const uint8_t *buf, size_t len)
{
	uint64_t last = 0;

	while (len) {
		struct iovec iov = { (void *)buf, len };
		ssize_t n = tp_send(c, &iov, 1);

		if (n > 0) {
			buf += n;
			len -= (size_t)n;
			last = 0;
			continue;
		}
		if (n != -EAGAIN)
			return n ? (int)n : -EPIPE;
		if (stalled(&last))
			return -ETIMEDOUT;
		int w = tp_wait(c, TP_EV_OUT | TP_EV_ERR, 1000);
		if (w < 0 && w != -EINTR)
			return w;
	}
	return 0;
}

/* Receive exactly LEN bytes into BUF; 0, -EPIPE at a premature end of stream, or an errno. */
int perf_recv_all(struct tp_conn *c, uint8_t *buf, size_t len)
{
	uint64_t last = 0;

	while (len) {
		struct iovec iov = { buf, len };
		ssize_t n = tp_recv(c, &iov, 1, 0);

		if (n > 0) {
			buf += n;
			len -= (size_t)n;
			last = 0;
			continue;
		}
		if (n == 0)
			return -EPIPE;
		if (n != -EAGAIN)
			return (int)n;
		if (stalled(&last))
			return -ETIMEDOUT;
		int w = tp_wait(c, TP_EV_IN | TP_EV_ERR, 1000);
		if (w < 0 && w != -EINTR)
			return w;
	}
	return 0;
}

void perf_conn_counters(struct tp_conn *c, uint64_t *ret_retx, uint64_t *ret_crc)
{
	struct tp_stats st;

	tp_conn_stats(c, &st);
	*ret_retx = st.retransmits;
	*ret_crc = st.crc_errors;
}

/* --- the child: connects, then streams or echoes on command --------------------------------- */

static int child_connect(const struct perf_opts *o, struct tp_link **ret_link,
			 struct tp_conn **ret_conn, char *msg, size_t msglen)
{
	struct ntb_link_params lp = o->lp;
	enum tp_reason reason = TP_REASON_NONE;
	struct tp_link *link;
	struct tp_conn *c;
	struct tp_key key;
	uint64_t start;
	int rc;

	lp.side = 1;
	rc = tp_link_open(&lp, &o->tpp, &link);
	if (rc < 0) {
		snprintf(msg, msglen, "side 1: tp_link_open: %s%s%s", strerror(-rc),
			 *ntb_strerror_detail() ? ": " : "", ntb_strerror_detail());
		return rc;
	}
	rc = ntb_link_wait_up(tp_link_ntb(link), PERF_SETUP_MS);
	if (rc < 0) {
		snprintf(msg, msglen, "side 1: link did not come up: %s", strerror(-rc));
		goto err_link;
	}
	start = clock_mono_ns();
	while (!tp_peer_listens(link, PERF_PORT)) {
		if (clock_mono_ns() - start > (uint64_t)PERF_SETUP_MS * 1000000u) {
			rc = -ETIMEDOUT;
			snprintf(msg, msglen, "side 1: the listener never appeared on the link");
			goto err_link;
		}
		usleep(1000);
	}
	perf_key(&key, getppid());
	rc = tp_connect(link, &key, PERF_SETUP_MS, &c, &reason);
	if (rc < 0) {
		snprintf(msg, msglen, "side 1: tp_connect: %s (%s)", strerror(-rc),
			 tp_reason_str(reason));
		goto err_link;
	}
	rc = tp_conn_confirm(c);
	if (rc < 0) {
		snprintf(msg, msglen, "side 1: tp_conn_confirm: %s", strerror(-rc));
		tp_abort(c);
		goto err_link;
	}
	*ret_link = link;
	*ret_conn = c;
	return 0;
err_link:
	tp_link_close(link);
	return rc;
}

/* Stream COUNT messages of SIZE bytes, numbered from FIRST: message n is the pattern window
 * at offset(n). */
static int child_stream(struct tp_conn *c, const uint8_t *pattern, size_t size, uint64_t first,
			uint64_t count)
{
	for (uint64_t n = first; n < first + count; n++) {
		int rc = perf_send_all(c, pattern + tool_pattern_offset(n), size);

		if (rc < 0)
			return rc;
	}
	return 0;
}

/* Echo COUNT messages of SIZE bytes back, numbered from FIRST; verifies each against the
 * pattern on the way. */
static int child_echo(struct tp_conn *c, const uint8_t *pattern, uint8_t *buf, size_t size,
		      uint64_t first, uint64_t count, bool *ret_verified)
{
	bool ok = true;

	for (uint64_t n = 0; n < count; n++) {
		int rc = perf_recv_all(c, buf, size);

		if (rc < 0)
			return rc;
		rc = perf_send_all(c, buf, size);
		if (rc < 0)
			return rc;
		/* verified after the echo left: the check is not part of the round trip */
		if (memcmp(buf, pattern + tool_pattern_offset(first + n), size) != 0)
			ok = false;
	}
	*ret_verified = ok;
	return 0;
}

int perf_child_main(const struct perf_opts *o, int ctl, const uint8_t *pattern,
		      size_t max_size, int cpu)
{
	struct perf_report rep;
	struct tp_link *link = NULL;
	struct tp_conn *c = NULL;
	struct perf_ctl cmd;
	uint8_t *buf = malloc(max_size);
	int rc;

	tool_pin_cpu(cpu);
	memset(&rep, 0, sizeof(rep));
	if (!buf) {
		rep.status = -ENOMEM;
		snprintf(rep.msg, sizeof(rep.msg), "side 1: out of memory");
		perf_full_write(ctl, &rep, sizeof(rep));
		return 1;
	}
	/* Wait until side 0 created the link and listens. */
	if (perf_full_read(ctl, &cmd, sizeof(cmd)) < 0)
		return 1;
	rep.status = child_connect(o, &link, &c, rep.msg, sizeof(rep.msg));
	if (perf_full_write(ctl, &rep, sizeof(rep)) < 0 || rep.status < 0)
		goto out;

	while (perf_full_read(ctl, &cmd, sizeof(cmd)) == 0 && cmd.cmd != PERF_CMD_QUIT) {
		uint64_t retx0, crc0, retx1, crc1;
		bool verified = true;

		perf_conn_counters(c, &retx0, &crc0);
		if (cmd.size > max_size)
			rc = -EINVAL;
		else if (cmd.cmd == PERF_CMD_STREAM)
			rc = child_stream(c, pattern, cmd.size, cmd.first, cmd.count);
		else
			rc = child_echo(c, pattern, buf, cmd.size, cmd.first, cmd.count,
					&verified);
		perf_conn_counters(c, &retx1, &crc1);
		memset(&rep, 0, sizeof(rep));
		rep.status = rc;
		rep.verified = verified;
		rep.retransmits = retx1 - retx0;
		rep.crc_errors = crc1 - crc0;
		if (rc < 0)
			snprintf(rep.msg, sizeof(rep.msg), "side 1: %s", strerror(-rc));
		if (perf_full_write(ctl, &rep, sizeof(rep)) < 0 || rc < 0)
			break;
	}
out:
	tp_close(c);
	tp_link_close(link);
	free(buf);
	return rep.status < 0 ? 1 : 0;
}
