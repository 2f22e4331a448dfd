"""Steps redone per power-off for scripts as people write them: a `torch.save` of `checkpoint_<step>.pt` every
20 steps (0.1 s a step) straight under its name, a reentrant `model_<epoch>.pth` series and a Keras
`model_<epoch>.keras` per epoch (1 s an epoch), none renaming, none printing a step.

Each run deploys the script's job to the local spot cloud (real CDK deploy to moto, real instance processes)
and powers the training instance off without notice, --power-offs times, every --spacing seconds of
training. Per power-off it measures where the killed instance was (the step the script itself last kept in a
file of its working directory, which the agent never reads) and the step its replacement resumed from; the
difference is the work redone.

    python benchmarks/plain_script_redone.py [--scripts cnn,series,keras] [--power-offs 3] [--spacing 7]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
from pathlib import Path
from typing import Any

from localcloud.cloud import LocalCloud
from localcloud.interruptions import InterruptionPlan
from localcloud.player import Player, RunOptions
from spot_trainer.help_text import first_paragraph
from tests.support.plain_jobs import WHERE, plain_job, where_it_was

RUNS = {  # script, arguments, its environment, steps (or epochs) between two saves
    "cnn": ("cnn_checkpoint_n.py", "400 20", {"STEP_SECONDS": "0.1"}, 20),
    "series": ("model_per_epoch.py", "40", {"EPOCH_SECONDS": "1.0"}, 1),
    "keras": ("keras_per_epoch.py", "40", {"EPOCH_SECONDS": "1.0"}, 1),
}


def play(cloud: LocalCloud, folder: Path, name: str, power_offs: int, spacing: float) -> dict[str, Any]:
    file, arguments, env, save_every = RUNS[name]
    deployment = cloud.deploy(cloud.synth(str(plain_job(folder, file, arguments))), {})
    try:
        options = RunOptions(plan=InterruptionPlan(hard_kills=power_offs, spacing_seconds=spacing),
                             command_env={**env, "WHERE_FILE": WHERE, "OMP_NUM_THREADS": "1"}, timeout_seconds=600)
        player = Player(cloud, deployment, options).run()
    finally:
        cloud.destroy(deployment)
    redone = []
    for record in player.interruptions:
        was = where_it_was(player.instances[record.instance].root)
        if was is not None and record.resumed_step is not None:
            redone.append(was - record.resumed_step)
    return {"save_every": save_every, "power_offs": len(player.interruptions), "redone_per_power_off": redone,
            "mean": round(statistics.mean(redone), 1) if redone else None, "max": max(redone, default=None)}


def main() -> int:
    parser = argparse.ArgumentParser(description=first_paragraph(__doc__))
    parser.add_argument("--scripts", default=",".join(RUNS), help="which of " + ", ".join(RUNS))
    parser.add_argument("--power-offs", type=int, default=3)
    parser.add_argument("--spacing", type=float, default=7.0, help="seconds of training before each power-off")
    options = parser.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    results = {}
    with tempfile.TemporaryDirectory() as directory:
        with LocalCloud(Path(directory) / "cloud", log=lambda line: None) as cloud:
            for name in options.scripts.split(","):
                results[name] = play(cloud, Path(directory) / name, name, options.power_offs, options.spacing)
    print(json.dumps({"redone_steps_per_power_off": results}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
