"""torch's dynamic rendezvous state kept in one S3 object, `rendezvous/<run id>/state`.

torch's `RendezvousBackend` contract: `get_state()` → (state, token) and `set_state(state, token)`
as compare-and-set. The token is the object's ETag and the set is a conditional PUT, so S3 itself
arbitrates between nodes: there is no rendezvous server to lose with the node that ran it.
"""

from __future__ import annotations

from typing import Any

from torch.distributed.elastic.rendezvous import RendezvousConnectionError
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
            return self._objects.read(STATE)
        except S3ObjectError as error:
            raise RendezvousConnectionError(str(error)) from error

    def set_state(self, state: bytes, token: Token | None = None) -> tuple[bytes, Token, bool] | None:
        try:
            written = self._objects.write(STATE, state, expected=_etag(token))
            if written is not None:
                return state, written, True
            current = self._objects.read(STATE)  # someone else won: hand torch what they wrote
        except S3ObjectError as error:
            raise RendezvousConnectionError(str(error)) from error
        return (current[0], current[1], False) if current else None


def _etag(token: Any) -> str | None:
    return token if isinstance(token, str) and token else None
