"""One job's S3 as the runtime holds it: its checkpoints (checkpoint_store.py) and its records and
events (job_records.py), over the one prefix and client they share (job_objects.py)."""

from __future__ import annotations

from ..s3.job_objects import RemoteStoreError
from ..s3.job_records import JobRecords
from .checkpoint_store import CheckpointStore

__all__ = ["RemoteStore", "RemoteStoreError"]


class RemoteStore(CheckpointStore, JobRecords):
    """The checkpoint store and the job's records of one job, as one client."""
