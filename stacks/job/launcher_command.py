"""A command that starts its own distributed launcher: under `distributed = true` the agent runs the command
under its own torchrun elastic already (spot_trainer/distributed/launch.py), once per GPU; a launcher inside
would start its own processes per rank and never hear of a lost peer."""

from __future__ import annotations

import re
import shlex

# Each part of a command line that runs something: split at ;, &&, || and |.
PARTS = re.compile(r"\s*(?:;|&&|\|\||\|)\s*")
ENV_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
LAUNCHERS = (("torchrun",), ("python", "-m", "torch.distributed.run"), ("python3", "-m", "torch.distributed.run"),
             ("python", "-m", "torch.distributed.launch"), ("python3", "-m", "torch.distributed.launch"),
             ("accelerate", "launch"), ("deepspeed",))


def own_launcher(command: str) -> str:
    """The launcher the command starts itself ("torchrun", "accelerate launch", ...), or ''."""
    for part in PARTS.split(command):
        try:
            words = shlex.split(part)
        except ValueError:
            continue
        while words and (ENV_ASSIGNMENT.match(words[0]) or words[0] in ("exec", "env")):
            words = words[1:]  # `FOO=1 torchrun ...`, `exec accelerate launch ...`
        for launcher in LAUNCHERS:
            if tuple(words[:len(launcher)]) == launcher or (words and words[0].endswith("/" + launcher[0])
                                                              and tuple(words[1:len(launcher)]) == launcher[1:]):
                return " ".join(launcher)
    return ""
