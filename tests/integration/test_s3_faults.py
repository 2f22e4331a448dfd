"""Uploads and restores survive a flaky S3: a fault-injecting HTTP proxy in front of moto server."""

from __future__ import annotations

import http.client
import random
import socket
import struct
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from localcloud.moto_server import MotoServer
from tests.integration.remote_helpers import MB, digests, make_checkpoint, small_part_store

SLOW_DOWN = (b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code>'
             b"<Message>Please reduce your request rate.</Message></Error>")
HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length"}


class FaultProxy:
    """Forwards to moto; answers the first `first_n` requests with 503 SlowDown and then a `fraction`
    of the rest with 503 SlowDown or (`resets` of them) a TCP reset after the request was read, so the
    client never learns whether it was applied."""

    def __init__(self, upstream_port: int, *, first_n: int = 0, fraction: float = 0.0, resets: float = 0.5,
                 seed: int = 7) -> None:
        self.upstream_port, self.first_n = upstream_port, first_n
        self.fraction, self.resets = fraction, resets
        self.random = random.Random(seed)
        self.lock = threading.Lock()
        self.requests = 0
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
                fault = proxy.choose_fault()
                if fault == "reset":
                    self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    self.connection.close()
                    self.close_connection = True
                    return
                if fault == "503":
                    return self.reply(503, {"Content-Type": "application/xml"}, SLOW_DOWN)
                upstream = http.client.HTTPConnection("127.0.0.1", proxy.upstream_port, timeout=60)
                try:
                    upstream.request(self.command, self.path, body=body, headers=dict(self.headers))
                    response = upstream.getresponse()
                    data = response.read()
                    headers = {k: v for k, v in response.getheaders() if k.lower() not in HOP_BY_HOP}
                    length = response.getheader("Content-Length") if self.command == "HEAD" else None
                    self.reply(response.status, headers, data, length)
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


# After a SlowDown, adaptive retries cap the client's request rate near 1/s and raise it slowly again:
# right for S3, but many throttles make a test wait tens of seconds. By default: two throttles, then
# resets only; throttles spread over the whole transfer run with -m slow.
FAULT_RATES = [
    pytest.param((2, 0.12, 1.0), id="resets"),
    pytest.param((3, 0.2, 0.5), id="throttles-and-resets", marks=pytest.mark.slow),
]


@pytest.fixture(params=FAULT_RATES)
def flaky_s3(
    request: pytest.FixtureRequest, moto_server: MotoServer, aws_env: dict[str, str]
) -> Iterator[FaultProxy]:
    first_n, fraction, resets = request.param
    with FaultProxy(moto_server.port, first_n=first_n, fraction=fraction, resets=resets) as proxy:
        yield proxy


def test_upload_and_restore_through_503s_and_resets(
    flaky_s3: FaultProxy, bucket: str, tmp_path: Path
) -> None:
    store = small_part_store(bucket, "job-f", endpoint=flaky_s3.endpoint)
    first = make_checkpoint(tmp_path / "local", 1, sizes={"model.pt": 17 * MB + 5, "optim.pt": 2 * MB})
    second = make_checkpoint(tmp_path / "local", 2, sizes={"model.pt": 11 * MB, "extra/x.bin": 12345})
    assert store.upload(first, 1)
    assert store.upload(second, 2)
    restored = store.restore(tmp_path / "restored")
    assert restored is not None and digests(restored) == digests(second)
    assert flaky_s3.faults["503"] > 0 and flaky_s3.faults["reset"] > 0, flaky_s3.faults
    # Seen directly from moto (no proxy): exactly what was sent, and latest on the newest step.
    direct = small_part_store(bucket, "job-f")
    assert direct.latest_step() == 2
    assert digests(direct.restore(tmp_path / "direct")) == digests(second)  # type: ignore[arg-type]
