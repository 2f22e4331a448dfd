"""Every node of a round resumes from one step: the step published in S3 as the round forms.

A command of the user's own resumes from whatever its node's disk holds, and when a round forms the
disks differ: a replacement restored S3's newest when it booted, and S3 has moved on since; the other
nodes hold only the parts their ranks wrote (HF's checkpoint-N without the model, Accelerate's
random_states_<rank>.pkl alone). Ranks that load different steps train apart, or wait forever on a
peer that finished early. So, before the round's workers start, every node names in the round's store
the step it still hands over (the newest it holds when it published the round before: its agent
uploads it as the round forms); group rank 0 waits a little for the newest such step to reach S3,
then names S3's latest as the round's step; every node sets aside what its disk holds above that
step, fetches the step unless its disk holds the very files S3 does, and passes it to its workers as
RESUME_FROM. Of a sharded step a node fetches what its ranks read (checkpoint_restore.py); a round that
starts again from a step its node restored in part (the round before ended before a newer step was
published: a rank may have found a file missing) fetches all of it. A group rank 0 that cannot read S3
says so in the store, so the others leave the round at once instead of waiting out the store's timeout.

A job of several regions: when another region's bucket holds a newer step than this region's (the job trained
there before it moved here, and nothing is published here since), group rank 0 names that step and its region,
and every node fetches its share from there, across regions, once: the round's first save is published here.

The agent asks for this (spot_trainer.distributed.rounds.ROUND_RESUME_ENV) for commands of the user's own only:
the built-in trainer agrees on the newest step among its ranks by itself and sends it to the ranks that lack it.
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from torch.distributed import DistStoreError

from ..storage.files.regular_files import is_regular
from ..storage.record_kinds import EventKind
from ..storage.s3.job_keys import MANIFEST
from ..storage.s3.key_names import local_name
from ..storage.saves import layouts
from ..storage.saves.shards import NodeRanks
from ..storage.steps.checkpoint_files import entry_name
from ..storage.steps.checkpoint_restore import restored_in_part
from ..storage.steps.other_regions import CrossedBytes, OtherRegions
from ..storage.steps.remote import RemoteStore

STEP_KEY = "spot_trainer/resume_step"  # in the round's own store (prefixed by torch per round)
HANDOVER_KEY = "spot_trainer/handover/{rank}"  # each node's step to hand over, or NONE
NONE = b"none"
FAILED = b"failed"  # group rank 0 could not read S3: no step for this round
IN_REGION = "@"  # a step another region's bucket holds: b"<step>@<region>"
HANDOVER_KEY_SECONDS = 30.0  # for every node of the round to name its hand-over (each writes it first thing)
UPLOAD_WAIT_SECONDS = 60.0  # for the step a node hands over to reach S3
POLL_SECONDS = 1.0


def _say(line: str) -> None:
    print(f"spot-trainer: {line}", file=sys.stderr, flush=True)


def _record(remote: RemoteStore, kind: EventKind, **fields: Any) -> None:
    """An event of this node's, as its agent records them: never at the cost of the round."""
    try:
        remote.append_event(kind, **fields)
    except Exception as error:  # noqa: BLE001 - a record is secondary to training
        _say(f"could not record event {kind}: {error}")


def offer_handover(store: Any, group_rank: int, published_last_round: bool, directory: Path) -> int | None:
    """Name the step this node hands over: its newest when it published the round before, else none."""
    newest = layouts.newest_complete(directory, writer_done=True) if published_last_round else None
    step = newest.step if newest is not None else None
    store.set(HANDOVER_KEY.format(rank=group_rank), NONE if step is None else str(step).encode())
    return step


def handed_over(store: Any, nodes: int) -> int | None:
    """The newest step any node of the round hands over (a node that names none in time hands none)."""
    keys = [HANDOVER_KEY.format(rank=rank) for rank in range(nodes)]
    present = keys
    try:
        store.wait(keys, timedelta(seconds=HANDOVER_KEY_SECONDS))
    except DistStoreError:  # the store's timeout: a late node hands nothing over
        _say(f"not every node named its hand-over within {HANDOVER_KEY_SECONDS:.0f}s: going by those that did")
        present = [key for key in keys if store.check([key])]
    steps = [int(value) for key in present if (value := store.get(key)) != NONE]
    return max(steps, default=None)


@dataclass(frozen=True)
class RoundStep:
    step: int | None  # None: nothing is published anywhere, the round starts over
    region: str | None = None  # another region's bucket holds it (None: this region's)

    def encoded(self) -> bytes:
        if self.step is None:
            return NONE
        return f"{self.step}{IN_REGION}{self.region}".encode() if self.region else str(self.step).encode()

    @classmethod
    def decoded(cls, value: bytes) -> RoundStep:
        if value == NONE:
            return cls(None)
        step, _, region = value.decode().partition(IN_REGION)
        return cls(int(step), region or None)


def agree_on_step(store: Any, group_rank: int, nodes: int, remote: RemoteStore,
                  elsewhere: OtherRegions | None = None) -> RoundStep:
    """Group rank 0 names the step in the round's store; every other node reads it there."""
    if group_rank != 0:
        value = store.get(STEP_KEY)
        if value == FAILED:
            raise RuntimeError("the round's group rank 0 could not read the published step from S3: "
                               "this node leaves the round")
        return RoundStep.decoded(value)
    try:
        handover = handed_over(store, nodes)
        step = remote.latest_step()
        if handover is not None:
            deadline = time.monotonic() + UPLOAD_WAIT_SECONDS
            while (step is None or step < handover) and time.monotonic() < deadline:
                time.sleep(POLL_SECONDS)  # the agent of the node that published last round is uploading it
                step = remote.latest_step()
        away = elsewhere.newest_above(step) if elsewhere is not None else None
    except Exception:
        store.set(STEP_KEY, FAILED)
        raise
    agreed = RoundStep(away.step, away.region) if away is not None else RoundStep(step)
    store.set(STEP_KEY, agreed.encoded())
    return agreed


