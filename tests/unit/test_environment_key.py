"""The environment cache's key holds everything that decides a job's environment, and only that; the room
runs on the image's own python3 before anything is installed, so it imports the standard library only."""

from __future__ import annotations

import ast
import sys
import zipfile
from pathlib import Path

from spot_trainer.environment.key import environment_key, key_lines, requirement_files

ROOM = Path(__file__).resolve().parents[2] / "spot_trainer" / "environment"


def test_the_requirement_files_a_setup_command_names_are_found() -> None:
    setup = "pip install -r requirements.txt && pip install --requirement=extra.txt -rdev.txt --requirement b.txt"
    assert requirement_files(setup) == ["requirements.txt", "extra.txt", "dev.txt", "b.txt"]
    assert requirement_files("pip install transformers") == []
    assert requirement_files("pip install 'unbalanced") == []


def key_of(tmp_path: Path, requirements: str = "transformers==4.50\n", **changes: str) -> str:
    wheel, code = tmp_path / "runtime.whl", tmp_path / "code.zip"
    wheel.write_bytes(changes.pop("wheel", "wheel").encode())
    with zipfile.ZipFile(code, "w") as archive:
        archive.writestr("requirements.txt", requirements)
    settings = {"image": "ami-0aaa", "arch": "x86_64", "torch": "", "setup": "pip install -r requirements.txt",
                "userdata_version": "v2", **changes}
    return environment_key(key_lines(runtime_wheel=wheel, code=code, **settings))


def test_the_key_changes_with_each_thing_that_decides_the_environment(tmp_path: Path) -> None:
    same = key_of(tmp_path)
    assert key_of(tmp_path) == same
    changed = [key_of(tmp_path, requirements="transformers==4.51\n"), key_of(tmp_path, image="ami-0bbb"),
               key_of(tmp_path, arch="aarch64"), key_of(tmp_path, torch="torch==2.13.0"),
               key_of(tmp_path, wheel="another runtime"), key_of(tmp_path, setup="pip install -r requirements.txt -q")]
    assert len({same, *changed}) == 1 + len(changed)


def test_the_room_imports_the_standard_library_only() -> None:
    for path in ROOM.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) and node.level == 0 else []
            for name in names:
                assert name.split(".")[0] in sys.stdlib_module_names | {"__future__"}, f"{path.name} imports {name}"


def test_the_room_needs_no_python_newer_than_amazon_linux_2023s() -> None:
    """Amazon Linux 2023's python3 is 3.9: vermin reads the syntax and the standard library's APIs each
    file uses (a `match`, `zip(strict=)`, `hashlib.file_digest` would each need a newer one)."""
    import vermin

    config = vermin.Config()
    config.add_target((True, (3, 9)))  # 3.9 or later
    config.set_eval_annotations(True)
    for path in ROOM.glob("*.py"):
        found = vermin.visit(path.read_text(), config, str(path))
        minimum = found.minimum_versions()[1]
        assert minimum is not None and minimum <= (3, 9), f"{path.name} needs Python {minimum}"

