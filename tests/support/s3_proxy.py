"""A fault-injecting, optionally slow HTTP proxy in front of moto server: S3 as it is on a bad day."""

from __future__ import annotations

import http.client
import random
import socket
import struct
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote, urlsplit

SLOW_DOWN = (b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code>'
             b"<Message>Please reduce your request rate.</Message></Error>")
KEY_TOO_LONG = (b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>KeyTooLongError</Code>'
                b"<Message>Your key is too long</Message></Error>")
KEY_LIMIT_BYTES = 1024  # real S3 refuses a longer key; moto stores it
HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length"}


def object_key(path: str, host: str) -> str:
    """The key a request names, path-style (`/bucket/key`, as for localhost) or virtual-hosted."""
    name = unquote(urlsplit(path).path).lstrip("/")
    return name.partition("/")[2] if host.split(":")[0] in ("localhost", "127.0.0.1") else name


class FaultProxy:
    """Forwards to moto; answers the first `first_n` requests with 503 SlowDown and then a `fraction`
    of the rest with 503 SlowDown or (`resets` of them) a TCP reset after the request was read, so the
    client never learns whether it was applied. `delay` seconds are added to every forwarded request
    that sends a body (a slow uplink). A write of a key over 1024 bytes is refused, as S3 does.
    `before_write(key)` is called before a write (PUT or POST) is forwarded: it may hold it. `write_fault(key)`
    may answer a write with a fault of its own ("503" or "reset"), whatever the counts above say.
    `latency` seconds are added to every forwarded request (S3's own round trip, far from the client)."""

    def __init__(self, upstream_port: int, *, first_n: int = 0, fraction: float = 0.0, resets: float = 0.5,
                 seed: int = 7, delay: float = 0.0, before_write: Callable[[str], None] | None = None,
                 write_fault: Callable[[str], str | None] | None = None, latency: float = 0.0) -> None:
        self.upstream_port, self.first_n, self.delay, self.latency = upstream_port, first_n, delay, latency
        self.before_write, self.write_fault = before_write, write_fault
        self.fraction, self.resets = fraction, resets
        self.random = random.Random(seed)
        self.lock = threading.Lock()
        self.requests = 0
        self.bytes_served = 0  # the bodies of GETs: what clients downloaded
        self.gets: list[tuple[float, str, bool, int]] = []  # each GET answered: monotonic time, key, ranged, bytes
        self.faults = {"503": 0, "reset": 0}
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self.handler())
        self.server.daemon_threads = True

    @property
    def endpoint(self) -> str:
        return f"http://localhost:{self.server.server_address[1]}"

    def choose_fault(self) -> str | None:
        with self.lock:
            self.requests += 1
            if self.requests <= self.first_n:
                fault: str | None = "503"
            elif self.random.random() < self.fraction:
                fault = "reset" if self.random.random() < self.resets else "503"
            else:
                fault = None
            if fault:
                self.faults[fault] += 1
            return fault

    def handler(self) -> type[BaseHTTPRequestHandler]:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_any(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if self.command in ("PUT", "POST") and \
                        len(object_key(self.path, self.headers.get("Host", "")).encode()) > KEY_LIMIT_BYTES:
                    return self.reply(400, {"Content-Type": "application/xml"}, KEY_TOO_LONG)
                fault = proxy.choose_fault()
                if self.command in ("PUT", "POST") and proxy.write_fault is not None:
                    fault = proxy.write_fault(object_key(self.path, self.headers.get("Host", ""))) or fault
                if fault == "reset":
                    self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    self.connection.close()
                    self.close_connection = True
                    return
                if fault == "503":
                    return self.reply(503, {"Content-Type": "application/xml"}, SLOW_DOWN)
                if body and proxy.delay:
                    time.sleep(proxy.delay)
                if proxy.latency:
                    time.sleep(proxy.latency)
                if self.command in ("PUT", "POST") and proxy.before_write is not None:
                    proxy.before_write(object_key(self.path, self.headers.get("Host", "")))
                upstream = http.client.HTTPConnection("127.0.0.1", proxy.upstream_port, timeout=60)
                try:
                    upstream.request(self.command, self.path, body=body, headers=dict(self.headers))
                    response = upstream.getresponse()
                    data = response.read()
                    headers = {k: v for k, v in response.getheaders() if k.lower() not in HOP_BY_HOP}
                    length = response.getheader("Content-Length") if self.command == "HEAD" else None
                    self.reply(response.status, headers, data, length)
                    if self.command == "GET":
                        with proxy.lock:
                            proxy.gets.append((time.monotonic(), object_key(self.path, self.headers.get("Host", "")),
                                               "Range" in self.headers, len(data)))
                finally:
                    upstream.close()

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = do_any

            def reply(
                self, status: int, headers: dict[str, str], data: bytes, length: str | None = None
            ) -> None:
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", length or str(len(data)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)
                if self.command == "GET":
                    with proxy.lock:
                        proxy.bytes_served += len(data)

            def finish(self) -> None:
                try:
                    super().finish()
                except OSError:
                    pass  # the socket was reset on purpose

            def log_message(self, format: str, *args: object) -> None:
                pass

        return Handler

    def __enter__(self) -> FaultProxy:
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
