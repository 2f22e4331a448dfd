"""Exact resume: the trainer, killed for real at random points and restarted, ends bit-identical.

Each trial runs `python -m spot_trainer.builtin.loop` as a subprocess, SIGKILLs it at random steps (often right
after a checkpoint starts, so some kills land mid-write), restarts it until it exits 0 and compares
every tensor of the final model with an uninterrupted run. SPOT_KILL_TRIALS sets the number of
trials per model (default 1 trial of 2 kills; the slow variant runs 8 trials of 4 kills);
SPOT_KILL_SEED replays a failing trial.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import torch

from spot_trainer.storage.files.local import checkpoint_name, committed_checkpoints, load_model_weights

STEPS = 40
EVERY = 5
MODEL_ARGS = {
    "resnet": ["--width", "4", "--batch-size", "8"],
    "lm": ["--width", "16", "--context", "16", "--batch-size", "8"],
}


def trainer_command(model: str, checkpoint_dir: Path) -> list[str]:
    return [
        sys.executable, "-m", "spot_trainer.builtin.loop", "--model", model, "--steps", str(STEPS), "--synthetic",
        "--checkpoint-every-steps", str(EVERY), "--checkpoint-dir", str(checkpoint_dir),
        "--log-every", "1", "--keep", "2", "--seed", "3", *MODEL_ARGS[model],
    ]


def trainer_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "RESUME_FROM"}
    env["OMP_NUM_THREADS"] = "1"  # the two cores are shared; the same setting for every run
    return env


@dataclass
class Run:
    """One trainer process; its JSON events are read as they come."""

    process: subprocess.Popen[str]
    events: list[dict] = field(default_factory=list)

    @classmethod
    def start(cls, model: str, checkpoint_dir: Path, stderr_path: Path) -> Run:
        with stderr_path.open("a") as stderr:
            process = subprocess.Popen(trainer_command(model, checkpoint_dir), stdout=subprocess.PIPE,
                                       stderr=stderr, text=True, env=trainer_env())
        return cls(process)

    def read_until(self, predicate) -> dict | None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            event = json.loads(line)
            self.events.append(event)
            if predicate(event):
                return event
        return None

    def finish(self, timeout: float = 120) -> int:
        self.read_until(lambda event: False)
        return self.process.wait(timeout)

    def of(self, kind: str) -> list[dict]:
        return [event for event in self.events if event["event"] == kind]


def final_weights(checkpoint_dir: Path) -> dict[str, torch.Tensor]:
    return load_model_weights(checkpoint_dir / checkpoint_name(STEPS))


def assert_bit_identical(actual: dict[str, torch.Tensor], expected: dict[str, torch.Tensor]) -> None:
    assert actual.keys() == expected.keys()
    different = [name for name in expected if not torch.equal(actual[name], expected[name])]
    assert not different, f"{len(different)} tensors differ from the uninterrupted run, e.g. {different[:3]}"


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, torch.Tensor]]:
    """Final weights of one uninterrupted run per model."""
    weights = {}
    for model in MODEL_ARGS:
        directory = tmp_path_factory.mktemp(f"reference-{model}")
        run = Run.start(model, directory, directory.parent / f"reference-{model}.stderr")
        assert run.finish() == 0, (directory.parent / f"reference-{model}.stderr").read_text()
        assert run.of("done") == [{"event": "done", "step": STEPS}]
        weights[model] = final_weights(directory)
    return weights


def kill_and_resume_trial(model: str, directory: Path, rng: random.Random, kills: int, label: str) -> int:
    """Kill the trainer `kills` times at random points, then let it finish. Returns restarts."""
    stderr_path = directory.parent / f"{directory.name}.stderr"
    expected_resume: int | None = None
    for attempt in range(kills + 1):
        run = Run.start(model, directory, stderr_path)
        resumed = run.read_until(lambda event: event["event"] in ("resumed", "step"))
        if expected_resume is None:
            assert resumed is not None and resumed["event"] == "step", f"{label}: fresh start expected"
        else:
            expected = {"event": "resumed", "step": expected_resume,
                        "from": str(directory / checkpoint_name(expected_resume))}
            assert resumed == expected, label
        start = expected_resume or 0
        if attempt == kills or start >= STEPS - 1:
            assert run.finish() == 0, f"{label}: {stderr_path.read_text()}"
            return attempt
        target = rng.choice([s for s in range(start + 1, STEPS) if s % EVERY == 0] + [rng.randrange(start + 1, STEPS)])
        run.read_until(lambda event, target=target: event["event"] == "step" and event["step"] >= target)
        time.sleep(rng.uniform(0, 0.02))  # lands in the snapshot, the write or the next step
        run.process.send_signal(signal.SIGKILL)
        run.process.wait(30)
        if run.process.stdout:
            run.process.stdout.close()
        committed = committed_checkpoints(directory)
        expected_resume = committed[-1][0] if committed else None  # None: the next run starts fresh
    raise AssertionError("unreachable")


def run_trials(model: str, trials: int, kills: int, tmp_path: Path, reference: dict) -> None:
    base_seed = int(os.environ.get("SPOT_KILL_SEED", random.randrange(2**31)))
    for trial in range(trials):
        seed = base_seed + trial
        directory = tmp_path / f"{model}-trial-{trial}"
        kill_and_resume_trial(model, directory, random.Random(seed), kills, f"{model} SPOT_KILL_SEED={seed}")
        assert_bit_identical(final_weights(directory), reference[model])


@pytest.mark.parametrize("model", list(MODEL_ARGS))
def test_sigkill_at_random_points_resumes_bit_identical(model: str, tmp_path: Path, reference: dict) -> None:
    run_trials(model, int(os.environ.get("SPOT_KILL_TRIALS", "1")), 2, tmp_path, reference)


@pytest.mark.slow
@pytest.mark.timeout(1800)
@pytest.mark.parametrize("model", list(MODEL_ARGS))
def test_many_sigkill_trials_resume_bit_identical(model: str, tmp_path: Path, reference: dict) -> None:
    run_trials(model, int(os.environ.get("SPOT_KILL_TRIALS", "8")), 4, tmp_path, reference)


def test_sigterm_saves_at_the_step_boundary_exits_75_and_loses_no_step(tmp_path: Path, reference: dict) -> None:
    directory = tmp_path / "checkpoints"
    stderr_path = tmp_path / "trainer.stderr"
    run = Run.start("lm", directory, stderr_path)
    reached = run.read_until(lambda event: event["event"] == "step" and event["step"] >= 12)
    assert reached is not None

    run.process.send_signal(signal.SIGTERM)
    assert run.finish() == 75, stderr_path.read_text()

    emergency = run.of("emergency_checkpoint")
    last_step = max(event["step"] for event in run.of("step"))
    assert len(emergency) == 1 and emergency[0]["step"] == last_step >= 12
    assert emergency[0]["path"] == str(directory / checkpoint_name(last_step))
    assert committed_checkpoints(directory)[-1][0] == last_step
    assert "SIGTERM received" in stderr_path.read_text()

    resumed = Run.start("lm", directory, stderr_path)
    assert resumed.read_until(lambda event: event["event"] == "resumed")["step"] == last_step
    assert resumed.finish() == 0
    assert_bit_identical(final_weights(directory), reference["lm"])


def test_resume_from_env_takes_precedence_over_older_local_checkpoints(tmp_path: Path) -> None:
    """The agent's restore point (here in another directory, as a checkpoint fetched elsewhere) wins over
    what the trainer's own directory holds below it."""
    directory, restored = tmp_path / "checkpoints", tmp_path / "restored"
    train_until("resnet", restored, 2 * EVERY)
    train_until("resnet", directory, EVERY)

    chosen = restored / checkpoint_name(2 * EVERY)
    done = train_until("resnet", directory, 2 * EVERY + 1, env={"RESUME_FROM": str(chosen)})

    events = [json.loads(line) for line in done.stdout.splitlines()]
    assert events[0] == {"event": "resumed", "step": 2 * EVERY, "from": str(chosen)}
    assert events[-1] == {"event": "done", "step": 2 * EVERY + 1}


