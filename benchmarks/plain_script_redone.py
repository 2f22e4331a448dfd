"""Steps redone per power-off (and per notice) for scripts as people write them: a `torch.save` of
`checkpoint_<step>.pt` every 20 steps (0.1 s a step) straight under its name, a reentrant `model_<epoch>.pth`
series and a Keras `model_<epoch>.keras` per epoch (1 s an epoch), and three that keep one checkpoint and
rewrite it in place (nanoGPT's `ckpt.pt`, the ImageNet example's `checkpoint.pth.tar` + `model_best.pth.tar`,
Keras' `model.keras`), none renaming, none printing a step.

Each run deploys the script's job to the local spot cloud (real CDK deploy to moto, real instance processes)
and powers the training instance off without notice, --power-offs times, every --spacing seconds of
training. Per power-off it measures where the killed instance was (the step the script itself last kept in a
file of its working directory, which the agent never reads) and the step its replacement resumed from; the
difference is the work redone.

    python benchmarks/plain_script_redone.py [--scripts cnn,series,keras] [--power-offs 3] [--spacing 7]
    python benchmarks/plain_script_redone.py --scripts cnn-10s,series-5s,keras-5s --rate 90 --seed 1
    python benchmarks/plain_script_redone.py --scripts ckpt,imagenet,keras-fixed --power-offs 2 --notices 1

The first three save every 2 s or 1.2 s, as short as the 2 s a save must lie still; the `-10s` and `-5s`
runs save less often, as real jobs do, so a power-off lands anywhere in a longer save interval.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

from stacks.help_text import first_paragraph

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

from localcloud.cloud import CloudError, LocalCloud  # noqa: E402
from localcloud.instance import Instance  # noqa: E402
from localcloud.interruptions import ANNOUNCED, HARD, InterruptionPlan  # noqa: E402
from localcloud.player import Player  # noqa: E402
from localcloud.run_options import RunOptions  # noqa: E402
from spot_trainer.storage.checkpoint_versions import is_version  # noqa: E402
from tests.support.plain_jobs import WHERE, plain_job, where_it_was  # noqa: E402

RUNS = {  # script, arguments, its environment, steps (or epochs) between two saves
    "cnn": ("cnn_checkpoint_n.py", "400 20", {"STEP_SECONDS": "0.1"}, 20),  # a save every 2 s
    # One checkpoint rewritten in place: nanoGPT's ckpt.pt, the ImageNet example's pair, Keras' model.keras.
    "ckpt": ("fixed_ckpt.py", "600 30 $([ -f $CHECKPOINT_DIR/ckpt.pt ] && echo --resume)", {"STEP_SECONDS": "0.1"},
             30),  # a save every 3 s
    "imagenet": ("imagenet_style.py", "20 30 $([ -f $CHECKPOINT_DIR/checkpoint.pth.tar ] && echo --resume "
                 "$CHECKPOINT_DIR/checkpoint.pth.tar)", {"STEP_SECONDS": "0.1"}, 1),  # an epoch every 3 s
    "keras-fixed": ("keras_fixed.py", "20", {"EPOCH_SECONDS": "3"}, 1),
    "series": ("model_per_epoch.py", "40", {"EPOCH_SECONDS": "1.2"}, 1),
    "keras": ("keras_per_epoch.py", "40", {"EPOCH_SECONDS": "1.2"}, 1),
    "cnn-10s": ("cnn_checkpoint_n.py", "1200 100", {"STEP_SECONDS": "0.1"}, 100),  # a save every 10 s
    "series-5s": ("model_per_epoch.py", "24", {"EPOCH_SECONDS": "5"}, 1),
    "keras-5s": ("keras_per_epoch.py", "24", {"EPOCH_SECONDS": "5"}, 1),
}


def play(cloud: LocalCloud, folder: Path, name: str, plan: InterruptionPlan) -> dict[str, Any]:
    file, arguments, env, save_every = RUNS[name]
    deployment = cloud.deploy(cloud.synth(str(plain_job(folder, file, arguments))), {})
    try:
        options = RunOptions(plan=plan,
                             command_env={**env, "WHERE_FILE": WHERE, "OMP_NUM_THREADS": "1"}, timeout_seconds=900)
        player = Player(cloud, deployment, options).run()
    finally:
        cloud.destroy(deployment)
    redone: dict[str, list[int]] = {HARD: [], ANNOUNCED: []}
    instances = list(player.instances.values())
    for record in player.interruptions:
        lost = player.instances[record.instance]
        after = instances[instances.index(lost) + 1] if instances.index(lost) + 1 < len(instances) else None
        was, resumed = where_it_was(lost.root), resumed_at(after, record.resumed_step)
        if was is not None and resumed is not None:
            redone[record.kind].append(was - resumed)
    per_power_off, per_notice = redone[HARD], redone[ANNOUNCED]
    kinds = [record.kind for record in player.interruptions]
    return {"save_every": save_every, "power_offs": kinds.count(HARD), "notices": kinds.count(ANNOUNCED),
            "redone_per_power_off": per_power_off,
            "mean": round(statistics.mean(per_power_off), 1) if per_power_off else None,
            "max": max(per_power_off, default=None), "redone_per_notice": per_notice}


# What each script prints when it resumes (a Keras model.keras states no step: the script's epoch is its own).
RESUMED = re.compile(r"^(?:resuming from (?:iter|epoch) |=> loaded checkpoint '.*' \(epoch )(\d+)\)?$")


def resumed_at(instance: Instance | None, restored: int | None) -> int | None:
    """Where the replacement resumed, by the script's own line where it prints one, else the step restored
    (nothing restored: a fresh start, 0). None without a replacement."""
    if instance is None:
        return None
    if instance.journal.is_file():
        for line in instance.journal.read_text().splitlines():
            if match := RESUMED.match(line):
                return int(match.group(1))
    return None if is_version(restored) else restored or 0


def plan(options: argparse.Namespace) -> InterruptionPlan:
    if options.rate is not None:  # a power-off anywhere in the save interval, not where the schedule puts it
        return InterruptionPlan(rate_per_hour=options.rate, hard_kill_fraction=1.0, seed=options.seed)
    return InterruptionPlan(hard_kills=options.power_offs, count=options.notices, spacing_seconds=options.spacing)


def main() -> int:
    parser = argparse.ArgumentParser(description=first_paragraph(__doc__))
    parser.add_argument("--scripts", default=",".join(RUNS), help="which of " + ", ".join(RUNS))
    parser.add_argument("--power-offs", type=int, default=3)
    parser.add_argument("--notices", type=int, default=0, help="spot notices after the power-offs")
    parser.add_argument("--spacing", type=float, default=7.0, help="seconds of training before each power-off")
    parser.add_argument("--rate", type=float, default=None,
                        help="power-offs per hour at random moments (seeded) instead of the schedule")
    parser.add_argument("--seed", type=int, default=0)
    options = parser.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    results = {}
    with tempfile.TemporaryDirectory() as directory:
        with LocalCloud(Path(directory) / "cloud", log=lambda line: None) as cloud:
            for name in options.scripts.split(","):
                try:
                    results[name] = play(cloud, Path(directory) / name, name, plan(options))
                except CloudError as error:  # one run that does not finish says so; the others still count
                    results[name] = {"error": str(error)}
    print(json.dumps({"redone_steps_per_power_off": results}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
