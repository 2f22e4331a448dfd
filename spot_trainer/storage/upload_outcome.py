"""What one checkpoint upload achieved, as a type: the uploader, the store and a node's part of a sharded
step (step_parts.py) all speak it, so a misspelt outcome is a type error, not an upload counted as none.
Standard library only: the modules that return it need nothing else of each other."""

from __future__ import annotations

from enum import Enum


class UploadOutcome(Enum):
    PUBLISHED = "published"  # the step is in S3 and latest.json names it
    PART_SENT = "part sent"  # this node's part of a sharded step went up; the step counts once every part has
    NOT_PUBLISHED = "not published"  # S3 held this step or a newer one already, or the lease was lost

    @classmethod
    def of(cls, published: bool) -> UploadOutcome:
        """A whole checkpoint's upload: it is published or it is not."""
        return cls.PUBLISHED if published else cls.NOT_PUBLISHED
