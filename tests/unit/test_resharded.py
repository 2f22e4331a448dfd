"""What a node's ranks read of a DCP save made by another world size, from its `.metadata` alone, held against
torch's own load planner: each rank's FSDP2 part at the new world size (torch.chunk's rows of dim 0) asks, through
`create_read_items_for_chunk_list`, for stored chunks; the node's share holds every byte of each, and few more."""

from __future__ import annotations

import pytest

from spot_trainer.integrations.byte_ranges import merged
from spot_trainer.integrations.missing_reads import used
from spot_trainer.storage.saves import resharded
from spot_trainer.storage.saves.shards import NodeRanks, Share
from tests.support.dcp_metadata import fsdp_items, fsdp_metadata, llama_shapes, plan_items, plan_reads

ITEMS = fsdp_items(llama_shapes(layers=2, dim=96, hidden=259, vocab=101))  # rows that split unevenly


def held(share: Share, sizes: dict[str, int]) -> dict[str, list[tuple[int, int]]]:
    return {**share.pieces, **{name: [(0, sizes[name])] for name in share.whole}}


@pytest.mark.parametrize(("saved", "world", "per_node"), [(4, 3, 1), (8, 6, 1), (8, 6, 2), (6, 8, 1), (16, 12, 4)])
def test_a_node_holds_every_byte_its_ranks_use_and_at_most_5_percent_more(
        saved: int, world: int, per_node: int) -> None:
    body, sizes = fsdp_metadata(ITEMS, saved)
    for group_rank in range(world // per_node):
        ranks = NodeRanks(group_rank=group_rank, nodes=world // per_node, per_node=per_node)
        share = resharded.node_reads(body, set(sizes), ranks)
        assert share.why == "", share.why
        have = held(share, sizes)
        needed: dict[str, list[tuple[int, int]]] = {}
        for info, item in plan_items(body, ranks.ranks, ranks.world):
            for offset, length in used(info, item, [list(each) for each in share.narrowed.get(info.relative_path, [])]):
                assert any(start <= offset and offset + length <= start + size
                           for start, size in have.get(info.relative_path, [])), (info, item)
                needed.setdefault(info.relative_path, []).append((offset, length))
        used_bytes = sum(length for ranges in needed.values() for _, length in merged(ranges))
        fetched = sum(length for ranges in have.values() for _, length in ranges)
        assert used_bytes <= fetched <= used_bytes * (1 + resharded.GAP_SHARE)
        assert set(have) == set(needed)  # a file no rank of the node reads is left out
        # DCP reads whole stored chunks: rows the node does not use are left out of most
        whole_chunks = sum(length for ranges in plan_reads(body, ranks.ranks, ranks.world).values()
                           for _, length in ranges)
        assert fetched < whole_chunks or saved % world == 0 or world % saved == 0, (fetched, whole_chunks)
        assert fetched < sum(sizes.values()) * 0.9


def test_near_chunks_come_in_few_requests() -> None:
    body, sizes = fsdp_metadata(ITEMS, 8)
    share = resharded.node_reads(body, set(sizes), NodeRanks(group_rank=2, nodes=6, per_node=1))
    chunks = sum(len(ranges) for ranges in plan_reads(body, range(2, 3), 6).values())
    requests = sum(len(ranges) for ranges in share.pieces.values()) + len(share.whole)
    assert requests * 2 <= chunks, (requests, chunks)


def test_the_same_world_size_keeps_its_own_share() -> None:
    body, sizes = fsdp_metadata(ITEMS, 4)
    share = resharded.node_reads(body, set(sizes), NodeRanks(group_rank=1, nodes=4, per_node=1))
    assert share.whole == {"__1_0.distcp"} and share.why == ""


def test_a_save_split_along_another_dimension_is_fetched_whole_and_says_why() -> None:
    body, sizes = fsdp_metadata(ITEMS, 4, split=1)
    share = resharded.node_reads(body, set(sizes), NodeRanks(group_rank=0, nodes=3, per_node=1))
    assert share.whole == set(sizes) and not share.pieces
    assert "is split along another dimension than dim 0" in share.why, share.why


def test_a_save_split_unevenly_is_fetched_whole_and_says_why() -> None:
    # Saved by 4 ranks as 5 ranks would split it (ceil(n/5) rows a rank): not FSDP2's split over 4.
    body, sizes = fsdp_metadata(ITEMS, 5)
    sizes.pop("__4_0.distcp")
    share = resharded.node_reads(body, set(sizes), NodeRanks(group_rank=0, nodes=3, per_node=1))
    assert share.whole == set(sizes)
    assert "is not split over the 4 ranks that saved it as FSDP2 splits dim 0" in share.why, share.why


def test_a_metadata_that_does_not_size_its_chunks_is_fetched_whole_and_says_why() -> None:
    body, sizes = fsdp_metadata(ITEMS, 4)
    damaged = body.replace(b"state_dict_metadata", b"state_dict_metadatX")
    share = resharded.node_reads(damaged, set(sizes), NodeRanks(group_rank=0, nodes=3, per_node=1))
    assert share.whole == set(sizes)
    assert share.why == "it was saved by 4 rank(s), this round has 3, and its .metadata does not size every chunk " \
                        "it places"
