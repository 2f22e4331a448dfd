"""A framework that names its saves its own way is one entry in the registry: the layouts read its names,
its steps and when a save is whole through that entry alone, and every entry's integration is where it says."""

from __future__ import annotations

import ast
import importlib.util
import re
from collections.abc import Iterator
from enum import StrEnum
from pathlib import Path

import pytest

from spot_trainer.integrations import auto_resume
from spot_trainer.storage.saves import frameworks, layouts
from spot_trainer.storage.saves.frameworks import Framework, Judged, Naming

_MYFW_NAME = re.compile(r"^myfw-(\d+)\.ckpt$")


class MyLayout(StrEnum):
    """A registered framework names its layout with an enum of its own."""

    MYFW = "myfw"


def _myfw_whole(save: Judged) -> bool:
    """A made-up format that ends every save with a line of its own."""
    return save.path.read_bytes().endswith(b"END\n")


def _myfw_before_resume(restored: Path) -> None:
    """The made-up framework resumes from the save its `myfw-latest` file names."""
    (restored.parent / "myfw-latest").write_text(restored.name)


@pytest.fixture
def myfw() -> Iterator[Framework]:
    entry = Framework(MyLayout.MYFW, (Naming(frameworks.matched_step(_MYFW_NAME)),), _myfw_whole,
                      copies=re.compile(r"^myfw-copy\.ckpt$"), copy_whole=lambda path: path.read_bytes() != b"",
                      accepts="myfw-<N>.ckpt (MyFramework)", before_resume=_myfw_before_resume)
    frameworks.register(entry)
    yield entry
    frameworks.unregister(entry.layout)


def test_a_registered_framework_is_classified_and_judged_whole_through_its_entry(
        tmp_path: Path, myfw: Framework) -> None:
    (tmp_path / "myfw-20.ckpt").write_bytes(b"weights\nEND\n")
    (tmp_path / "myfw-30.ckpt").write_bytes(b"weights\n")  # still being written
    assert layouts.classify(tmp_path / "myfw-30.ckpt") == layouts.Classified(MyLayout.MYFW, 30)
    assert [found.step for found in layouts.checkpoints_in(tmp_path)] == [30, 20]
    assert layouts.newest_complete(tmp_path) == layouts.Checkpoint(20, tmp_path / "myfw-20.ckpt", MyLayout.MYFW)
    (tmp_path / "myfw-30.ckpt").write_bytes(b"weights\nEND\n")
    assert layouts.newest_complete(tmp_path) == layouts.Checkpoint(30, tmp_path / "myfw-30.ckpt", MyLayout.MYFW)


def test_a_registered_framework_s_resume_its_copies_and_its_names_are_its_entry_s(
        tmp_path: Path, myfw: Framework) -> None:
    (tmp_path / "myfw-20.ckpt").write_bytes(b"weights\nEND\n")
    (tmp_path / "myfw-30.ckpt").write_bytes(b"weights\n")  # its writer died
    (tmp_path / "myfw-copy.ckpt").write_bytes(b"")  # a copy cut off: the framework would read it
    hidden = layouts.prepare_for_resume(tmp_path, tmp_path / "myfw-20.ckpt")
    assert hidden == ["myfw-30.ckpt", "myfw-copy.ckpt"]
    assert (tmp_path / "myfw-latest").read_text() == "myfw-20.ckpt"
    assert "myfw-<N>.ckpt (MyFramework)" in layouts.accepted()
    assert layouts.accepted()[-3:] == (frameworks.GENERIC.accepts, frameworks.SERIES.accepts, frameworks.FIXED.accepts)


def test_without_its_entry_the_name_is_no_checkpoint(tmp_path: Path) -> None:
    (tmp_path / "myfw-20.ckpt").write_bytes(b"weights\nEND\n")
    assert layouts.classify(tmp_path / "myfw-20.ckpt", in_series=False) is None


def test_a_registered_framework_is_asked_before_the_catch_alls_and_only_once(myfw: Framework) -> None:
    assert [entry.layout for entry in frameworks.frameworks()] == [
        "ours", "hf", "lightning", "myfw", "generic", "series", "fixed"]
    with pytest.raises(ValueError, match="myfw"):
        frameworks.register(myfw)


def test_every_integration_an_entry_names_is_a_module_of_the_runtime() -> None:
    named = [entry.integration for entry in frameworks.frameworks() if entry.integration]
    assert named, "hf and lightning name theirs"
    for integration in named:
        assert importlib.util.find_spec(f"spot_trainer.{integration}") is not None, integration


def test_the_lightning_copy_auto_resume_reads_is_the_one_the_layouts_know() -> None:
    copies = frameworks.LIGHTNING.copies
    assert copies is not None and copies.match(auto_resume.LIGHTNING_LAST)
    assert frameworks.is_copy(auto_resume.LIGHTNING_LAST) and not frameworks.is_copy("epoch=0-step=10.ckpt")


def test_storage_reads_of_the_integrations_only_the_names_that_import_nothing() -> None:
    root = Path(__file__).resolve().parents[2] / "spot_trainer"
    reached = {node.module for path in (root / "storage").rglob("*.py")
               for node in ast.walk(ast.parse(path.read_text())) if isinstance(node, ast.ImportFrom)
               and node.module and node.module.startswith("integrations")}
    assert reached == {"integrations.checkpoint_names", "integrations.byte_ranges"}
    for leaf in ("checkpoint_names", "byte_ranges"):
        names = ast.parse((root / "integrations" / f"{leaf}.py").read_text())
        assert {alias.name for node in ast.walk(names) if isinstance(node, ast.Import | ast.ImportFrom)
                for alias in node.names} <= {"annotations", "re"}, leaf
