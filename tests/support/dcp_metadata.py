"""A `.metadata` as torch.distributed.checkpoint writes it: every chunk placed in its file by storage data
(`_StorageInfo(relative_path, offset, length)`), here one chunk per shard file, as long as the file."""

from __future__ import annotations

import pickle
from pathlib import Path

from torch.distributed.checkpoint.filesystem import _StorageInfo
from torch.distributed.checkpoint.metadata import Metadata, MetadataIndex


def metadata_bytes(sizes: dict[str, int], tag: str = "") -> bytes:
    """Shard file name → its size. `tag` makes two saves of the same files differ, as two saves' do."""
    storage = {MetadataIndex(f"{tag}{name}"): _StorageInfo(name, 0, size) for name, size in sizes.items()}
    return pickle.dumps(Metadata(state_dict_metadata={}, storage_data=storage))


def write_metadata(folder: Path, shards: dict[str, int], tag: str = "") -> None:
    """`.metadata` for a save whose shards have these sizes, written last (DCP's rename)."""
    (folder / ".metadata.tmp").write_bytes(metadata_bytes(shards, tag))
    (folder / ".metadata.tmp").rename(folder / ".metadata")
