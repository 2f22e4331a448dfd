"""A small in-memory S3 for benchmarks that play many nodes at once: the calls the rendezvous makes
(PUT, GET, HEAD, DELETE, ListObjectsV2), S3's rules for them, and a latency added to every request.

moto serves the suite, but a ListObjectsV2 of 130 keys costs it about 40 ms of CPU, and 128 nodes
listing every 5 s then need more than one process of it can give on two shared cores: a benchmark on it
measures moto. This one answers from a dict under one lock, with the rules the rendezvous relies on:
- a PUT with `If-None-Match: *` fails with 412 PreconditionFailed when the key exists, and one with
  `If-Match: <etag>` with 412 when the object's ETag differs, or 404 NoSuchKey when it is absent
  (https://docs.aws.amazon.com/AmazonS3/latest/userguide/conditional-writes.html);
- the ETag of a single-part PUT is the quoted MD5 of its body; LastModified is S3's clock, listed in whole
  seconds (`2026-11-27T12:00:00.000Z`), and every response carries S3's `Date` (RFC 7231, seconds);
- a listing is in key order, at most 1,000 keys a page (more is never asked of it here).
One bucket, created by a PUT of its name; path-style (`/bucket/key`) or virtual-hosted requests.
"""

from __future__ import annotations

import hashlib
import threading
import time
from datetime import UTC, datetime
from email.utils import formatdate
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from urllib.parse import parse_qs, unquote, urlsplit
from xml.sax.saxutils import escape

PAGE_KEYS = 1000


class SmallS3:
    """Serves on 127.0.0.1 (a free port) from start to stop; `latency` seconds added to every request."""

    def __init__(self, latency: float = 0.0) -> None:
        self.latency = latency
        self.lock = threading.Lock()
        self.objects: dict[str, tuple[bytes, str, float]] = {}  # key -> (body, etag, last modified)
        self.buckets: set[str] = set()
        self.requests = 0
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.server.daemon_threads = True
        self.server.request_queue_size = 512
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def endpoint(self) -> str:
        return f"http://localhost:{self.server.server_address[1]}"

    def __enter__(self) -> SmallS3:
        self._thread.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.server.shutdown()
        self.server.server_close()
        self._thread.join(timeout=10)

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        s3 = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the base class's name
                pass

            def _answer(self, status: int, body: bytes = b"", headers: dict[str, str] | None = None) -> None:
                self.send_response(status)  # adds S3's Date
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(body)

            def _error(self, status: int, code: str) -> None:
                self._answer(status, f"<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>{code}</Code>"
                                     f"<Message>{code}</Message></Error>".encode())

            def _where(self) -> tuple[str, str, dict[str, list[str]]]:
                parts = urlsplit(self.path)
                name = unquote(parts.path).lstrip("/")
                host = self.headers.get("Host", "").split(":")[0]
                if host in ("localhost", "127.0.0.1"):
                    bucket, _, key = name.partition("/")
                else:
                    bucket, key = host.split(".")[0], name
                return bucket, key, parse_qs(parts.query)

            def _body(self) -> bytes:
                length = int(self.headers.get("Content-Length") or 0)
                return self.rfile.read(length) if length else b""

            def do_PUT(self) -> None:  # noqa: N802 - http.server's name
                body = self._body()
                time.sleep(s3.latency)
                bucket, key, _ = self._where()
                with s3.lock:
                    s3.requests += 1
                    if not key:
                        s3.buckets.add(bucket)
                        return self._answer(200)
                    current = s3.objects.get(f"{bucket}/{key}")
                    if self.headers.get("If-None-Match") == "*" and current is not None:
                        return self._error(412, "PreconditionFailed")
                    if (expected := self.headers.get("If-Match")) is not None:
                        if current is None:
                            return self._error(404, "NoSuchKey")
                        if current[1] != expected:
                            return self._error(412, "PreconditionFailed")
                    etag = f'"{hashlib.md5(body, usedforsecurity=False).hexdigest()}"'
                    s3.objects[f"{bucket}/{key}"] = (body, etag, time.time())
                self._answer(200, headers={"ETag": etag})

            def do_GET(self) -> None:  # noqa: N802
                time.sleep(s3.latency)
                bucket, key, query = self._where()
                if not key:
                    return self._list(bucket, query.get("prefix", [""])[0])
                with s3.lock:
                    s3.requests += 1
                    found = s3.objects.get(f"{bucket}/{key}")
                if found is None:
                    return self._error(404, "NoSuchKey")
                body, etag, modified = found
                self._answer(200, body, {"ETag": etag, "Last-Modified": formatdate(modified, usegmt=True),
                                         "Content-Type": "application/octet-stream"})

            def do_HEAD(self) -> None:  # noqa: N802
                self.do_GET()

            def do_DELETE(self) -> None:  # noqa: N802
                time.sleep(s3.latency)
                bucket, key, _ = self._where()
                with s3.lock:
                    s3.requests += 1
                    s3.objects.pop(f"{bucket}/{key}", None)
                self._answer(204)

            def _list(self, bucket: str, prefix: str) -> None:
                start = f"{bucket}/{prefix}"
                with s3.lock:
                    s3.requests += 1
                    found = sorted((name[len(bucket) + 1:], etag, len(body), modified)
                                   for name, (body, etag, modified) in s3.objects.items() if name.startswith(start))
                entries = "".join(
                    f"<Contents><Key>{escape(key)}</Key><LastModified>{_listed_time(modified)}</LastModified>"
                    f"<ETag>{escape(etag)}</ETag><Size>{size}</Size><StorageClass>STANDARD</StorageClass></Contents>"
                    for key, etag, size, modified in found[:PAGE_KEYS])
                xml = (f'<?xml version="1.0" encoding="UTF-8"?><ListBucketResult '
                       f'xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Name>{escape(bucket)}</Name>'
                       f"<Prefix>{escape(prefix)}</Prefix><KeyCount>{min(len(found), PAGE_KEYS)}</KeyCount>"
                       f"<MaxKeys>{PAGE_KEYS}</MaxKeys><IsTruncated>false</IsTruncated>{entries}</ListBucketResult>")
                self._answer(200, xml.encode(), {"Content-Type": "application/xml"})

        return Handler


def _listed_time(epoch: float) -> str:
    """LastModified as a listing gives it: S3's clock, whole seconds."""
    return datetime.fromtimestamp(int(epoch), UTC).strftime("%Y-%m-%dT%H:%M:%S.000Z")
