"""The walkthrough page's files and command blocks, as a test follows them: a fenced block after
`<!-- file: PATH -->` is that file, one after `<!-- commands: NAME -->` a list of command lines."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

MARKED = re.compile(r"<!-- (file|commands): (\S+) -->\n```[a-z]*\n(.*?)```", re.DOTALL)


@dataclass(frozen=True)
class Walkthrough:
    files: dict[str, str]  # path in the checkout → text
    commands: dict[str, list[str]]  # block name → its lines, in order

    def write_files(self, root: Path) -> None:
        for name, text in self.files.items():
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            (root / name).write_text(text)


def read_walkthrough(page: Path) -> Walkthrough:
    files: dict[str, str] = {}
    commands: dict[str, list[str]] = {}
    for kind, name, body in MARKED.findall(page.read_text()):
        if kind == "file":
            files[name] = body
        else:
            commands[name] = [line for line in body.splitlines() if line.strip()]
    return Walkthrough(files, commands)
