"""The local checkpoint store: atomic commits, fallback past damaged entries, retention, async saves."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch

from spot_trainer.storage.files.local import (
    MARKER_FILE,
    STATE_FILE,
    AsyncCheckpointer,
    CheckpointError,
    checkpoint_name,
    committed_checkpoints,
    latest_checkpoint,
    list_checkpoints,
    load_checkpoint,
    load_latest_valid,
    prune_checkpoints,
    remove_stale_temps,
    torch_writer,
    write_checkpoint,
)


def make_state(value: float, size: int = 1000) -> dict[str, Any]:
    return {"model": {"w": torch.full((size,), value), "b": torch.arange(3)}, "step": int(value), "note": "x"}


def failing_writer(state: dict[str, Any], path: Path) -> None:
    """Writes part of the file, then dies like a full disk or a crash would."""
    path.write_bytes(b"\x00" * 4096)
    raise OSError(28, "No space left on device")


def test_commit_marker_is_written_after_the_state_and_the_entry_appears_atomically(tmp_path: Path) -> None:
    seen_during_write: list[list[str]] = []

    def observing_writer(state: dict[str, Any], path: Path) -> None:
        torch_writer(state, path)
        seen_during_write.append(sorted(p.name for p in path.parent.iterdir()))
        seen_during_write.append(sorted(p.name for p in tmp_path.iterdir()))

    path = write_checkpoint(tmp_path, 7, make_state(7.0), observing_writer)

    assert seen_during_write[0] == [STATE_FILE]  # no marker while the state is being written
    assert not any(name.startswith("step-") for name in seen_during_write[1])  # only the temp is visible
    assert path == tmp_path / "step-00000007"
    marker = json.loads((path / MARKER_FILE).read_text())
    assert marker == {"step": 7, "files": {STATE_FILE: (path / STATE_FILE).stat().st_size}}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["step-00000007"]
    assert torch.equal(load_checkpoint(path)["model"]["w"], torch.full((1000,), 7.0))


def test_failing_writer_leaves_the_previous_checkpoint_valid_and_no_new_entry(tmp_path: Path) -> None:
    write_checkpoint(tmp_path, 10, make_state(10.0))

    with pytest.raises(OSError, match="No space left"):
        write_checkpoint(tmp_path, 20, make_state(20.0), failing_writer)

    assert [step for step, _ in list_checkpoints(tmp_path)] == [10]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["step-00000010"]  # temp removed
    path, state = load_latest_valid(tmp_path)
    assert path.name == "step-00000010" and state["step"] == 10


def test_listing_orders_by_step_counts_user_entries_and_ignores_temps(tmp_path: Path) -> None:
    (tmp_path / "step-9").write_bytes(b"user checkpoint file")
    (tmp_path / "step-10").mkdir()
    (tmp_path / ".tmp-step-11-abc").mkdir()
    (tmp_path / "notes.txt").write_text("not a checkpoint")

    assert [(step, path.name) for step, path in list_checkpoints(tmp_path)] == [(9, "step-9"), (10, "step-10")]
    assert latest_checkpoint(tmp_path) == tmp_path / "step-10"
    assert committed_checkpoints(tmp_path) == []  # neither has our marker
    assert latest_checkpoint(tmp_path / "missing") is None


@pytest.mark.parametrize("damage", ["missing marker", "truncated state", "garbage state", "marker for other step"])
def test_loader_falls_back_past_a_damaged_newest_checkpoint_with_one_warning(
    tmp_path: Path, damage: str, capsys: pytest.CaptureFixture[str]
) -> None:
    write_checkpoint(tmp_path, 1, make_state(1.0))
    newest = write_checkpoint(tmp_path, 2, make_state(2.0))
    state_file = newest / STATE_FILE
    if damage == "missing marker":
        (newest / MARKER_FILE).unlink()
    elif damage == "truncated state":
        state_file.write_bytes(state_file.read_bytes()[:100])
    elif damage == "garbage state":  # same size, so only reading it can tell
        state_file.write_bytes(b"\xff" * state_file.stat().st_size)
    else:
        (newest / MARKER_FILE).write_text(json.dumps({"step": 3, "files": {STATE_FILE: 1}}))

    path, state = load_latest_valid(tmp_path)

    assert path.name == "step-00000001" and torch.equal(state["model"]["w"], torch.full((1000,), 1.0))
    warnings = capsys.readouterr().err.strip().splitlines()
    assert len(warnings) == 1 and "skipping checkpoint step 2" in warnings[0]
    assert "Traceback" not in warnings[0]


def test_rewriting_a_step_replaces_a_damaged_entry_and_keeps_a_committed_one(tmp_path: Path) -> None:
    damaged = tmp_path / checkpoint_name(5)
    damaged.mkdir()
    (damaged / STATE_FILE).write_bytes(b"half")

    path = write_checkpoint(tmp_path, 5, make_state(5.0))
    assert load_checkpoint(path)["step"] == 5

    again = write_checkpoint(tmp_path, 5, make_state(99.0))  # already committed: left as it is
    assert again == path and load_checkpoint(path)["step"] == 5
    assert sorted(p.name for p in tmp_path.iterdir()) == ["step-00000005"]


def test_keep_last_k_deletes_older_entries_but_never_the_newest_committed(tmp_path: Path) -> None:
    for step in range(1, 6):
        write_checkpoint(tmp_path, step, make_state(float(step), size=10))
    (tmp_path / "step-3").mkdir()  # an old leftover without a marker
    (tmp_path / "step-9").mkdir()  # newer than anything committed: maybe another writer's, kept

    prune_checkpoints(tmp_path, keep=2)
    assert [step for step, _ in list_checkpoints(tmp_path)] == [4, 5, 9]

    prune_checkpoints(tmp_path, keep=0)
    assert [step for step, _ in committed_checkpoints(tmp_path)] == [5]


def test_stale_temps_are_removed_and_foreign_dot_entries_are_left(tmp_path: Path) -> None:
    (tmp_path / ".tmp-step-4-deadbeef").mkdir()
    (tmp_path / ".trash-step-00000001-cafe").mkdir()
    (tmp_path / ".restore-step-8").mkdir()

    remove_stale_temps(tmp_path)

    assert sorted(p.name for p in tmp_path.iterdir()) == [".restore-step-8"]


def test_async_save_snapshots_the_state_so_later_updates_do_not_leak_in(tmp_path: Path) -> None:
    commits: list[tuple[int, Path]] = []
    store = AsyncCheckpointer(tmp_path, keep=5, on_commit=lambda step, path, stall, write: commits.append((step, path)))
    live = make_state(1.0, size=100_000)

    store.save(1, live)
    live["model"]["w"].fill_(2.0)  # the training loop goes on while the write runs
    store.save(2, live)
    store.close()

    assert [step for step, _ in commits] == [1, 2]
    assert torch.equal(load_checkpoint(commits[0][1])["model"]["w"], torch.full((100_000,), 1.0))
    assert torch.equal(load_checkpoint(commits[1][1])["model"]["w"], torch.full((100_000,), 2.0))


def test_async_save_reuses_its_staging_buffers(tmp_path: Path) -> None:
    store = AsyncCheckpointer(tmp_path)
    staged_first = store._buffers.stage(make_state(1.0))
    staged_second = store._buffers.stage(make_state(2.0))

    assert staged_first["model"]["w"].data_ptr() == staged_second["model"]["w"].data_ptr()
    assert torch.equal(staged_second["model"]["w"], torch.full((1000,), 2.0))


def test_background_failure_surfaces_on_the_next_call_and_keeps_the_old_checkpoint(tmp_path: Path) -> None:
    write_checkpoint(tmp_path, 1, make_state(1.0))
    store = AsyncCheckpointer(tmp_path, writer=failing_writer)

    store.save(2, make_state(2.0))
    with pytest.raises(CheckpointError, match="No space left on device"):
        store.close()
    store.close()  # reported once, then the store is usable again

    assert [step for step, _ in committed_checkpoints(tmp_path)] == [1]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["step-00000001"]


def test_save_now_returns_a_committed_path_and_prunes(tmp_path: Path) -> None:
    store = AsyncCheckpointer(tmp_path, keep=1)
    store.save(1, make_state(1.0))
    path = store.save_now(2, make_state(2.0))

    assert path == tmp_path / "step-00000002"
    assert [step for step, _ in list_checkpoints(tmp_path)] == [2]
