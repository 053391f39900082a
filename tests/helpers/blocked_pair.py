# SPDX-License-Identifier: MIT
# Two threads blocked while their connections move (a failover to TCP or to another link):
#   blocked_pair.py server PORT PAUSE [GATE]  -- on 127.0.0.2: accept two connections, wait
#       PAUSE s (with GATE: until the file GATE exists, PAUSE s at most; the test makes it once
#       the move it causes happened, so that a slow machine cannot let the pause end first),
#       the client's threads blocked meanwhile; send 1 MiB on the first and close it, then read
#       the second to its end and check its 8 MiB; prints "SERVER <bytes> ok|bad".
#   blocked_pair.py client PORT        -- from 127.0.0.1: one thread blocked in recv() on the
#       first connection, one in sendall() of 8 MiB on the second, each checking its bytes;
#       prints "CLIENT recv=ok send=ok" when both did.
import os
import socket
import sys
import threading
import time

DOWN = bytes(i * 31 % 251 for i in range(1 << 20))
UP = bytes((i * 17) % 253 for i in range(8 << 20))


def server(port, pause, gate=None):
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.2", port))
    s.listen(2)
    a, _ = s.accept()
    b, _ = s.accept()
    if gate:
        end = time.monotonic() + pause
        while not os.path.exists(gate) and time.monotonic() < end:
            time.sleep(0.01)
    else:
        time.sleep(pause)
    a.sendall(DOWN)
    a.close()
    got = bytearray()
    while True:
        x = b.recv(1 << 16)
        if not x:
            break
        got += x
    print("SERVER", len(got), "ok" if got == UP else "bad", flush=True)


def client(port):
    a = socket.create_connection(("127.0.0.2", port), source_address=("127.0.0.1", 0))
    b = socket.create_connection(("127.0.0.2", port), source_address=("127.0.0.1", 0))
    res = {}

    def reader():
        got = bytearray()
        while True:
            x = a.recv(1 << 16)  # blocks until the server's pause ends
            if not x:
                break
            got += x
        res["recv"] = "ok" if got == DOWN else "bad %d" % len(got)

    def writer():
        b.sendall(UP)  # blocks: the server does not read during its pause
        b.shutdown(socket.SHUT_WR)
        res["send"] = "ok"

    t1 = threading.Thread(target=reader)
    t2 = threading.Thread(target=writer)
    t1.start()
    t2.start()
    t1.join(30)
    t2.join(30)
    print("CLIENT recv=%s send=%s" % (res.get("recv"), res.get("send")), flush=True)


if __name__ == "__main__":
    if sys.argv[1] == "server":
        server(int(sys.argv[2]), float(sys.argv[3]), sys.argv[4] if len(sys.argv) > 4 else None)
    else:
        client(int(sys.argv[2]))
