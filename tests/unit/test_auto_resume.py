"""What the agent changes in the Python processes of a command of the user's own: the framework
patches it installs (and when), the post-import hook that installs them, the first-call resume,
and the sitecustomize that brings them in without hiding the environment's own."""

from __future__ import annotations

import importlib
import importlib.util
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from spot_trainer.agent.command import AUTO_RESUME_PATH, with_auto_resume
from spot_trainer.integrations.auto_resume import HF_MODULE, LIGHTNING_MODULES, hooks, resume_by_default
from spot_trainer.integrations.lightning_dirpath import MODULES as LIGHTNING_CHECKPOINT_MODULES
from spot_trainer.integrations.post_import import when_imported


@pytest.mark.parametrize(("env", "patched"), [
    ({}, set()),  # not under the agent
    ({"CHECKPOINT_DIR": "/c"}, set(LIGHTNING_CHECKPOINT_MODULES)),  # a first run: save where the agent looks
    ({"CHECKPOINT_DIR": "/c", "RESUME_FROM": "/c/checkpoint-5"},
     {*LIGHTNING_CHECKPOINT_MODULES, HF_MODULE, *LIGHTNING_MODULES}),
    ({"CHECKPOINT_DIR": "/c", "RESUME_FROM": "/c/checkpoint-5", "SPOT_AUTO_RESUME": "off"}, set()),
    ({"CHECKPOINT_DIR": "/c", "RESUME_FROM": "/c/checkpoint-5", "SPOT_AUTO_RESUME": " OFF "}, set()),
    ({"CHECKPOINT_DIR": "/c", "RESUME_FROM": "/c/checkpoint-5", "SPOT_AUTO_RESUME": "on"},
     {*LIGHTNING_CHECKPOINT_MODULES, HF_MODULE, *LIGHTNING_MODULES}),
])
def test_frameworks_are_patched_only_under_the_agent_and_resumed_only_with_a_checkpoint(
    env: dict[str, str], patched: set[str]
) -> None:
    assert set(hooks(env)) == patched


def test_the_first_call_that_names_no_checkpoint_resumes_and_no_other_does() -> None:
    calls: list[object] = []

    def fit(model: str, data: str | None = None, ckpt_path: str | None = None) -> None:
        calls.append(ckpt_path)

    resuming = resume_by_default(fit, "ckpt_path", lambda: "/c/last.ckpt", "fit()")
    resuming("model", "data")
    resuming("model")  # a second phase of training starts where the script says
    assert calls == ["/c/last.ckpt", None]

    explicit = resume_by_default(fit, "ckpt_path", lambda: "/c/last.ckpt", "fit()")
    explicit("model", ckpt_path="best")
    assert calls[-1] == "best"

    nothing = resume_by_default(fit, "ckpt_path", lambda: None, "fit()")
    nothing("model")
    assert calls[-1] is None


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
    assert "exec_module" not in vars(hooked_later.__spec__.loader)  # the loader reads as it was
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


def test_without_the_runtime_the_command_still_runs_and_says_so_in_one_line(tmp_path: Path) -> None:
    # The interpreter the venv was made from: its own packages, no runtime among them.
    bare = Path(sys.base_prefix) / "bin" / f"python{sys.version_info.major}.{sys.version_info.minor}"
    env = {"PATH": os.environ["PATH"], "PYTHONPATH": str(AUTO_RESUME_PATH), "CHECKPOINT_DIR": str(tmp_path)}
    ran = subprocess.run([str(bare), "-c", "print('trained')"], env=env, capture_output=True, text=True,
                         timeout=60, cwd=tmp_path)
    assert ran.returncode == 0 and ran.stdout == "trained\n", ran.stderr
    assert ran.stderr.startswith("spot-trainer: no automatic resume in this process: No module named"), ran.stderr
