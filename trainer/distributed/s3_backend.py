"""torch's dynamic rendezvous state kept in one S3 object, `rendezvous/<run id>/state`.

torch's `RendezvousBackend` contract: `get_state()` → (state, token) and `set_state(state, token)`
as compare-and-set. The token is the object's ETag and the set is a conditional PUT, so S3 itself
arbitrates between nodes: there is no rendezvous server to lose with the node that ran it. The state is
kept base64-encoded, as torch's c10d backend keeps it, so an object that is not one this backend wrote
reads as torch's RendezvousStateError, not as bytes handed to torch's unpickling.
"""

from __future__ import annotations

import binascii
from base64 import b64decode, b64encode
from typing import Any

from torch.distributed.elastic.rendezvous import RendezvousConnectionError, RendezvousStateError
from torch.distributed.elastic.rendezvous.dynamic_rendezvous import RendezvousBackend, Token

from .s3_objects import ConditionalObjects, S3ObjectError

STATE = "state"


class S3RendezvousBackend(RendezvousBackend):
    def __init__(self, objects: ConditionalObjects) -> None:
        self._objects = objects

    @property
    def name(self) -> str:
        return "s3"

    def get_state(self) -> tuple[bytes, Token] | None:
        try:
            current = self._objects.read(STATE)
        except S3ObjectError as error:
            raise RendezvousConnectionError(str(error)) from error
        return (self._decoded(current[0]), current[1]) if current else None

    def set_state(self, state: bytes, token: Token | None = None) -> tuple[bytes, Token, bool] | None:
        try:
            written = self._objects.write(STATE, b64encode(state), expected=_etag(token))
            if written is not None:
                return state, written, True
            current = self._objects.read(STATE)  # someone else won: hand torch what they wrote
        except S3ObjectError as error:
            raise RendezvousConnectionError(str(error)) from error
        return (self._decoded(current[0]), current[1], False) if current else None

    def _decoded(self, body: bytes) -> bytes:
        try:
            return b64decode(body, validate=True)
        except (binascii.Error, ValueError) as error:
            raise RendezvousStateError(f"the rendezvous state in s3://{self._objects.bucket}/"
                                       f"{self._objects.key(STATE)} is corrupt (not base64)") from error


def _etag(token: Any) -> str | None:
    return token if isinstance(token, str) and token else None
