"""Every command's `--help` says its whole first paragraph, never a line cut mid-sentence."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys

import pytest

from stacks.help_text import first_paragraph
from tests.unit.stack_support import REPO

MODULES = ["stacks.preflight", "stacks.console_template", "localcloud"]


def test_the_first_paragraph_is_whole_and_on_one_line() -> None:
    doc = "What would stop a deploy, asked\nbefore anything is created.\n\nDetails."
    assert first_paragraph(doc) == "What would stop a deploy, asked before anything is created."


@pytest.mark.parametrize("module", MODULES)
def test_help_ends_its_description_with_the_sentence(module: str) -> None:
    doc = importlib.import_module(module if module != "localcloud" else "localcloud.__main__").__doc__
    done = subprocess.run([sys.executable, "-m", module, "--help"], cwd=REPO, capture_output=True, text=True,
                          timeout=60, env={**os.environ, "COLUMNS": "2000"})
    assert done.returncode == 0, done.stderr
    description = first_paragraph(doc)
    assert description.endswith((".", ")")) and description in done.stdout, done.stdout