def test_a_newer_checkpoint_saved_here_since_resume_from_was_chosen_is_resumed_from(tmp_path: Path) -> None:
    """torchrun re-forms a world by restarting its workers with the environment it started with: the
    RESUME_FROM the agent gave it then is older than the step the world has just stopped at and saved."""
    directory = tmp_path / "checkpoints"
    train_until("resnet", directory, EVERY)
    train_until("resnet", directory, 2 * EVERY)  # the world's stop: a newer save in the same directory

    older = directory / checkpoint_name(EVERY)
    done = train_until("resnet", directory, 2 * EVERY + 1, env={"RESUME_FROM": str(older)})

    events = [json.loads(line) for line in done.stdout.splitlines()]
    assert events[0] == {"event": "resumed", "step": 2 * EVERY, "from": str(directory / checkpoint_name(2 * EVERY))}
    assert events[-1] == {"event": "done", "step": 2 * EVERY + 1}


def train_until(model: str, directory: Path, steps: int, *extra: str,
                env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Train (or resume) `model` in `directory` up to `steps`; it must end well."""
    command = trainer_command(model, directory)
    command[command.index("--steps") + 1] = str(steps)
    done = subprocess.run([*command, *extra], env=trainer_env() | (env or {}), capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    return done


def train_lm_until(directory: Path, steps: int, *extra: str,
                   env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return train_until("lm", directory, steps, *extra, env=env)


def test_a_run_resumed_with_another_determinism_setting_says_it_is_no_longer_bit_identical(tmp_path: Path) -> None:
    train_lm_until(tmp_path, EVERY)
    off = train_lm_until(tmp_path, 2 * EVERY, "--deterministic", "off")

    events = [json.loads(line) for line in off.stdout.splitlines()]
    assert next(e for e in events if e["event"] == "resumed")["step"] == EVERY  # nothing lost
    assert (f"was trained with --deterministic strict, this run uses off: from step {EVERY} on the weights are "
            "not bit-identical") in off.stderr
    assert {"event": "not_bit_identical", "step": EVERY,  # the agent records it for `status`
            "reason": "trained with --deterministic strict, this run uses off"} in events


@pytest.mark.skipif(torch.backends.cpu.get_cpu_capability() == "DEFAULT",
                    reason="this CPU already runs torch's plain kernels: there is no other instruction set to move to")
def test_a_run_resumed_on_another_platform_says_what_changed_and_loses_nothing(tmp_path: Path) -> None:
    """A mixed fleet resumes on another CPU instruction set (or GPU model): torch's ATEN_CPU_CAPABILITY
    makes this process pick other vectorised kernels, as another instance type would."""
    train_lm_until(tmp_path, EVERY)
    assert "another platform" not in train_lm_until(tmp_path, 2 * EVERY).stderr

    other = train_lm_until(tmp_path, 3 * EVERY, env={"ATEN_CPU_CAPABILITY": "default"})

    events = [json.loads(line) for line in other.stdout.splitlines()]
    assert next(e for e in events if e["event"] == "resumed")["step"] == 2 * EVERY  # nothing lost
    assert [e["step"] for e in events if e["event"] == "not_bit_identical"] == [2 * EVERY]
    warning = next(line for line in other.stderr.splitlines() if "another platform" in line)
    native = torch.backends.cpu.get_cpu_capability()
    assert checkpoint_name(2 * EVERY) in warning and f"device CPU ({native}) -> CPU (DEFAULT)" in warning, warning
    assert f"from step {2 * EVERY} on the weights are not bit-identical" in warning
