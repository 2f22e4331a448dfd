"""Why a checkpoint could not go up, in a few words: each cause is named once here, and its text is both
what the user reads and the key a warning is announced once by (an `upload_failing` event's "cause").

A `StrEnum`, so the text is the value: records and warnings keep the words they always had, and a misspelt
cause is a type error. Causes read from an error (S3's answer, the disk's errno) are computed where the
error is read (upload_health.cause_of). Standard library only.
"""

from __future__ import annotations

from enum import StrEnum, unique


@unique  # two causes of one text would be one key: the second would never be announced
class FailureCause(StrEnum):
    # A checkpoint's files
    LEFT_OUT = "file names S3 cannot take"  # keys over 1024 bytes: left out, or the whole checkpoint refused
    LINK = "a checkpoint that is a link"
    NOT_REGULAR = "a checkpoint that is neither a file nor a folder"  # a FIFO, a socket, a device
    REWRITTEN = "files rewritten while they were uploaded"
    CUT_SHORT = "a checkpoint file cut short after it was checked"
    NOT_AS_SENT = "objects S3 holds that differ from the bytes sent"
    # Objects written only where none is yet
    TAKEN = "an object another writer created"
    OVERLAPPING = "conditional writes kept overlapping"
    # A node's part of a sharded step (step_parts.py)
    NO_COORDINATOR = "no coordinator's part"
    ANOTHER_SAVE = "shards of another save"
    SETTLED = "a settled save"
    NO_STORAGE_DATA = "a .metadata without storage data"
    ANOTHER_SAVE_SETTLED = "another save of the step settled"
    LATEST_NOT_MOVED = "latest.json not moved"
    RECORDS_GONE = "a settled save's records gone"
    SETTLED_NOT_WHOLE = "a settled save not whole"


# Refusals no retry can mend: the checkpoint itself is what S3 must not or cannot take. The rest may be a bad
# minute of S3 or of the disk, and are retried while time allows.
NEVER_SENT = frozenset({FailureCause.LEFT_OUT, FailureCause.LINK, FailureCause.NOT_REGULAR})
