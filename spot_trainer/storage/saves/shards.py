"""A checkpoint torch.distributed.checkpoint (DCP) wrote in shards: which folders of it DCP wrote, which
shard files their `.metadata` lists, and which rank wrote each.

DCP's save is a collective: every rank writes its own `__<rank>_<n>.distcp` into the folder, then the
coordinator (rank 0) gathers every rank's results and only then writes `.metadata`, through a rename
(torch 2.13 FileSystemWriter.finish). On several nodes without a shared file system each node's disk
holds the shards its ranks wrote, and only the coordinator's holds `.metadata`. A checkpoint may hold
several such folders (HF Trainer's and Accelerate's FSDP `pytorch_model_fsdp_0/` and `optimizer_0/`),
one level below it at most, beside files rank 0 writes alone (`trainer_state.json`, `meta.pt`).
"""

from __future__ import annotations

import functools
import hashlib
import io
import pickle
import pickletools
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from ...integrations.byte_ranges import Range, merged
from ..files.regular_files import open_regular

METADATA = ".metadata"
SHARD_SUFFIX = ".distcp"
_SHARD_NAME = re.compile(r"^__(\d+)_\d+\.distcp$")


def is_dcp_folder(names: list[str]) -> bool:
    return METADATA in names or any(name.endswith(SHARD_SUFFIX) for name in names)


def dcp_folders(checkpoint: Path) -> list[str]:
    """The folders of a checkpoint DCP wrote into, relative to it ('' for the checkpoint itself), at most one
    level below it: those holding a shard, and those whose `.metadata` lists shards (a folder that lost its
    only shard is still DCP's, and not whole; a `.metadata` that lists none may be any tool's)."""
    if not checkpoint.is_dir() or checkpoint.is_symlink():
        return []
    try:
        folders = [checkpoint, *(entry for entry in checkpoint.iterdir() if entry.is_dir() and not entry.is_symlink())]
        return [("" if folder == checkpoint else folder.name) for folder in folders if _written_by_dcp(folder)]
    except OSError:  # pruned while we looked
        return []


def _written_by_dcp(folder: Path) -> bool:
    names = [entry.name for entry in folder.iterdir()]
    if any(name.endswith(SHARD_SUFFIX) for name in names):
        return True
    try:
        return METADATA in names and bool((read := metadata_of(folder / METADATA)) and read.listed)
    except OSError:
        return False


@dataclass(frozen=True)
class MetadataRead:
    """What a DCP folder's `.metadata` says of its files: the shards it lists, and where each must end."""

    listed: frozenset[str]
    ends: dict[str, int]


def metadata_of(path: Path) -> MetadataRead | None:
    """A `.metadata` read once per version of the file (each poll asks again, and a large world's `.metadata`
    is megabytes); None when it is not DCP's or is damaged. A file error raises OSError and is not kept:
    the next poll reads again."""
    found = path.stat()
    return _metadata_read(str(path), found.st_ino, found.st_mtime_ns, found.st_size)


@functools.lru_cache(maxsize=64)
def _metadata_read(path: str, inode: int, mtime_ns: int, size: int) -> MetadataRead | None:
    with open_regular(Path(path)) as stream:
        body = stream.read()
    listed = listed_in_bytes(body)
    return None if listed is None else MetadataRead(frozenset(listed), extents(body) or {})


def shard_files(checkpoint: Path) -> list[Path]:
    """Every shard file of the checkpoint, in each of its DCP folders."""
    found = []
    for folder in dcp_folders(checkpoint):
        root = checkpoint / folder if folder else checkpoint
        found += [entry for entry in root.iterdir() if entry.name.endswith(SHARD_SUFFIX)]
    return found


def is_sharded(checkpoint: Path) -> bool:
    return bool(dcp_folders(checkpoint))


def metadata_name(folder: str) -> str:
    """The relative name of a DCP folder's `.metadata` inside its checkpoint."""
    return f"{folder}/{METADATA}" if folder else METADATA


def in_folder(folder: str, name: str) -> str:
    return f"{folder}/{name}" if folder else name


def holds_metadata(checkpoint: Path) -> bool:
    """This disk holds the `.metadata` of every DCP folder of the checkpoint: its coordinator's node."""
    folders = dcp_folders(checkpoint)
    return bool(folders) and all((checkpoint / metadata_name(folder)).is_file() for folder in folders)


