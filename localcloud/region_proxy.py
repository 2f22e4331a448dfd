"""One region's network in front of moto: an instance launched in region R gets this proxy of R as its
AWS_ENDPOINT_URL. Every request is forwarded to moto as it came (its Host header and signature untouched, so
moto's IAM stand-in checks it exactly as before); one that goes to another region is held for that pair's
round trip, and its request and response bodies cross at the link's bandwidth, each instance's own
(localcloud/region_link.py).
A request's region is its bucket's (the end of the bucket's name) for S3, else the region its signature is
scoped to. Same-region requests pass at once.

It counts the bytes each caller (the access key it signs with: an instance's role) moved across regions.
"""

from __future__ import annotations

import http.client
import re
import socket
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from localcloud.region_link import CrossRegionLink, LinkPacer, bucket_region

CHUNK = 16 * 1024  # bodies cross in pieces this size, so a slow link delivers them gradually, as a network does
# Hop-by-hop headers (RFC 9110 §7.6.1) and those this proxy sets itself; every other header goes as it came.
NOT_FORWARDED = {"connection", "keep-alive", "proxy-connection", "te", "trailer", "transfer-encoding", "upgrade",
                 "expect", "content-length"}
_SCOPE = re.compile(r"Credential=([^/,\s]+)/[0-9]{8}/([^/]+)/([^/]+)/")


@dataclass(frozen=True)
class Target:
    caller: str  # the access key the request is signed with ("" unsigned)
    region: str  # where the request goes


def request_target(headers: Any, path: str, here: str) -> Target:
    """Who sends this request, and to which region: an S3 bucket's region, else its signature's scope."""
    scope = _SCOPE.search(headers.get("Authorization") or "")
    caller, scoped, service = scope.groups() if scope else ("", here, "")
    if service == "s3":
        host = (headers.get("Host") or "").split(":", 1)[0]
        named = host.rsplit(".localhost", 1)[0] if host.endswith(".localhost") else path.lstrip("/").split("/", 1)[0]
        bucket = named.split("?", 1)[0]
        return Target(caller, bucket_region(bucket) or scoped if bucket else scoped)
    return Target(caller, scoped)


@dataclass
class RegionProxy:
    region: str
    upstream_port: int  # moto's
    link: CrossRegionLink
    port: int = 0
    crossed: dict[str, int] = field(default_factory=dict)  # caller → bytes of bodies moved across regions
    _server: ThreadingHTTPServer | None = None
    _thread: threading.Thread | None = None
    _open: set[socket.socket] = field(default_factory=set)
    _pacers: dict[str, LinkPacer] = field(default_factory=dict)  # caller → its bandwidth to other regions
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def endpoint(self) -> str:
        return f"http://localhost:{self.port}"  # `localhost`, as moto's own: moto parses bucket paths only then

    def start(self) -> RegionProxy:
        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), _handler_for(self))
        self._server.daemon_threads = True
        self.port = int(self._server.server_address[1])
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.1},
                                        name=f"region-proxy-{self.region}", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop listening and cut every connection still open (a caller's request fails, as a network's end)."""
        if self._server is None:
            return
        self._server.shutdown()
        with self._lock:
            for connection in list(self._open):
                try:
                    connection.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=10)
        self._server = None

    def bytes_crossed(self, caller: str | None = None) -> int:
        """Bytes moved across regions so far: by one caller's access key, or by every caller."""
        with self._lock:
            return self.crossed.get(caller, 0) if caller is not None else sum(self.crossed.values())

    def count(self, caller: str, size: int) -> None:
        with self._lock:
            self.crossed[caller] = self.crossed.get(caller, 0) + size

    def pacer(self, caller: str) -> LinkPacer:
        """The caller's link to other regions: EC2 bounds each instance's bandwidth, not a region's."""
        with self._lock:
            return self._pacers.setdefault(caller, LinkPacer(self.link))

    def opened(self, connection: socket.socket, is_open: bool) -> None:
        with self._lock:
            (self._open.add if is_open else self._open.discard)(connection)


def _handler_for(proxy: RegionProxy) -> type[BaseHTTPRequestHandler]:
    class Forward(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, and `Expect: 100-continue` answered as S3 does
        upstream: http.client.HTTPConnection | None = None

        def setup(self) -> None:
            super().setup()
            proxy.opened(self.connection, True)

        def finish(self) -> None:
            proxy.opened(self.connection, False)
            if self.upstream is not None:
                self.upstream.close()
            super().finish()

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
            pass  # moto logs every request already

        def forward(self) -> None:
            try:
                self._forward()
            except (BrokenPipeError, ConnectionResetError):
                self.close_connection = True  # the caller went away mid-request: an instance lost power

        def _forward(self) -> None:
            target = request_target(self.headers, self.path, proxy.region)
            away = target.region != proxy.region
            body = self._request_body()
            if away:
                time.sleep(proxy.link.round_trip_seconds(proxy.region, target.region))
                self._cross(body, target.caller)
            status, headers, answer = self._ask_moto(body)
            self.send_response_only(status, headers.get("reason"))
            for name, value in headers["list"]:
                self.send_header(name, value)
            length = len(answer) if self.command != "HEAD" else int(headers.get("content-length") or 0)
            if status not in (204, 304):
                self.send_header("Content-Length", str(length))
            self.end_headers()
            for start in range(0, len(answer), CHUNK):
                piece = answer[start:start + CHUNK]
                if away:
                    self._cross(piece, target.caller)
                self.wfile.write(piece)
            self.wfile.flush()

        def _cross(self, data: bytes, caller: str) -> None:
            if data:
                proxy.pacer(caller).pass_bytes(len(data))
                proxy.count(caller, len(data))

        def _request_body(self) -> bytes:
            if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
                pieces = []
                while size := int(self.rfile.readline().split(b";", 1)[0].strip() or b"0", 16):
                    pieces.append(self.rfile.read(size))
                    self.rfile.readline()
                while self.rfile.readline().strip():  # trailers, then the blank line
                    pass
                return b"".join(pieces)
            return self.rfile.read(int(self.headers.get("Content-Length") or 0))

        def _ask_moto(self, body: bytes) -> tuple[int, dict[str, Any], bytes]:
            if self.upstream is None:
                self.upstream = http.client.HTTPConnection("127.0.0.1", proxy.upstream_port, timeout=300)
            upstream = self.upstream
            upstream.putrequest(self.command, self.path, skip_host=True, skip_accept_encoding=True)
            for name, value in self.headers.items():
                if name.lower() not in NOT_FORWARDED:
                    upstream.putheader(name, value)
            if body or self.command in ("PUT", "POST", "PATCH"):
                upstream.putheader("Content-Length", str(len(body)))
            upstream.endheaders(body or None)
            response = upstream.getresponse()
            answer = response.read()
            if response.will_close:
                upstream.close()
                self.upstream = None
            kept = [(name, value) for name, value in response.getheaders() if name.lower() not in NOT_FORWARDED]
            return response.status, {"reason": response.reason, "list": kept,
                                     "content-length": response.getheader("Content-Length")}, answer

        do_GET = do_PUT = do_POST = do_HEAD = do_DELETE = do_PATCH = do_OPTIONS = forward

    return Forward
