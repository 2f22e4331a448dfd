"""A `.metadata` as torch.distributed.checkpoint writes it: every chunk placed in its file by storage data
(`_StorageInfo(relative_path, offset, length)`), here one chunk per shard file, as long as the file."""

from __future__ import annotations

import math
import pickle
from pathlib import Path
from typing import Any

import torch
from torch.distributed.checkpoint.filesystem import _StorageInfo
from torch.distributed.checkpoint.metadata import (
    ChunkStorageMetadata,
    Metadata,
    MetadataIndex,
    TensorProperties,
    TensorStorageMetadata,
)
from torch.distributed.checkpoint.planner_helpers import create_read_items_for_chunk_list


def metadata_bytes(sizes: dict[str, int], tag: str = "") -> bytes:
    """Shard file name → its size. `tag` makes two saves of the same files differ, as two saves' do."""
    storage = {MetadataIndex(f"{tag}{name}"): _StorageInfo(name, 0, size) for name, size in sizes.items()}
    return pickle.dumps(Metadata(state_dict_metadata={}, storage_data=storage))


def write_metadata(folder: Path, shards: dict[str, int], tag: str = "") -> None:
    """`.metadata` for a save whose shards have these sizes, written last (DCP's rename)."""
    (folder / ".metadata.tmp").write_bytes(metadata_bytes(shards, tag))
    (folder / ".metadata.tmp").rename(folder / ".metadata")


# ---- a save of FSDP2's shape: every tensor split along dim 0 as torch.chunk splits it over the ranks ------
CHUNK_OVERHEAD = 1577  # bytes DCP's writer adds around each chunk's data (torch.save's archive of one tensor)


def llama_shapes(layers: int, dim: int, hidden: int, vocab: int) -> dict[str, tuple[int, ...]]:
    """A decoder's parameters by name and shape, as Llama's are (attention, MLP, two norms a layer)."""
    shapes: dict[str, tuple[int, ...]] = {"tok_embeddings.weight": (vocab, dim)}
    for layer in range(layers):
        block = f"layers.{layer}"
        shapes.update({f"{block}.attention.{name}.weight": (dim, dim) for name in ("wq", "wk", "wv", "wo")})
        shapes.update({f"{block}.feed_forward.{name}.weight": (hidden, dim) for name in ("w1", "w3")})
        shapes.update({f"{block}.feed_forward.w2.weight": (dim, hidden),
                       f"{block}.attention_norm.weight": (dim,), f"{block}.ffn_norm.weight": (dim,)})
    shapes.update({"norm.weight": (dim,), "output.weight": (vocab, dim)})
    return shapes


def fsdp_items(shapes: dict[str, tuple[int, ...]]) -> dict[str, tuple[int, ...]]:
    """The items of `get_state_dict(model, AdamW)`: each parameter, its exp_avg and exp_avg_sq of its shape,
    and its 0-d step."""
    items: dict[str, tuple[int, ...]] = {}
    for name, shape in shapes.items():
        items[f"model.{name}"] = shape
        items.update({f"optimizer.state.{name}.{kind}": shape for kind in ("exp_avg", "exp_avg_sq")})
        items[f"optimizer.state.{name}.step"] = ()
    return items


def fsdp_metadata(items: dict[str, tuple[int, ...]], world: int, element_bytes: int = 4, split: int = 0,
                  folder: Path | None = None) -> tuple[bytes, dict[str, int]]:
    """`.metadata` of a DCP save of `items` by `world` ranks sharded as FSDP2 shards (dim `split`, torch.chunk's
    ceil(n/world) a rank, trailing ranks empty), each rank's chunks one after another in `__<rank>_0.distcp`;
    a 0-d item stored once, by the rank whose file is shortest (DCP's dedup). The pickle and each file's size.
    With `folder`, the shard files are written there too, each chunk a torch.save of a fp32 tensor of its shape,
    as DCP's writer stores it (and the sizes are theirs)."""
    streams = {rank: open(folder / f"__{rank}_0.distcp", "wb") for rank in range(world)} if folder else {}
    ends = [0] * world
    storage: dict[MetadataIndex, _StorageInfo] = {}
    state: dict[str, TensorStorageMetadata] = {}
    for name, shape in items.items():
        chunks = []
        for rank, offsets, sizes in _placed(shape, world, split, ends):
            chunks.append(ChunkStorageMetadata(offsets=torch.Size(offsets), sizes=torch.Size(sizes)))
            length = CHUNK_OVERHEAD + element_bytes * math.prod(sizes)
            if streams:
                torch.save(torch.full(sizes, float(rank + 1)), streams[rank])
                length = streams[rank].tell() - ends[rank]
            storage[MetadataIndex(name, torch.Size(offsets))] = _StorageInfo(f"__{rank}_0.distcp", ends[rank], length)
            ends[rank] += length
        state[name] = TensorStorageMetadata(TensorProperties(dtype=torch.float32), torch.Size(shape), chunks)
    for stream in streams.values():
        stream.close()
    body = pickle.dumps(Metadata(state_dict_metadata=state, storage_data=storage))  # type: ignore[arg-type]
    return body, {f"__{rank}_0.distcp": end for rank, end in enumerate(ends)}


def _placed(shape: tuple[int, ...], world: int, split: int,
            ends: list[int]) -> list[tuple[int, tuple[int, ...], tuple[int, ...]]]:
    """(rank, offsets, sizes) of each chunk of an item of `shape`."""
    if not shape:
        return [(ends.index(min(ends)), (), ())]
    dim = min(split, len(shape) - 1)  # a 1-d item is split along its one dimension
    each = -(-shape[dim] // world)
    placed = []
    for rank in range(world):
        start = min(rank * each, shape[dim])
        size = min(each, shape[dim] - start)
        offsets = tuple(start if d == dim else 0 for d in range(len(shape)))
        placed.append((rank, offsets, tuple(size if d == dim else n for d, n in enumerate(shape))))
    return placed


def plan_items(body: bytes, ranks: range, world: int) -> list[tuple[Any, Any]]:
    """(_StorageInfo, ReadItem) of every read torch's own planner has `ranks` of `world` make when each holds its
    FSDP2 part (torch.chunk's rows of dim 0)."""
    metadata = pickle.loads(body)
    reads = []
    for rank in ranks:
        for name, item in metadata.state_dict_metadata.items():
            size = tuple(item.size)
            if size:
                rows = torch.chunk(torch.arange(size[0]), world)
                mine = rows[rank] if rank < len(rows) else torch.arange(0)
                first = int(mine[0]) if len(mine) else 0
                local = ChunkStorageMetadata(torch.Size([first, *[0] * (len(size) - 1)]),
                                             torch.Size([len(mine), *size[1:]]))
            else:
                local = ChunkStorageMetadata(torch.Size([]), torch.Size([]))
            reads += [(metadata.storage_data[read.storage_index], read)
                      for read in create_read_items_for_chunk_list(name, item, [local])]
    return reads


def plan_reads(body: bytes, ranks: range, world: int) -> dict[str, set[tuple[int, int]]]:
    """file → (offset, length) of every stored chunk those reads read whole (DCP's file reader)."""
    reads: dict[str, set[tuple[int, int]]] = {}
    for info, _ in plan_items(body, ranks, world):
        reads.setdefault(info.relative_path, set()).add((info.offset, info.length))
    return reads
