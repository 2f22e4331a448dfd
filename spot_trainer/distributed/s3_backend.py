"""torch's dynamic rendezvous state in S3: the round in one object, each node's heartbeat in its own.

torch's `RendezvousBackend` contract: `get_state()` → (state, token) and `set_state(state, token)`
as compare-and-set. The token is the object's ETag and the set is a conditional PUT, so S3 itself
arbitrates between nodes: there is no rendezvous server to lose with the node that ran it. The state is
kept base64-encoded, as torch's c10d backend keeps it, so an object that is not one this backend wrote
reads as torch's RendezvousStateError, not as bytes handed to torch's unpickling.

torch keeps every node's keep-alive in that same state (`last_heartbeats`) and rewrites the whole
object for each one: at 128 nodes beating every 5 s, most of those conditional writes lose to another
node's and are retried at once, and a node whose beats keep losing is declared dead while it trains.
`S3StateHolder`, the state holder torch's handler is given here, keeps the beats out of the shared
object: a node's beat is a plain PUT of `state.heartbeat/<node>`, and one LIST of `state*` tells the
state's version and every beat's age. A join and a leave are the node's own plain PUT too
(s3_joins.py), applied by every reader; the state object is written (conditionally) only to decide the
round (completed, closed, the redundancy list), and a lost write waits a jittered backoff before the next
try.
"""

from __future__ import annotations

import binascii
import copy
import pickle
import random
import time
from base64 import b64decode, b64encode
from datetime import UTC, datetime, timedelta
from typing import Any

from torch.distributed.elastic.rendezvous import RendezvousConnectionError, RendezvousStateError
from torch.distributed.elastic.rendezvous.dynamic_rendezvous import (
    RendezvousBackend,
    RendezvousSettings,
    Token,
    _BackendRendezvousStateHolder,
    _NodeDesc,
    _RendezvousState,
)

from .s3_joins import JOIN, LEAVE, Op, apply_op, parse_op, settled
from .s3_objects import ConditionalObjects, Listing, S3ObjectError

STATE = "state"
HEARTBEAT = STATE + ".heartbeat/"  # + the node's name; listed with the state object, under one prefix
# A beat's age is S3's own: the LIST's Date header minus the beat's LastModified, both S3's clock, so no
# node's clock is ever compared with another's (torch compares the writer's clock with the reader's).
# Both are whole seconds: the age read may be up to a second too old, which this margin gives back.
CLOCK_MARGIN = timedelta(seconds=1)
# A lost write of the round waits a random time up to the longer of 0.05 s x 2^losses and one write's
# round trip per node still trying to join (whose beats the listing shows before the state names them),
# at most 10 s: at 128 nodes joining at once every node trying again at once loses again (one of them
# wins each round trip), while spread over that many round trips most tries win.
BACKOFF_SECONDS = (0.05, 10.0)
READ_SECONDS_PER_NODE = 0.04  # 5.12 s at 128 nodes: a joiner is seen, a silent node counted, that late


class S3RendezvousBackend(RendezvousBackend):
    def __init__(self, objects: ConditionalObjects) -> None:
        self.objects = objects

    @property
    def name(self) -> str:
        return "s3"

    def get_state(self) -> tuple[bytes, Token] | None:
        try:
            current = self.objects.read(STATE)
        except S3ObjectError as error:
            raise RendezvousConnectionError(str(error)) from error
        return (self._decoded(current[0]), current[1]) if current else None

    def set_state(self, state: bytes, token: Token | None = None) -> tuple[bytes, Token, bool] | None:
        try:
            written = self.write_if(state, token)
            if written is not None:
                return state, written, True
            current = self.objects.read(STATE)  # someone else won: hand torch what they wrote
        except S3ObjectError as error:
            raise RendezvousConnectionError(str(error)) from error
        return (self._decoded(current[0]), current[1], False) if current else None

    def write_if(self, state: bytes, token: Token | None) -> str | None:
        """The state written if it is still at `token`: its new ETag, or None when another node's write won."""
        try:
            return self.objects.write(STATE, b64encode(state), expected=_etag(token))
        except S3ObjectError as error:
            raise RendezvousConnectionError(str(error)) from error

    def _decoded(self, body: bytes) -> bytes:
        try:
            return b64decode(body, validate=True)
        except (binascii.Error, ValueError) as error:
            raise RendezvousStateError(f"the rendezvous state in s3://{self.objects.bucket}/"
                                       f"{self.objects.key(STATE)} is corrupt (not base64)") from error


