#!/bin/sh
# SPDX-License-Identifier: MIT
# A signal ends a waiting poll(), select() or epoll_wait() over an NTB connection with EINTR, as
# it ends the kernel's: the wait of a client whose ring is full (nobody reads) and that has
# nothing to read, interrupted by SIGALRM 20 ms in, 3 s allowed, while a ping every millisecond on
# another connection of the process wakes its waits. The library's waits sleep in pieces (a
# doorbell, a capped sleep) and look at their fds between them; a signal that came there ran its
# handler and the next sleep went on to the timeout (CPython's testInterruptedSendtoTimeout,
# about one run in ten). Each wait must end by the
# signal within a second, 50 times per call, over a loopback link (conf/examples/loopback.conf:
# client and server in one process), and the same without the library first.
. "$(dirname "$0")/lib.sh"
pl_setup signals
pl_need python3
LC=$PL_TMP/lo.conf
sed "s#/dev/shm/ntbsock-loopback#$PL_LINK#" "$ROOT/conf/examples/loopback.conf" >"$LC"
grep -q "$PL_LINK" "$LC" || pl_fail "cannot point the example config at the test's link file"

cat >"$PL_TMP/sig.py" <<'PY'
import select, signal, socket, sys, threading, time

class Alarm(Exception):
    pass

def on_alarm(signum, frame):
    raise Alarm()  # (a handler that returns would let Python retry the call: PEP 475)

signal.signal(signal.SIGALRM, on_alarm)
srv = socket.socket()
srv.bind(("127.0.0.1", 0))
srv.listen()
c = socket.create_connection(srv.getsockname())
s, _ = srv.accept()
c.setblocking(False)
sent = 0
while True:  # fill the connection: nobody reads s
    try:
        sent += c.send(b"a" * 65536)
    except BlockingIOError:
        break
# Wake-ups for the waits: a ping every millisecond over a second connection of this process, whose
# reader sleeps between them, so each ping rings this process (the library's waits wake, look
# at their fds and sleep again: the gaps a signal fell into). SIGALRM is blocked in these
# threads: the kernel would otherwise deliver it to one of them, and no wait would end.
stop = False
psrv = socket.socket()
psrv.bind(("127.0.0.1", 0))
psrv.listen()
pa = socket.create_connection(psrv.getsockname())
pb, _ = psrv.accept()

def pinger():
    signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGALRM])
    while not stop:
        pa.send(b"p")
        time.sleep(0.001)

def ponger():
    signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGALRM])
    while pb.recv(64):
        pass

threads = [threading.Thread(target=pinger), threading.Thread(target=ponger)]
for t in threads:
    t.start()
ep = select.epoll()
ep.register(c.fileno(), select.EPOLLIN | select.EPOLLOUT)
p = select.poll()
p.register(c.fileno(), select.POLLIN | select.POLLOUT)
waits = {
    "poll": lambda: p.poll(3000),
    "select": lambda: select.select([c], [c], [], 3.0),
    "epoll": lambda: ep.poll(3.0),
}
bad = 0
worst = 0.0
for name, wait in waits.items():
    for i in range(50):
        t0 = time.monotonic()
        signal.setitimer(signal.ITIMER_REAL, 0.02)
        try:
            r = wait()
            got = "returned %r" % (r,)
        except Alarm:
            got = "interrupted"
        signal.setitimer(signal.ITIMER_REAL, 0)
        dt = time.monotonic() - t0
        worst = max(worst, dt)
        if got != "interrupted" or dt > 1.0:
            bad += 1
            print("%s %d: %s after %.3f s" % (name, i, got, dt))
stop = True
threads[0].join()
pa.close()
threads[1].join()
print("sent %d bytes before EAGAIN; %d of 150 waits not ended by the signal; longest %.3f s"
      % (sent, bad, worst))
sys.exit(1 if bad else 0)
PY

python3 "$PL_TMP/sig.py" || pl_fail "kernel TCP: a wait was not ended by the signal"
echo "kernel TCP: every wait ended by the signal"
NTBSOCK_CONF=$LC NTBSOCK_LOG=info NTBSOCK_LOG_FILE=$PL_TMP/lo.log LD_PRELOAD=$(pl_preload) \
	python3 "$PL_TMP/sig.py" || pl_fail "over ntb: a wait was not ended by the signal"
pl_assert_log lo "ntb (link lo"
pl_refute_log lo ": tcp ("
echo "signals end waits over ntb as over kernel TCP: ok"
