"""A local EC2 instance metadata service (IMDSv2 only) for tests and the local spot cloud.

Real HTTP on 127.0.0.1 with the real paths, formats and token rules: `PUT /latest/api/token` needs the
TTL header (400 otherwise), every GET needs a live token (401 otherwise), absent notices are 404.
Notices are injected in-process (`announce_interruption`, ...) or, from another process, through
`POST /_control/interrupt?in_seconds=N&action=terminate`, `/_control/rebalance`,
`/_control/lifecycle?state=Terminated` and `/_control/clear`.

    python -m localcloud.fake_imds --port 8111 --instance-id i-0abc --region eu-west-1
"""

from __future__ import annotations

import argparse
import json
import secrets
import signal
import sys
import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

from localcloud.served import Served

TOKEN_TTL_HEADER = "X-aws-ec2-metadata-token-ttl-seconds"
TOKEN_HEADER = "X-aws-ec2-metadata-token"


@dataclass(frozen=True)
class RoleCredentials:
    """An instance profile role's temporary credentials, as EC2 serves them under
    iam/security-credentials/<role> (https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/instance-metadata-security-credentials.html)."""

    role_name: str
    access_key_id: str
    secret_access_key: str
    token: str
    expiration: str  # ISO 8601, e.g. 2026-11-01T18:00:00Z

    def document(self) -> dict[str, str]:
        return {"Code": "Success", "LastUpdated": iso_in(0), "Type": "AWS-HMAC",
                "AccessKeyId": self.access_key_id, "SecretAccessKey": self.secret_access_key,
                "Token": self.token, "Expiration": self.expiration}


