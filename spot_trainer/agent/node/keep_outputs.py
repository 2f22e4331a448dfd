"""Before a finished job lets its instance go: what the command left beside its checkpoints (the final
model, metrics) goes to S3, or a warning says it did not. The checkpoints themselves are already there."""

from __future__ import annotations

from pathlib import Path

from ...storage.record_kinds import EventKind
from ...storage.saves.final_outputs import FINAL_PREFIX, final_output_files
from ..records.telemetry import RunTelemetry


def keep_final_outputs(telemetry: RunTelemetry, directory: Path) -> None:
    store = telemetry.store
    location = f"s3://{store.bucket}/{store.key(FINAL_PREFIX)}"
    try:
        files = final_output_files(directory)
        if not files:
            return
        size = store.upload_files(files, FINAL_PREFIX)
    # Whatever went wrong (S3, a file that vanished, a name S3 cannot take), the training did finish:
    # the job ends DONE, with a warning rather than a failure and a needless rerun.
    except Exception as error:
        message = (f"the command's final outputs in {directory} did not reach {location} ({error}): they go "
                   "with the instance")
        telemetry.warn(message)
        return
    telemetry.log(f"final outputs: {len(files)} files ({size / 1e6:.1f} MB) from {directory} kept in {location}")
    telemetry.event(EventKind.FINAL_OUTPUTS, location=location, files=len(files), bytes=size)
