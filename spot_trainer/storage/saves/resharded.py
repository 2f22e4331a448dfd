"""What a node's ranks read of a DCP save at any world size, from its `.metadata` alone.

At the world size that saved it, shards.node_share. At another one (W → W′) `dcp.load` reshards: each
rank's load plan asks, for every item of its state dict, each stored chunk that overlaps the part it
holds, and DCP's file reader reads a stored chunk whole per ReadItem and narrows it (torch 2.13
`create_read_items_for_chunk_list`, `FileSystemReader.read_data`). FSDP2's `fully_shard` holds dim 0
split as torch.chunk splits it: ceil(n/W) rows a rank, trailing ranks possibly empty. So where every
split item of the save is split that way over the W ranks that saved it, the rows rank r′ holds at W′
say which stored chunks it reads: those, every item stored whole (a 0-d `step`, a replicated tensor)
and every bytes item. A save split any other way is read all of it, and why.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ...integrations.byte_ranges import Range, merged
from . import chunk_archive, shards
from .shards import COALESCE_BYTES, Narrowed, NodeRanks, Shadow, Share

# All gaps fetched as part of one GET (each at most COALESCE_BYTES) add at most GAP_SHARE of the bytes the ranks read.
GAP_SHARE = 0.05


@dataclass(frozen=True)
class Chunk:
    """One stored chunk: its item, where it sits in the item (dim-0 rows, -1 for a bytes item) and in its file."""

    item: str
    first_row: int
    rows: int
    path: str
    offset: int
    length: int


@dataclass(frozen=True)
class Item:
    """A tensor item's global size and the (offsets, sizes) of its stored chunks; `size` None for bytes."""

    size: tuple[int, ...] | None
    chunks: tuple[tuple[tuple[int, ...], tuple[int, ...]], ...] = ()
    element_bytes: int | None = None  # of its dtype, when the runtime knows it


def node_reads(body: bytes, files: set[str], ranks: NodeRanks) -> Share:
    """What the node's ranks read of one DCP folder (`files`: its shard names in the manifest), at any world size."""
    saved = {rank for name in files if (rank := shards.rank_of(name)) is not None}
    if ranks == shards.BEFORE_A_ROUND or len(saved) == ranks.world or saved != set(range(len(saved))):
        return shards.node_share(body, files, ranks)
    metadata = shards.metadata_object(body)
    items = _items(metadata) if metadata is not None else None
    chunks = _chunks(metadata, items) if metadata is not None and items is not None else None
    if items is None or chunks is None:
        return Share(frozenset(files), why=f"it was saved by {len(saved)} rank(s), this round has {ranks.world}, "
                                           "and its .metadata does not size every chunk it places")
    for name, item in items.items():
        if (why := uneven(name, item, len(saved))):
            return Share(frozenset(files), why=why)
    read: dict[str, list[Range]] = {}
    narrowed: dict[str, list[Narrowed]] = {}
    for chunk in chunks:
        if (rows := _rows_read(chunk, items[chunk.item], ranks)) is None:
            continue
        if (narrow := _narrowed(chunk, items[chunk.item], rows)) is None:
            read.setdefault(chunk.path, []).append((chunk.offset, chunk.length))
            continue
        offset, length, start, stored_rows, row_bytes, _ = narrow
        end = start + stored_rows * row_bytes  # the archive's head, the rows read, its tail
        read.setdefault(chunk.path, []).extend(piece for piece in (
            (offset, start - offset), (start + rows[0] * row_bytes, (rows[1] - rows[0]) * row_bytes),
            (end, offset + length - end)) if piece[1] > 0)
        narrowed.setdefault(chunk.path, []).append(narrow)
    ends = shards.extents(body) or {}
    pieces = coalesced(read)
    whole = {path for path, ranges in pieces.items() if ranges == [(0, ends.get(path, -1))]}
    return Share(frozenset(whole), {path: ranges for path, ranges in pieces.items() if path not in whole},
                 narrowed={path: holding for path, chunks in narrowed.items() if path not in whole
                           and (holding := [each for each in chunks if _has_hole(each, pieces[path])])})