class S3StateHolder(_BackendRendezvousStateHolder):
    """torch's state holder, with the heartbeats kept out of the shared state object.

    torch's handler changes the state it holds and asks `sync()` to write it. When the only change is a
    heartbeat (torch's keep-alive), the beat goes to the node's own object and the shared one is left
    alone; any other change is the round's, written with the state's ETag. Reading is one LIST: the
    state object is fetched only when its ETag changed, and every member's last heartbeat is the later
    of what the state recorded and its own object's age. torch's rules then stand as they are: the
    last-call window, min and max nodes, closing, and a node silent for keep_alive_interval x
    keep_alive_max_attempt dropped by whoever reads next.
    """

    def __init__(self, backend: S3RendezvousBackend, settings: RendezvousSettings,
                 cache_duration: int = 1) -> None:
        super().__init__(backend, settings, cache_duration)
        self._objects, self._writer = backend.objects, backend
        self._round = _round_of(self._state)  # the state as last synced, heartbeats aside
        self._beats: dict[_NodeDesc, datetime] = {}  # the heartbeats as last synced
        self._mine: dict[_NodeDesc, datetime] = {}  # beats this holder wrote (this host's clock)
        self._bits: bytes | None = None  # the state object as last read or written (its ETag: _token)
        self._strays: list[str] = []  # beats of nodes no longer in the rendezvous, long silent
        self._losses = 0  # conditional writes lost in a row
        self._joining = 0  # nodes beating that the state does not name yet, as last listed
        self._round_trip = 0.0  # seconds the last conditional write took
        self._listed_fresh = False  # the beats were listed in this sync: peers may be judged on them
        self._written: set[str] = set()  # the op objects this holder wrote, not yet deleted
        # when the state was last read (or written whole): a beat is a write too, but tells nothing of the
        # round, so it must not put off the next read (a node beating more often than it may read never would)
        self._read_at = -1.0

    def read_at_most_every(self, seconds: float) -> None:
        """How long a read state serves before S3 is asked again: torch's 1 s while a round forms; while it
        trains, half a keep-alive interval, since torchrun asks `num_nodes_waiting()` every 0.1 s and each
        read is a LIST: 128 nodes would otherwise list 128 times a second."""
        self._cache_duration = seconds  # type: ignore[assignment]  # torch compares it as a number of seconds

    def _read_every(self) -> float:
        """Seconds a read state serves: as set, and at least READ_SECONDS_PER_NODE per node of the round, so
        the whole rendezvous reads about 25 times a second at most however many nodes it has."""
        return max(float(self._cache_duration), READ_SECONDS_PER_NODE * len(self._state.participants))

    def sync(self) -> bool | None:
        if self._dirty:
            has_set: bool | None = self._write()
        else:
            if self._read_at >= max(time.monotonic() - self._read_every(), 0):
                return None
            has_set = None
            self._read()
            self._beat_when_due()
        self._dirty = False
        self._last_sync_time = time.monotonic()
        if self._listed_fresh:  # judged only on a listing just made: one a read old would age every peer
            self._sanitize()
            self._listed_fresh = False
        self._round, self._beats = _round_of(self._state), dict(self._state.last_heartbeats)
        return has_set

    def _write(self) -> bool:
        state = self._state
        for node, at in state.last_heartbeats.items():
            if self._beats.get(node) != at:
                self._beat(node, at)
        if _round_of(state) == self._round:
            return True  # a keep-alive only: the round is as every node last read it
        bits = pickle.dumps(state)
        started = time.monotonic()
        written = self._writer.write_if(bits, self._token)
        self._round_trip = time.monotonic() - started
        if written is not None:
            self._bits, self._token, self._losses = bits, written, 0
            self._read_at = time.monotonic()
            self._forget(set(self._mine) - set(state.last_heartbeats))
            return True
        self._losses += 1
        time.sleep(random.uniform(0, self._backoff_bound()))
        self._read()  # the state another node wrote: torch decides again on it
        return False

    def _backoff_bound(self) -> float:
        base, most = BACKOFF_SECONDS
        return min(most, max(base * 2.0 ** self._losses, self._round_trip * self._joining))

    def _read(self) -> None:
        self._read_at = time.monotonic()
        try:
            listing = self._objects.listing(STATE)
        except S3ObjectError as error:
            raise RendezvousConnectionError(str(error)) from error
        listed = listing.objects.get(STATE)
        if listed is None:
            self._bits, self._token = None, None
        elif listed.etag != self._token or self._bits is None:
            current = self._backend.get_state()
            self._bits, self._token = current if current else (None, None)
        try:
            self._state = pickle.loads(self._bits) if self._bits is not None else _RendezvousState()
        except pickle.PickleError as error:
            raise RendezvousStateError("The rendezvous state is corrupt. See inner exception for details.") \
                from error
        # the round's silent members dropped first (torch's rule): the last of a round to go, dead or left,
        # opens the next, which the joins then fill
        persisted = self._state.round, self._state.complete
        self._merge_beats(listing, [])
        self._sanitize()
        self._merge_beats(listing, self._sweep(self._apply_ops(listing, persisted)))
        self._listed_fresh = True

    def _apply_ops(self, listing: Listing, persisted: tuple[int, bool]) -> list[Op]:
        """Every join, wait and leave listed, applied to the state oldest first (s3_joins.py); those the
        shared state has settled (`persisted`: its round, and whether complete) are handed back instead."""
        ops = sorted((op.round, seen.modified, name, op) for name, seen in listing.objects.items()
                     if (op := parse_op(name)) is not None)
        now, past = datetime.now(UTC), []
        for _, modified, _, op in ops:
            if settled(op, *persisted):
                past.append(op)
            else:
                apply_op(self._state, op, heard_at(modified, listing.s3_now, now), self._settings)
        return past

    def _sweep(self, past: list[Op]) -> list[str]:
        """Ops settled: this holder's own deleted now (a few; at 128 nodes the joins of a round that trains
        would double every listing), those of nodes gone from the rendezvous named for the next writer of
        the round to delete (best effort: they no longer apply)."""
        state = self._state
        members = {*state.participants, *state.wait_list, *state.redundancy_list}
        strays = []
        for op in past:
            if op.name in self._written:
                self._delete(op.name)
                self._written.discard(op.name)
            elif op.node not in members:
                strays.append(op.name)
        return strays

    def write_op(self, node: _NodeDesc, kind: str) -> None:
        """This node joins, waits for the next round, or leaves: its own object, and the change made to the
        state held here as every reader will make it. No write of the shared state: torch's executor then
        syncs, which beats. A join deletes the node's leave of the same round first: read oldest first,
        within one of S3's seconds a leave would otherwise come after it."""
        op = Op(self._state.round, kind, node)
        if kind == JOIN and (left := Op(op.round, LEAVE, node).name) in self._written:
            self._delete(left)
            self._written.discard(left)
        try:
            self._objects.put(op.name, b"")
        except S3ObjectError as error:
            raise RendezvousConnectionError(str(error)) from error
        self._written.add(op.name)
        apply_op(self._state, op, datetime.now(UTC), self._settings)
        if kind == LEAVE and node in self._mine:
            self._delete(_heartbeat(node))
            del self._mine[node]
        self._round = _round_of(self._state)

    def _merge_beats(self, listing: Listing, strays: list[str]) -> None:
        state, now = self._state, datetime.now(UTC)
        members = {repr(node): node for node in (*state.participants, *state.wait_list, *state.redundancy_list)}
        silent = now - self._settings.keep_alive_interval * self._settings.keep_alive_max_attempt
        self._strays, self._joining = strays, 0
        for name, seen in listing.objects.items():
            if not name.startswith(HEARTBEAT):
                continue
            heard = heard_at(seen.modified, listing.s3_now, now)
            node = members.get(name[len(HEARTBEAT):])
            if node is None:
                if heard < silent:
                    self._strays.append(name)
                else:
                    self._joining += 1
                continue
            at = self._mine.get(node, heard)  # this node's own beats are on its own clock
            state.last_heartbeats[node] = max(state.last_heartbeats.get(node, at), at)

    def _beat_when_due(self) -> None:
        """torch beats from a timer of one interval, and only once the last beat is an interval old: the
        beats come every one to two intervals, and after a round forms the first comes up to two intervals
        and a second after the last. A beat is one PUT here, so a node that reads the state also beats once
        its beat is half an interval old: its peers may judge it on a listing up to one read old, and it
        must stay well inside three intervals. Best effort: the timer still beats."""
        now = datetime.now(UTC)
        for node, at in list(self._mine.items()):
            if node in self._state.last_heartbeats and at <= now - self._settings.keep_alive_interval / 2:
                try:
                    self._beat(node, now)
                except RendezvousConnectionError:
                    return
                self._state.last_heartbeats[node] = now

    def _beat(self, node: _NodeDesc, at: datetime) -> None:
        try:
            self._objects.put(_heartbeat(node), at.isoformat().encode())
        except S3ObjectError as error:
            raise RendezvousConnectionError(str(error)) from error
        self._mine[node] = at

    def _forget(self, left: set[_NodeDesc]) -> None:
        """After a write of the round: the beats of this holder's nodes that left it, and the beats of
        nodes long gone from it, are deleted (best effort: a beat nobody lists as a member is ignored)."""
        for name in [_heartbeat(node) for node in left] + self._strays:
            self._delete(name)
        for node in left:
            del self._mine[node]
        self._strays = []

    def _delete(self, name: str) -> None:
        try:
            self._objects.delete(name)
        except S3ObjectError:  # best effort: an object left behind changes nothing (s3_joins.py)
            pass


def heard_at(modified: datetime, s3_now: datetime | None, now: datetime) -> datetime:
    """When, on this host's clock (`now`), a beat S3 stamped `modified` was written: `now` less its age on
    S3's clock (`s3_now`, the listing's Date), given back the second both are truncated to. Without a
    Date, S3's stamp is compared with this host's clock (Amazon Time Sync keeps them within a second)."""
    age = (s3_now or now) - modified - CLOCK_MARGIN
    return now - max(age, timedelta(0))


def _round_of(state: _RendezvousState) -> dict[str, Any]:
    """Everything torch keeps in the state but the heartbeats: what only a write of the round changes."""
    return {name: copy.deepcopy(value) for name, value in vars(state).items() if name != "last_heartbeats"}


def _heartbeat(node: _NodeDesc) -> str:
    return HEARTBEAT + repr(node)  # torch names a node <addr>_<pid>_<local id>


def _etag(token: Any) -> str | None:
    return token if isinstance(token, str) and token else None
