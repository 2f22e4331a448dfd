"""The runtime's wheel is built from this checkout's spot_trainer/ as it is now: nothing an earlier build staged
in build/ (a module since moved or removed) ships beside it."""

from __future__ import annotations

import zipfile
from pathlib import Path

from stacks.instance.runtime_wheel import REPO_ROOT, build_lock, forget_earlier_builds, runtime_wheel


def test_a_build_starts_from_nothing_an_earlier_build_staged(tmp_path: Path) -> None:
    staged = tmp_path / "build" / "lib" / "spot_trainer" / "storage"
    staged.mkdir(parents=True)
    (staged / "layouts.py").write_text("# moved to storage/saves/ since\n")
    (tmp_path / "build" / "bdist.linux-x86_64" / "wheel").mkdir(parents=True)
    kept = tmp_path / "build" / "runtime-wheels" / "0123456789abcdef"
    kept.mkdir(parents=True)
    forget_earlier_builds(tmp_path)
    assert sorted(p.name for p in (tmp_path / "build").iterdir()) == ["runtime-wheels"]
    assert kept.is_dir()


def test_the_wheel_holds_the_modules_of_trainer_and_no_other(tmp_path: Path) -> None:
    with build_lock():  # as a build of before the module moved would have left it
        stale = REPO_ROOT / "build" / "lib" / "spot_trainer" / "storage" / "moved_since.py"
        stale.parent.mkdir(parents=True, exist_ok=True)
        stale.write_text("# moved since\n")
    with zipfile.ZipFile(runtime_wheel(tmp_path / "cache")) as wheel:
        shipped = {name.removeprefix("spot_trainer/") for name in wheel.namelist()
                   if name.startswith("spot_trainer/") and name.endswith(".py")}
    trainer = REPO_ROOT / "spot_trainer"
    assert shipped == {str(p.relative_to(trainer)) for p in trainer.rglob("*.py")}
