"""The names of a framework's saves that its patches here and the checkpoint layouts
(storage/saves/frameworks.py) must agree on. Nothing is imported: the storage side reads these without loading
any framework or any other module of this room."""

from __future__ import annotations

import re

# ModelCheckpoint(save_last=True) keeps a copy of the newest save under this name, and the agent links one
# to the step it restores, so `ckpt_path="last"` (and auto_resume) finds it.
LIGHTNING_LAST = "last.ckpt"
LIGHTNING_LAST_NAMES = re.compile(r"^last(-v?\d+)?\.ckpt$")  # with the versions Lightning adds beside one

# In CHECKPOINT_DIR: the step a node restored in part (what its ranks read), what it left out and where in S3
# that is; written by storage/steps/checkpoint_restore.py, read by a rank's reads (missing_reads.py).
RESTORED_PART = ".restored-part.json"