def listed_shards(stream: IO[bytes]) -> set[str] | None:
    """The shard files a `.metadata` names, read from its pickle's opcodes without running them; None
    when it is unreadable."""
    try:
        return {argument for _, argument, _ in pickletools.genops(stream)
                if isinstance(argument, str) and argument.endswith(SHARD_SUFFIX)}
    except Exception:  # whatever a damaged pickle raises, it proves nothing
        return None


def listed_in_file(metadata: Path) -> set[str] | None:
    try:
        with open_regular(metadata) as stream:
            return listed_shards(stream)
    except OSError:
        return None


def listed_in_bytes(body: bytes) -> set[str] | None:
    return listed_shards(io.BytesIO(body))


class Shadow:
    """Stands in for any class a `.metadata` pickle names: it records what it was built with and runs
    nothing, so reading a `.metadata` never imports or calls the classes it names."""

    kind = ""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.args: tuple[Any, ...] = args
        self.state: Any = kwargs

    def __setstate__(self, state: Any) -> None:
        self.state = state

    def field(self, name: str) -> Any:
        """A dataclass field, from its pickled state (a dict, or a (dict, slots) pair)."""
        state = self.state
        if isinstance(state, tuple) and len(state) == 2:
            state = {**(state[0] or {}), **(state[1] or {})}
        return state.get(name) if isinstance(state, dict) else None


class _ShadowReader(pickle.Unpickler):
    _SAFE = {("collections", "OrderedDict"), ("builtins", "set"), ("builtins", "frozenset"),
             ("builtins", "slice"), ("builtins", "complex")}

    def __init__(self, stream: IO[bytes]) -> None:
        super().__init__(stream)
        self._kinds: dict[str, type[Shadow]] = {}

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in self._SAFE:
            return super().find_class(module, name)
        if name not in self._kinds:
            self._kinds[name] = type(name, (Shadow,), {"kind": name})
        return self._kinds[name]


def extents(body: bytes) -> dict[str, int] | None:
    """Where each file of a save must end, from DCP's `.metadata` storage data: every chunk it lists is a
    `_StorageInfo(relative_path, offset, length)`, and DCP's file writer writes a file's chunks one after
    another (torch 2.13 `_write_files_from_queue`), so the file is exactly as long as its last chunk's end.
    file name (inside its DCP folder) → that size; None when the pickle is unreadable or holds no
    storage data (a `.metadata` DCP did not write)."""
    chunks = _storage(body)
    if chunks is None:
        return None
    ends: dict[str, int] = {}
    for _, path, offset, length in chunks:
        ends[path] = max(ends.get(path, 0), offset + length)
    return ends or None


def rank_of(shard: str) -> int | None:
    """The rank that wrote a shard (`__<rank>_<n>.distcp`), from its name."""
    match = _SHARD_NAME.match(shard.rsplit("/", 1)[-1])
    return int(match.group(1)) if match else None


def metadata_identity(bodies: dict[str, bytes]) -> str:
    """One save's identity across nodes: the digest of its `.metadata` files (name → content). A save of
    the same step by another world (a round that trained it again) has other metadata, so the parts
    of the two are never mixed."""
    digest = hashlib.sha256()
    for name in sorted(bodies):
        digest.update(name.encode("utf-8", "surrogateescape") + b"\0" + hashlib.sha256(bodies[name]).digest())
    return digest.hexdigest()


# ---- what a node's ranks read ------------------------------------------------------------------------
Narrowed = tuple[int, int, int, int, int, int]
# Near ranges of one file are fetched as one range (one GET, not several) when the gap between them is at most this.
COALESCE_BYTES = 1024 * 1024


@dataclass(frozen=True)
class NodeRanks:
    """The global ranks a node's workers hold in a round: torchrun gives the node of group rank g, with L
    workers on every node, ranks g*L .. g*L+L-1 of nodes*L (torch 2.13 `_assign_worker_ranks`: a node's
    base rank is the sum of the local world sizes of the group ranks before it)."""

    group_rank: int
    nodes: int
    per_node: int

    @property
    def world(self) -> int:
        return self.nodes * self.per_node

    @property
    def ranks(self) -> range:
        return range(self.group_rank * self.per_node, (self.group_rank + 1) * self.per_node)


