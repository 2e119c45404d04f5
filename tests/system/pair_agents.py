#!/usr/bin/env python3
"""Traffic for the two-capture-point lab (tests/system/pairlab.py).

  pair_agents.py server ADDR PORT BYTES     answer each request with BYTES
  pair_agents.py client ADDR PORT N         N requests, one connection each
  pair_agents.py proxy LISTEN PORT UPSTREAM UPORT SNDBUF
                                            a terminating proxy: reads the
                                            server's answer as fast as it
                                            comes (held in the proxy's
                                            memory) and writes it to the
                                            client through a socket whose
                                            send buffer is SNDBUF (0: the
                                            kernel's default)

A request is "GET /object-<i> HTTP/1.0\\r\\n\\r\\n": its first bytes are what
tcpwhy matches a proxy's two connections by. Plain sockets and asyncio:
no code shared with tcpwhy.
"""
import asyncio
import socket
import sys
import threading


def server(addr, port, nbytes):
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((addr, port))
    s.listen(64)
    print("ready", flush=True)
    chunk = bytes(range(256)) * 256

    def serve(c):
        with c:
            req = b""
            while b"\r\n\r\n" not in req:
                got = c.recv(4096)
                if not got:
                    return
                req += got
            c.sendall(b"HTTP/1.0 200 OK\r\n\r\n")
            left = nbytes
            while left > 0:
                n = min(left, len(chunk))
                c.sendall(chunk[:n])
                left -= n
            c.shutdown(socket.SHUT_WR)
            while c.recv(4096):
                pass

    while True:
        c, _ = s.accept()
        threading.Thread(target=serve, args=(c,), daemon=True).start()


def client(addr, port, n):
    total = 0
    for i in range(n):
        with socket.create_connection((addr, port), timeout=60) as c:
            c.sendall(f"GET /object-{i} HTTP/1.0\r\n\r\n".encode())
            while True:
                got = c.recv(1 << 16)
                if not got:
                    break
                total += len(got)
    print(total, flush=True)


async def proxy(listen, port, up, uport, sndbuf):
    async def pump(reader, writer):
        while True:
            data = await reader.read(1 << 16)
            if not data:
                break
            # no drain: the proxy holds what the client cannot take yet
            writer.write(data)
        if writer.can_write_eof():
            writer.write_eof()
        await writer.drain()

    async def handle(cr, cw):
        sock = cw.get_extra_info("socket")
        if sndbuf:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, sndbuf)
        ur, uw = await asyncio.open_connection(up, uport)
        await asyncio.gather(pump(cr, uw), pump(ur, cw))
        cw.close()
        uw.close()

    srv = await asyncio.start_server(handle, listen, port)
    print("ready", flush=True)
    async with srv:
        await srv.serve_forever()


if __name__ == "__main__":
    what = sys.argv[1]
    if what == "server":
        server(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
    elif what == "client":
        client(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
    elif what == "proxy":
        asyncio.run(proxy(sys.argv[2], int(sys.argv[3]), sys.argv[4], int(sys.argv[5]), int(sys.argv[6])))
    else:
        sys.exit(__doc__)
