"""How a rank of the built-in trainer's world ends its process: at once, with its exit code, and with
its last output delivered. A group of one returns the code to its caller and the process goes on."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]

ENDS = """
import sys
from spot_trainer.builtin.group import Group
print("solo returned", Group().end_process(3))
sys.stdout.write("last words without a newline")
sys.stderr.write("error: the last line")
Group(rank=1, world=2).end_process(75)
print("after the end")
"""


def test_a_rank_ends_with_its_code_and_its_unflushed_output_delivered() -> None:
    # stdout is a pipe here, as under torchrun and the agent: block-buffered, so an unflushed exit loses it.
    ended = subprocess.run([sys.executable, "-c", ENDS], capture_output=True, text=True, timeout=120,
                           env={"PYTHONPATH": str(REPO_ROOT), "PATH": "/usr/bin:/bin"})
    assert ended.returncode == 75, ended.stderr
    assert ended.stdout == "solo returned 3\nlast words without a newline"
    assert ended.stderr.endswith("error: the last line")
