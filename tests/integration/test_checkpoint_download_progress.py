"""`spot-trainer outputs --checkpoint` shows a big restore's progress on one line of a terminal: the
bar starts once the manifest says how much there is, and ends at the whole checkpoint."""

from __future__ import annotations

import io
import os
from pathlib import Path

from spot_trainer.ops.progress_line import MB, DownloadBar
from spot_trainer.storage.steps.remote import RemoteStore
from spot_trainer.storage.upload_outcome import UploadOutcome
from tests.integration.test_multinode import job_store


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_restore_to_a_terminal_shows_its_bytes_up_to_the_whole_checkpoint(
    aws_env: dict[str, str], bucket: str, tmp_path: Path
) -> None:
    store: RemoteStore = job_store(aws_env, bucket, "progress")
    checkpoint = tmp_path / "saved" / "step-00000010"
    checkpoint.mkdir(parents=True)
    for index in range(3):
        (checkpoint / f"part-{index}.bin").write_bytes(os.urandom(20 * MB))
    assert store.upload(checkpoint, 10) is UploadOutcome.PUBLISHED
    screen = Terminal()
    bar = DownloadBar(screen)
    store.on_download = bar
    restored = store.restore(tmp_path / "downloaded")
    bar.end()
    assert restored is not None and store.restored_step == 10
    frames = screen.getvalue().split("\r")[1:]
    assert len(frames) > 1 and frames[-1] == "[##############################]     60.0 of 60.0 MB\n", frames[-3:]