# Before a round forms a node does not know its ranks: it fetches a sharded step's files but its shards.
BEFORE_A_ROUND = NodeRanks(group_rank=0, nodes=0, per_node=0)


@dataclass(frozen=True)
class Share:
    """What a node fetches of one DCP folder: whole files, and pieces (byte ranges) of others; `why` says
    why it is all of it ('' when it is a share)."""

    whole: frozenset[str]
    pieces: dict[str, list[Range]] = field(default_factory=dict)
    why: str = ""
    # file → stored chunks fetched but rows the ranks do not use (chunk_archive.py): (offset, length, where its
    # storage starts, rows, bytes a row, elements a row), each to be checked once fetched
    narrowed: dict[str, list[Narrowed]] = field(default_factory=dict)


def metadata_object(body: bytes) -> Shadow | None:
    """DCP's `Metadata` as its pickle builds it, each class it names a Shadow (nothing it names runs);
    None when the pickle is unreadable or not an object's."""
    try:
        metadata = _ShadowReader(io.BytesIO(body)).load()
    except Exception:  # whatever a damaged pickle raises, it proves nothing
        return None
    return metadata if isinstance(metadata, Shadow) else None


def _storage(body: bytes) -> list[tuple[str, str, int, int]] | None:
    """(item, file, offset, length) of every chunk DCP's `.metadata` storage data places; None when unreadable."""
    metadata = metadata_object(body)
    storage = metadata.field("storage_data") if metadata is not None else None
    if not isinstance(storage, dict):
        return None
    found = []
    for index, info in storage.items():
        item = index.field("fqn") if isinstance(index, Shadow) else None
        path, offset, length = (info.field(name) for name in ("relative_path", "offset", "length")) \
            if isinstance(info, Shadow) else (None, None, None)
        if not (isinstance(item, str) and isinstance(path, str) and type(offset) is int and type(length) is int):
            return None
        found.append((item, path, offset, length))
    return found


def node_share(body: bytes, files: set[str], ranks: NodeRanks) -> Share:
    """What the node's ranks read of one DCP folder (`files`: its shard names in the manifest), from its
    `.metadata`. At the world size that saved it, with every split item split over every rank (FSDP's
    plain sharding), rank r reads its own chunk of each split item from its own `__r_<n>.distcp`, and
    each item stored whole (a replicated tensor such as Adam's `step`, `param_groups`' values: DCP keeps
    one copy, in whichever rank's file had the least) from wherever it is: those files whole, pieces of
    the others. Otherwise all of it, and why."""
    if ranks == BEFORE_A_ROUND:
        return Share(frozenset())
    chunks = _storage(body)
    if chunks is None:
        return Share(frozenset(files), why="its .metadata's storage data could not be read")
    saved = {rank for name in files if (rank := rank_of(name)) is not None}
    if saved != set(range(ranks.world)):
        lacking = sorted(f"__{rank}_0.distcp" for rank in set(ranks.ranks) - saved)
        why = (f"it was saved by {len(saved)} rank(s), this round has {ranks.world}" if len(saved) != ranks.world
               else f"the manifest lacks {', '.join(lacking[:3]) or 'a rank of this round'}, which its ranks read")
        return Share(frozenset(files), why=why)
    by_item: dict[str, list[tuple[str, int, int]]] = {}
    for item, path, offset, length in chunks:
        by_item.setdefault(item, []).append((path, offset, length))
    whole = {name for name in files if rank_of(name) in ranks.ranks}
    pieces: dict[str, list[Range]] = {}
    for item, placed in by_item.items():
        if len(placed) > 1:
            if sorted(_rank(path) for path, _, _ in placed) != list(range(ranks.world)):
                return Share(frozenset(files), why=f"its item {item!r} is not split over every rank (not FSDP's "
                                                   "plain sharding), so which rank reads which file is not known")
            continue
        path, offset, length = placed[0]
        if path not in whole:
            pieces.setdefault(path, []).append((offset, length))
    return Share(frozenset(whole), {path: merged(ranges, COALESCE_BYTES) for path, ranges in pieces.items()})


def _rank(path: str) -> int:
    rank = rank_of(path)
    return -1 if rank is None else rank
