"""What the agent changes in the Python processes of a command of the user's own: the framework
patches it installs (and when), the post-import hook that installs them, the first-call resume,
and the sitecustomize that brings them in without hiding the environment's own."""

from __future__ import annotations

import importlib
import importlib.util
import os
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from spot_trainer.agent.program.command import AUTO_RESUME_PATH, with_auto_resume
from spot_trainer.integrations.auto_resume import HF_MODULE, hooks, resume_by_default
from spot_trainer.integrations.lightning_dirpath import MODULES as LIGHTNING_CHECKPOINT_MODULES
from spot_trainer.integrations.lightning_nodes import MODULES as LIGHTNING_MODULES
from spot_trainer.integrations.missing_reads import MODULE as DCP_READER
from spot_trainer.integrations.post_import import when_imported

EVERY = {*LIGHTNING_CHECKPOINT_MODULES, HF_MODULE, *LIGHTNING_MODULES, DCP_READER}
ALWAYS = {*LIGHTNING_MODULES, DCP_READER}  # a round's nodes, and no hole read as zeros


@pytest.mark.parametrize(("env", "patched"), [
    ({}, set()),  # not under the agent
    # a first run: save where the agent looks, add the callback, follow the round's nodes
    ({"CHECKPOINT_DIR": "/c"}, EVERY),
    ({"CHECKPOINT_DIR": "/c", "RESUME_FROM": "/c/checkpoint-5"}, EVERY),
    ({"CHECKPOINT_DIR": "/c", "RESUME_FROM": "/c/checkpoint-5", "SPOT_AUTO_RESUME": "off"}, ALWAYS),
    ({"CHECKPOINT_DIR": "/c", "RESUME_FROM": "/c/checkpoint-5", "SPOT_AUTO_RESUME": " OFF "}, ALWAYS),
    ({"CHECKPOINT_DIR": "/c", "RESUME_FROM": "/c/checkpoint-5", "SPOT_AUTO_RESUME": "on"}, EVERY),
])
def test_frameworks_are_patched_only_under_the_agent_and_resumed_only_with_a_checkpoint(
    env: dict[str, str], patched: set[str]
) -> None:
    assert set(hooks(env)) == patched


class Trainer:
    def __init__(self, saves_into: str) -> None:
        self.saves_into = saves_into
        self.calls: list[tuple[object, object]] = []

    def fit(self, model: str, data: str | None = None, ckpt_path: str | None = None,
            weights_only: bool | None = None) -> None:
        self.calls.append((ckpt_path, weights_only))


def resuming_fit(newest: str | None = "/c/last.ckpt") -> object:
    return resume_by_default(Trainer.fit, "ckpt_path", lambda: newest, "fit()", trusted="weights_only",
                             saves_here=lambda trainer: trainer.saves_into == "/c")


def test_the_first_call_that_names_no_checkpoint_resumes_and_no_other_does() -> None:
    fit, trainer = resuming_fit(), Trainer("/c")
    fit(trainer, "model", "data")
    fit(trainer, "model")  # a second phase of training starts where the script says
    # The job's own checkpoint is loaded whole: weights_only=True would refuse a script's saved hyperparameters.
    assert trainer.calls == [("/c/last.ckpt", False), (None, None)]


def test_what_the_script_passes_is_kept() -> None:
    fit, trainer = resuming_fit(), Trainer("/c")
    fit(trainer, "model", ckpt_path="best")
    assert trainer.calls == [("best", None)]
    fit, trainer = resuming_fit(), Trainer("/c")
    fit(trainer, "model", weights_only=True)
    assert trainer.calls == [("/c/last.ckpt", True)]


def test_a_trainer_saving_elsewhere_or_nothing_to_resume_starts_where_it_says() -> None:
    fit, fold = resuming_fit(), Trainer("/c/fold3")  # a k-fold loop's own folder: another training
    fit(fold, "model")
    fit, trainer = resuming_fit(newest=None), Trainer("/c")
    fit(trainer, "model")
    assert fold.calls == trainer.calls == [(None, None)]


@pytest.fixture
def module_dir(tmp_path: Path) -> Iterator[Path]:
    sys.path.insert(0, str(tmp_path))
    finders = list(sys.meta_path)
    yield tmp_path
    sys.path.remove(str(tmp_path))
    sys.meta_path[:] = finders
    for name in [name for name in sys.modules if name.startswith("hooked_")]:
        del sys.modules[name]


def test_a_hook_runs_on_the_module_once_it_has_run_and_at_once_for_one_already_imported(module_dir: Path) -> None:
    (module_dir / "hooked_later.py").write_text("VALUE = 1\n")
    (module_dir / "hooked_before.py").write_text("VALUE = 2\n")
    import hooked_before  # type: ignore[import-not-found]

    seen: list[tuple[str, int]] = []
    when_imported({name: lambda module: seen.append((module.__name__, module.VALUE))
                   for name in ("hooked_later", "hooked_before")})
    assert seen == [("hooked_before", 2)]
    import hooked_later  # type: ignore[import-not-found]

    assert seen == [("hooked_before", 2), ("hooked_later", 1)]
    assert type(hooked_later.__loader__).__name__ == "SourceFileLoader"  # its own loader again
    assert hooked_later.__spec__.loader is hooked_later.__loader__
    assert hooked_before.VALUE == 2


