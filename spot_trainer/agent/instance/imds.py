"""IMDSv2 client: the instance's view of spot notices, rebalance advice and its Auto Scaling state.

Every request carries a session token from `PUT /latest/api/token`. The token is cached and fetched
again shortly before its TTL runs out, or at once when the service answers 401 (it was restarted or
the token was revoked). Connection errors are retried a bounded number of times with backoff, so a
briefly busy metadata service does not look like "no notice".
"""

from __future__ import annotations

import json
import os
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any

DEFAULT_ENDPOINT = "http://169.254.169.254"
TOKEN_TTL_HEADER = "X-aws-ec2-metadata-token-ttl-seconds"
TOKEN_HEADER = "X-aws-ec2-metadata-token"


class ImdsError(RuntimeError):
    """The metadata service could not be reached or answered something unexpected."""


class ImdsClient:
    def __init__(
        self,
        endpoint: str | None = None,
        *,
        token_ttl: int = 21600,
        timeout: float = 1.0,
        attempts: int = 3,
        backoff: float = 0.2,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not 1 <= token_ttl <= 21600:
            raise ValueError(f"token_ttl must be 1..21600 seconds, got {token_ttl}")
        chosen = endpoint or os.environ.get("AWS_EC2_METADATA_SERVICE_ENDPOINT") or DEFAULT_ENDPOINT
        self.endpoint = chosen.rstrip("/")
        self.token_ttl, self.timeout, self.attempts, self.backoff = token_ttl, timeout, attempts, backoff
        self._token: str | None = None
        self._token_expires = 0.0
        self.answered = False  # the service has answered at least once (any HTTP status): it is there
        self._clock = clock
        # The metadata service is link-local: never route it through an HTTP(S)_PROXY.
        self._opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))

    # ---- what the agent asks ------------------------------------------------------------------
    def instance_action(self) -> dict[str, Any] | None:
        """The spot interruption notice ({"action": "terminate"|"stop"|"hibernate", "time": ...}). The
        path answering at all is the notice (it is 404 until one is given): a body that is not the
        expected JSON object is a notice with no usable time (two minutes from now, then)."""
        text = self.get("/latest/meta-data/spot/instance-action")
        if text is None:
            return None
        try:
            value = json.loads(text)
        except ValueError:
            value = None
        return value if isinstance(value, dict) else {"action": "terminate", "unreadable": text[:80]}

    def rebalance_recommendation(self) -> dict[str, Any] | None:
        """The rebalance recommendation ({"noticeTime": ...}), or None when there is none."""
        return self._get_json("/latest/meta-data/events/recommendations/rebalance")

    def target_lifecycle_state(self) -> str | None:
        """The Auto Scaling target state ("InService", "Terminated", ...), None outside a group."""
        return self.get("/latest/meta-data/autoscaling/target-lifecycle-state")

    def instance_id(self) -> str:
        return self._require("/latest/meta-data/instance-id")

    def local_ipv4(self) -> str:
        return self._require("/latest/meta-data/local-ipv4")

    def region(self) -> str:
        return self._require("/latest/meta-data/placement/region")

    def instance_type(self) -> str:
        return self._require("/latest/meta-data/instance-type")

    def availability_zone(self) -> str:
        return self._require("/latest/meta-data/placement/availability-zone")

    def market(self) -> str:
        """"spot" or "on-demand", as instance-life-cycle says (a scheduled instance counts as on-demand)."""
        return "spot" if self._require("/latest/meta-data/instance-life-cycle").strip() == "spot" else "on-demand"

    # ---- protocol -----------------------------------------------------------------------------
    def get(self, path: str) -> str | None:
        """Text of a metadata path; None on 404. Retries once with a fresh token on 401."""
        for fresh_token in (False, True):
            status, body = self._request("GET", path, {TOKEN_HEADER: self._current_token(fresh_token)})
            if status == 200:
                return body
            if status == 404:
                return None
            if status != 401:
                raise ImdsError(f"IMDS {path}: HTTP {status}")
        raise ImdsError(f"IMDS {path}: token rejected twice (HTTP 401)")

    def _get_json(self, path: str) -> dict[str, Any] | None:
        text = self.get(path)
        if text is None:
            return None
        try:
            value = json.loads(text)
        except ValueError:
            raise ImdsError(f"IMDS {path}: not JSON: {text[:80]!r}") from None
        if not isinstance(value, dict):
            raise ImdsError(f"IMDS {path}: expected a JSON object, got {text[:80]!r}")
        return value

    def _require(self, path: str) -> str:
        value = self.get(path)
        if value is None:
            raise ImdsError(f"IMDS {path}: not found")
        return value

    def _current_token(self, force: bool) -> str:
        # Renew at 90% of the TTL (at least a second early) so a token never expires in flight.
        if force or self._token is None or self._clock() >= self._token_expires:
            status, body = self._request("PUT", "/latest/api/token", {TOKEN_TTL_HEADER: str(self.token_ttl)})
            if status != 200:
                raise ImdsError(f"IMDS token request: HTTP {status}")
            margin = max(1.0, self.token_ttl * 0.1)
            self._token, self._token_expires = body, self._clock() + self.token_ttl - margin
        return self._token

    def _request(self, method: str, path: str, headers: dict[str, str]) -> tuple[int, str]:
        """(status, body); HTTP errors are answers, connection errors are retried then raised."""
        request = urllib.request.Request(self.endpoint + path, method=method, headers=headers)
        for attempt in range(self.attempts):
            try:
                with self._opener.open(request, timeout=self.timeout) as response:
                    self.answered = True
                    return response.status, response.read().decode()
            except urllib.error.HTTPError as error:
                self.answered = True
                return error.code, error.read().decode(errors="replace")
            except (urllib.error.URLError, OSError) as error:
                if attempt + 1 == self.attempts:
                    raise ImdsError(f"IMDS {self.endpoint}{path} unreachable: {error}") from None
                time.sleep(self.backoff * 2**attempt)
        raise AssertionError("unreachable")