def uneven(name: str, item: Item, world: int) -> str:
    """Why the item is not split over `world` ranks as FSDP2 splits dim 0 ('' when it is, or stored whole)."""
    if item.size is None or len(item.chunks) <= 1 and _covers(item.size, item.chunks):
        return ""
    rows = item.size[0] if item.size else 0
    each = -(-rows // world)
    expected = [(start, min(each, rows - start)) for start in range(0, rows, each)] if each else []
    found = []
    for offsets, sizes in item.chunks:
        if list(offsets[1:]) != [0] * (len(offsets) - 1) or tuple(sizes[1:]) != item.size[1:]:
            return f"its item {name!r} is split along another dimension than dim 0, so which rank reads which chunk " \
                   "is not known"
        if sizes and sizes[0]:
            found.append((offsets[0], sizes[0]))
    if sorted(found) != expected:
        return f"its item {name!r} is not split over the {world} ranks that saved it as FSDP2 splits dim 0, so " \
               "which rank reads which chunk is not known"
    return ""


def _covers(size: tuple[int, ...], chunks: tuple[tuple[tuple[int, ...], tuple[int, ...]], ...]) -> bool:
    return len(chunks) == 1 and tuple(chunks[0][1]) == size and not any(chunks[0][0])


def _rows_read(chunk: Chunk, item: Item, ranks: NodeRanks) -> tuple[int, int] | None:
    """The rows of the chunk (from, to, counted from its first) any of the node's ranks reads: all of a bytes
    item, of an item stored whole, or of a 0-d one; else those that overlap the rows the node's ranks hold at
    this world size (consecutive ranks: one run). None when none does."""
    if item.size is None or _covers(item.size, item.chunks) or not item.size:
        return 0, chunk.rows
    each = -(-item.size[0] // ranks.world)
    start, end = ranks.ranks.start * each, min(ranks.ranks.stop * each, item.size[0])
    first, last = max(start, chunk.first_row), min(end, chunk.first_row + chunk.rows)
    return (first - chunk.first_row, last - chunk.first_row) if first < last else None


def _narrowed(chunk: Chunk, item: Item, rows: tuple[int, int]) -> Narrowed | None:
    """The chunk as fetched without the rows the node does not read, where some are left and its archive's
    layout can be guessed (chunk_archive.py): (offset, length, storage start, rows, row bytes, row elements)."""
    if item.size is None or item.element_bytes is None or rows == (0, chunk.rows) or chunk.rows <= 0:
        return None
    row_elements = math.prod(item.size[1:])
    row_bytes = row_elements * item.element_bytes
    start = chunk.offset + chunk_archive.ARCHIVE_HEAD
    if start + chunk.rows * row_bytes + 16 > chunk.offset + chunk.length:
        return None
    return chunk.offset, chunk.length, start, chunk.rows, row_bytes, row_elements


def _has_hole(narrow: Narrowed, pieces: list[Range]) -> bool:
    """Whether some row of the chunk's storage is still left out once near pieces are joined."""
    offset, length = narrow[:2]
    return not any(at <= offset and offset + length <= at + size for at, size in pieces)


def coalesced(read: dict[str, list[Range]]) -> dict[str, list[Range]]:
    """Each file's ranges merged where they touch or overlap, and then across the smallest gaps (each at most
    COALESCE_BYTES) while the bytes those gaps add stay within GAP_SHARE of the bytes read: fewer GETs, and a
    bound on what they cost."""
    runs = {path: merged(ranges) for path, ranges in read.items()}
    budget = GAP_SHARE * sum(length for ranges in runs.values() for _, length in ranges)
    gaps = sorted((ranges[i + 1][0] - (ranges[i][0] + ranges[i][1]), path, i)
                  for path, ranges in runs.items() for i in range(len(ranges) - 1))
    bridged: set[tuple[str, int]] = set()
    for gap, path, index in gaps:
        if gap > COALESCE_BYTES or gap > budget:
            break
        budget -= gap
        bridged.add((path, index))
    joined: dict[str, list[Range]] = {}
    for path, ranges in runs.items():
        out = [ranges[0]]
        for index, (offset, length) in enumerate(ranges[1:]):
            if (path, index) in bridged:
                out[-1] = (out[-1][0], offset + length - out[-1][0])
            else:
                out.append((offset, length))
        joined[path] = out
    return joined


# ---- the .metadata's items and chunks, read from its Shadows -------------------------------------------

def _items(metadata: Shadow) -> dict[str, Item] | None:
    found = metadata.field("state_dict_metadata")
    if not isinstance(found, dict):
        return None
    items = {}
    for name, entry in found.items():
        if not (isinstance(name, str) and isinstance(entry, Shadow)):
            return None
        if entry.kind == "BytesStorageMetadata":
            items[name] = Item(None)
            continue
        size, chunks = _size(entry.field("size")), entry.field("chunks")
        pairs = [(_size(c.field("offsets")), _size(c.field("sizes"))) for c in chunks or [] if isinstance(c, Shadow)]
        if size is None or not isinstance(chunks, list) or len(pairs) != len(chunks):
            return None
        if any(offsets is None or sizes is None for offsets, sizes in pairs):
            return None
        items[name] = Item(size, tuple((o, s) for o, s in pairs if o is not None and s is not None),
                           _element_bytes(entry.field("properties")))
    return items


def _element_bytes(properties: object) -> int | None:
    """Bytes an element of the item's dtype, from its TensorProperties (pickled as the tuple its __getstate__
    returns, dtype first: torch 2.13); None when not known."""
    if not isinstance(properties, Shadow):
        return None
    state = properties.state
    dtype = state[0] if isinstance(state, tuple) and state else properties.field("dtype")
    return chunk_archive.ELEMENT_BYTES.get(getattr(dtype, "kind", "")) if isinstance(dtype, type) else None


def _size(value: object) -> tuple[int, ...] | None:
    """A torch.Size as its pickle rebuilds it here: a Shadow built from one tuple of ints (or that tuple)."""
    if isinstance(value, Shadow) and len(value.args) == 1:
        value = value.args[0]
    if isinstance(value, (tuple, list)) and all(type(each) is int for each in value):
        return tuple(value)
    return None


def _chunks(metadata: Shadow, items: dict[str, Item]) -> list[Chunk] | None:
    storage = metadata.field("storage_data")
    if not isinstance(storage, dict):
        return None
    found = []
    for index, info in storage.items():
        if not (isinstance(index, Shadow) and isinstance(info, Shadow)):
            return None
        item, path = index.field("fqn"), info.field("relative_path")
        offset, length = info.field("offset"), info.field("length")
        if not (isinstance(item, str) and item in items and isinstance(path, str)
                and type(offset) is int and type(length) is int):
            return None
        first_row, rows = _rows(items[item], _size(index.field("offset")))
        found.append(Chunk(item, first_row, rows, path, offset, length))
    return found


def _rows(item: Item, offsets: tuple[int, ...] | None) -> tuple[int, int]:
    """(first row, rows) of the chunk of `item` at `offsets` ((-1, 0) for a bytes item or a 0-d tensor)."""
    if item.size is None or not item.size or offsets is None:
        return -1, 0
    for chunk_offsets, sizes in item.chunks:
        if tuple(chunk_offsets) == offsets:
            return offsets[0], sizes[0]
    return offsets[0], item.size[0]  # a chunk the item does not list: taken as read by whoever reads its rows