def node_ranks(group_rank: int, nodes: int, argv: list[str] | None = None) -> NodeRanks | None:
    """The ranks this node's workers hold in the round: its workers per node, read from torchrun's own
    arguments by torchrun's own parser (this process is torchrun); None when they do not say."""
    from torch.distributed.run import determine_local_world_size, get_args_parser

    try:
        parsed, _ = get_args_parser().parse_known_args(sys.argv[1:] if argv is None else argv)
        per_node = determine_local_world_size(parsed.nproc_per_node)
    except (SystemExit, ValueError, TypeError, AttributeError):
        return None
    return NodeRanks(group_rank=group_rank, nodes=nodes, per_node=per_node) if per_node > 0 else None


def bring_to_step(directory: Path, step: int | None, remote: RemoteStore,
                  ranks: NodeRanks | None = None, *, records: RemoteStore | None = None) -> Path | None:
    """CHECKPOINT_DIR holds `step` as S3 (`remote`) does and nothing newer; the path to resume from (None: start
    over). With `ranks`, what those ranks read of a sharded step, unless the round before started from it too.
    Its event goes to `records` (this region's bucket), when `remote` is another region's."""
    if step is None:
        aside = layouts.set_aside_above(directory, None)
        if aside:
            _say(f"set aside {', '.join(aside)}: nothing is published in S3, so this round starts over")
        return None
    before = restored_in_part(directory) or {}
    if ranks is not None and before.get("step") == step and before.get("ranks") is not None:
        _say(f"step {step} was restored in part for the round before, which ended before a newer step was "
             "published (a rank may have read a file it did not fetch): fetching all of it")
        ranks = None
    here = same_as_published(directory, step, remote)
    aside = layouts.set_aside_above(directory, step if here else step - 1)
    if aside:
        _say(f"set aside {', '.join(aside)} (as {layouts.UNVERIFIED_PREFIX}<name>): every node of this round "
             f"resumes from step {step}, published in S3")
    restored = here or remote.restore_at_or_below(directory, step, ranks)
    # S3's record, not the name, says which step came back (a series member alone is no series yet).
    if restored is None or (not here and remote.restored_step != step):  # never a step the others do not resume
        raise RuntimeError(f"could not fetch step {step}, the round's step, from S3: this node leaves the round")
    layouts.prepare_for_resume(directory, restored)
    _say(f"this round resumes from step {step}, published in S3 ({'on this disk' if here else 'fetched'})")
    _record(records or remote, EventKind.ROUND_RESUME, step=step)
    return restored


def same_as_published(directory: Path, step: int, remote: RemoteStore) -> Path | None:
    """This disk's copy of `step` when it holds every file S3's manifest lists, at the same size (never a
    copy restored in part)."""
    manifest = remote.read_record(remote.step_prefix(step) + MANIFEST, absolute=True)
    if not isinstance(manifest, dict) or not isinstance(manifest.get("files"), dict):
        return None
    try:
        path = directory / entry_name(manifest.get("name"))
        if (restored_in_part(directory) or {}).get("name") == path.name:
            return None
        files = {(path if manifest.get("kind") == "file" else path / local_name(key, entry)): int(entry["size"])
                 for key, entry in manifest["files"].items()}
    except (TypeError, ValueError, KeyError, AttributeError):
        return None
    whole = all(is_regular(file) and file.stat().st_size == size for file, size in files.items())
    return path if whole else None


def resume_env(path: Path | None) -> dict[str, str]:
    return {"RESUME_FROM": str(path.resolve()) if path else ""}


def start_round(store: Any, group_rank: int, nodes: int, remote: RemoteStore, published_last_round: bool,
                elsewhere: OtherRegions | None = None) -> None:
    """All of the above for this node, then RESUME_FROM in the environment its workers inherit."""
    directory = Path(os.environ["CHECKPOINT_DIR"])
    try:
        offer_handover(store, group_rank, published_last_round, directory)
    except Exception:
        if group_rank == 0:  # the others would wait for its step until the store's timeout
            store.set(STEP_KEY, FAILED)
        raise
    agreed = agree_on_step(store, group_rank, nodes, remote, elsewhere)
    ranks = node_ranks(group_rank, nodes)
    if agreed.region is None or elsewhere is None:
        path = bring_to_step(directory, agreed.step, remote, ranks)
    else:
        path = bring_from_region(directory, agreed, elsewhere.stores[agreed.region], remote, ranks)
    os.environ.update(resume_env(path))


def bring_from_region(directory: Path, agreed: RoundStep, away: RemoteStore, remote: RemoteStore,
                      ranks: NodeRanks | None) -> Path | None:
    """`bring_to_step` from another region's bucket, the bytes that crossed counted and recorded here."""
    started, crossed = time.monotonic(), CrossedBytes.counting(away)
    path = bring_to_step(directory, agreed.step, away, ranks, records=remote)
    if crossed.total == 0:  # this disk held it
        return path
    _say(f"step {agreed.step} came from {agreed.region} (s3://{away.bucket}), across regions: {crossed.total} "
         f"bytes in {time.monotonic() - started:.2f}s")
    _record(remote, EventKind.REGION_RESTORE, step=agreed.step, region=agreed.region, bytes=crossed.total)
    return path