def test_asking_whether_a_module_is_there_does_not_use_up_its_hook(module_dir: Path) -> None:
    (module_dir / "hooked_probed.py").write_text("VALUE = 4\n")
    seen: list[int] = []
    when_imported({"hooked_probed": lambda module: seen.append(module.VALUE)})
    assert importlib.util.find_spec("hooked_probed") is not None  # as frameworks probe optional packages
    assert seen == []
    import hooked_probed  # type: ignore[import-not-found]  # noqa: F401

    importlib.reload(hooked_probed)
    assert seen == [4]


def test_watching_twice_keeps_one_finder_and_the_first_hook(module_dir: Path) -> None:
    (module_dir / "hooked_twice.py").write_text("VALUE = 5\n")
    seen: list[str] = []
    when_imported({"hooked_twice": lambda module: seen.append("first")})
    when_imported({"hooked_twice": lambda module: seen.append("second")})  # sitecustomize run again
    import hooked_twice  # type: ignore[import-not-found]  # noqa: F401

    assert seen == ["first"]
    assert sum(type(finder).__name__ == "_PostImportFinder" for finder in sys.meta_path) == 1


def test_modules_sharing_one_loader_import_as_ever(module_dir: Path) -> None:
    # A zip importer is one loader for every module in its archive: the watched one imports a sibling.
    with zipfile.ZipFile(module_dir / "code.zip", "w") as archive:
        archive.writestr("hooked_zip/__init__.py", "")
        archive.writestr("hooked_zip/sibling.py", "VALUE = 6\n")
        archive.writestr("hooked_zip/watched.py", "from hooked_zip import sibling\nVALUE = sibling.VALUE + 1\n")
    sys.path.insert(0, str(module_dir / "code.zip"))
    try:
        seen: list[tuple[str, int]] = []
        when_imported({"hooked_zip.watched": lambda module: seen.append((module.__name__, module.VALUE))})
        import hooked_zip.watched  # type: ignore[import-not-found]

        assert seen == [("hooked_zip.watched", 7)] and hooked_zip.watched.VALUE == 7
        assert hooked_zip.watched.__loader__ is hooked_zip.sibling.__loader__  # the zip's own, shared
    finally:
        sys.path.remove(str(module_dir / "code.zip"))


def test_a_failing_hook_is_one_line_and_the_import_goes_on(
    module_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (module_dir / "hooked_broken.py").write_text("VALUE = 3\n")

    def broken(module: object) -> None:
        raise AttributeError("module has no attribute 'Trainer'")

    when_imported({"hooked_broken": broken})
    import hooked_broken  # type: ignore[import-not-found]

    assert hooked_broken.VALUE == 3
    assert capsys.readouterr().err == ("spot-trainer: could not prepare hooked_broken: module has no attribute "
                                       "'Trainer'\n")


def test_the_startup_folder_goes_first_and_the_environments_own_sitecustomize_still_runs(tmp_path: Path) -> None:
    (tmp_path / "sitecustomize.py").write_text("import sys\nsys.stderr.write('theirs ran\\n')\n")
    theirs = os.pathsep.join(filter(None, [str(tmp_path), os.environ.get("PYTHONPATH")]))
    env = with_auto_resume({**os.environ, "PYTHONPATH": theirs, "CHECKPOINT_DIR": str(tmp_path),
                            "RESUME_FROM": str(tmp_path / "checkpoint-1")})
    assert env["PYTHONPATH"].split(os.pathsep)[:2] == [str(AUTO_RESUME_PATH), str(tmp_path)]
    probe = "import sys; print(any(type(f).__name__ == '_PostImportFinder' for f in sys.meta_path))"
    ran = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=60)
    assert (ran.returncode, ran.stdout, ran.stderr) == (0, "True\n", "theirs ran\n")


def test_the_startup_folder_twice_on_the_path_installs_once(tmp_path: Path) -> None:
    (tmp_path / "again").symlink_to(AUTO_RESUME_PATH)
    env = with_auto_resume({**os.environ, "CHECKPOINT_DIR": str(tmp_path), "RESUME_FROM": str(tmp_path / "x")})
    env["PYTHONPATH"] = os.pathsep.join([str(AUTO_RESUME_PATH), str(tmp_path / "again"), env["PYTHONPATH"]])
    probe = "import sys; print(sum(type(f).__name__ == '_PostImportFinder' for f in sys.meta_path))"
    ran = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=60)
    assert (ran.returncode, ran.stdout, ran.stderr) == (0, "1\n", "")


def test_without_the_runtime_the_command_still_runs_and_says_so_in_one_line(tmp_path: Path) -> None:
    # The interpreter the venv was made from: its own packages, no runtime among them.
    bare = Path(sys.base_prefix) / "bin" / f"python{sys.version_info.major}.{sys.version_info.minor}"
    env = {"PATH": os.environ["PATH"], "PYTHONPATH": str(AUTO_RESUME_PATH), "CHECKPOINT_DIR": str(tmp_path)}
    ran = subprocess.run([str(bare), "-c", "print('trained')"], env=env, capture_output=True, text=True,
                         timeout=60, cwd=tmp_path)
    assert ran.returncode == 0 and ran.stdout == "trained\n", ran.stderr
    assert ran.stderr.startswith("spot-trainer: no automatic resume in this process: No module named"), ran.stderr