def iso_in(seconds: float) -> str:
    """IMDS timestamp format: 2026-11-01T12:00:00Z."""
    return (datetime.now(UTC) + timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")


class FakeImds(Served):
    def __init__(
        self,
        *,
        instance_id: str = "i-0123456789abcdef0",
        region: str = "us-east-1",
        port: int = 0,
        instance_type: str = "g5.xlarge",
        local_ipv4: str = "127.0.0.1",
        market: str = "spot",
        availability_zone: str | None = None,
        role: RoleCredentials | None = None,
        ami_id: str = "ami-0123456789abcdef0",
    ) -> None:
        if market not in ("spot", "on-demand"):
            raise ValueError(f"market must be 'spot' or 'on-demand', got {market!r}")
        self.instance_id, self.region, self.instance_type = instance_id, region, instance_type
        self.ami_id = ami_id  # the image it booted from (the environment cache's key holds it)
        self.market = market  # instance-life-cycle: what the instance is billed as
        self.availability_zone = availability_zone or region + "a"
        self.local_ipv4 = local_ipv4  # each node of a multi-node job gets its own loopback address
        self.port = port
        self.role = role  # the instance profile's role: its credentials, as EC2 serves them
        self._lock = threading.Lock()
        self._tokens: dict[str, float] = {}
        self._instance_action: dict | str | None = None  # a str: a body that is not the documented JSON
        self.failing_gets = 0  # the next this many metadata GETs answer HTTP 500
        self._rebalance: dict | None = None
        self._lifecycle = "InService"
        self.token_requests = 0
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    # ---- lifecycle ----------------------------------------------------------------------------
    def start(self) -> FakeImds:
        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), self._handler_class())
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, name="fake-imds", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    # ---- notices ------------------------------------------------------------------------------
    def announce_interruption(self, action: str = "terminate", in_seconds: float = 120) -> None:
        with self._lock:
            self._instance_action = {"action": action, "time": iso_in(in_seconds)}

    def announce_raw_interruption(self, body: str) -> None:
        """spot/instance-action answering 200 with a body that is not the documented JSON."""
        with self._lock:
            self._instance_action = body

    def fail_gets(self, count: int) -> None:
        """The next `count` metadata GETs answer HTTP 500, as a struggling metadata service may."""
        with self._lock:
            self.failing_gets = count

    def _take_failure(self) -> bool:
        with self._lock:
            if self.failing_gets <= 0:
                return False
            self.failing_gets -= 1
            return True

    def recommend_rebalance(self) -> None:
        with self._lock:
            self._rebalance = {"noticeTime": iso_in(0)}

    def set_target_lifecycle_state(self, state: str) -> None:
        with self._lock:
            self._lifecycle = state

    def clear(self) -> None:
        """Withdraw every notice and return to InService."""
        with self._lock:
            self._instance_action, self._rebalance, self._lifecycle = None, None, "InService"

    def revoke_tokens(self) -> None:
        """Forget every issued token, as a restarted metadata service would (clients then get 401)."""
        with self._lock:
            self._tokens.clear()

    # ---- the service --------------------------------------------------------------------------
    def metadata(self, path: str) -> str | None:
        """Body for a GET of `path`, or None for 404."""
        with self._lock:
            documents: dict[str, object] = {
                "/latest/meta-data/instance-id": self.instance_id,
                "/latest/meta-data/instance-type": self.instance_type,
                "/latest/meta-data/ami-id": self.ami_id,
                "/latest/meta-data/local-ipv4": self.local_ipv4,
                "/latest/meta-data/placement/region": self.region,
                "/latest/meta-data/placement/availability-zone": self.availability_zone,
                "/latest/meta-data/instance-life-cycle": self.market,
                "/latest/meta-data/autoscaling/target-lifecycle-state": self._lifecycle,
                "/latest/meta-data/spot/instance-action": self._instance_action,
                "/latest/meta-data/events/recommendations/rebalance": self._rebalance,
                **self._credential_documents(),
                "/latest/dynamic/instance-identity/document": {
                    "instanceId": self.instance_id, "region": self.region,
                    "availabilityZone": self.availability_zone, "instanceType": self.instance_type,
                },
            }
        value = documents.get(path.rstrip("/"))
        if value is None:
            return None
        return value if isinstance(value, str) else json.dumps(value)

    def _credential_documents(self) -> dict[str, object]:
        if self.role is None:
            return {}
        base = "/latest/meta-data/iam/security-credentials"
        return {base: self.role.role_name, f"{base}/{self.role.role_name}": self.role.document()}

    def issue_token(self, ttl_header: str | None) -> str | None:
        """A new token for a valid TTL header (1..21600), else None."""
        try:
            ttl = int(ttl_header or "")
        except ValueError:
            return None
        if not 1 <= ttl <= 21600:
            return None
        token = secrets.token_urlsafe(32)
        with self._lock:
            self.token_requests += 1
            self._tokens[token] = time.monotonic() + ttl
        return token

    def token_valid(self, token: str | None) -> bool:
        with self._lock:
            return token is not None and self._tokens.get(token, 0.0) > time.monotonic()

    def control(self, path: str, query: dict[str, list[str]]) -> bool:
        """Apply a /_control/ command from another process; False for an unknown one."""
        arg = {name: values[-1] for name, values in query.items()}
        if path == "/_control/interrupt":
            self.announce_interruption(arg.get("action", "terminate"), float(arg.get("in_seconds", 120)))
        elif path == "/_control/rebalance":
            self.recommend_rebalance()
        elif path == "/_control/lifecycle" and arg.get("state"):
            self.set_target_lifecycle_state(arg["state"])
        elif path == "/_control/clear":
            self.clear()
        else:
            return False
        return True

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        imds = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_PUT(self) -> None:
                self._discard_body()
                if urlsplit(self.path).path != "/latest/api/token":
                    return self._reply(405, "")
                token = imds.issue_token(self.headers.get(TOKEN_TTL_HEADER))
                if token is None:
                    return self._reply(400, "")
                ttl = self.headers[TOKEN_TTL_HEADER]
                self._reply(200, token, {TOKEN_TTL_HEADER: ttl})

            def do_GET(self) -> None:
                if not imds.token_valid(self.headers.get(TOKEN_HEADER)):
                    return self._reply(401, "")
                if imds._take_failure():
                    return self._reply(500, "")
                body = imds.metadata(urlsplit(self.path).path)
                self._reply(404, "") if body is None else self._reply(200, body)

            def do_POST(self) -> None:
                self._discard_body()
                parts = urlsplit(self.path)
                try:
                    known = imds.control(parts.path, parse_qs(parts.query))
                except ValueError as error:
                    return self._reply(400, f"{error}\n")
                self._reply(200, "ok\n") if known else self._reply(404, "unknown control\n")

            def _discard_body(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                if length:
                    self.rfile.read(length)

            def _reply(self, status: int, body: str, headers: dict[str, str] | None = None) -> None:
                data = body.encode()
                self.send_response(status)
                self.send_header("Content-Type", "text/plain")
                self.send_header("Content-Length", str(len(data)))
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.end_headers()
                try:
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the caller is gone (an instance powered off mid-request): no one to answer

            def log_message(self, format: str, *args: object) -> None:
                pass  # Quiet: the agent's own logs say what it asked.

        return Handler


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m localcloud.fake_imds", description=__doc__.split("\n")[0])
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (0: any free one)")
    parser.add_argument("--instance-id", default="i-0123456789abcdef0")
    parser.add_argument("--region", default="us-east-1")
    parser.add_argument("--instance-type", default="g5.xlarge")
    parser.add_argument("--market", choices=("spot", "on-demand"), default="spot")
    args = parser.parse_args(argv)
    imds = FakeImds(instance_id=args.instance_id, region=args.region, port=args.port,
                    instance_type=args.instance_type, market=args.market)
    try:
        imds.start()
    except OSError as error:
        print(f"fake IMDS: cannot listen on 127.0.0.1:{args.port}: {error.strerror}", file=sys.stderr)
        return 2
    stopped = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stopped.set())
    print(imds.url, flush=True)  # The one line a parent process reads to find the port.
    while not stopped.wait(0.5):
        pass
    imds.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
