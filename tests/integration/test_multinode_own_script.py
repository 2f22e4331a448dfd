"""A plain DDP script that prints nothing (tests/fixtures/plain_scripts/ddp_silent.py) on three nodes
with `min_nodes = 2` and a restart budget of one, through the three ways a spot node goes: a power-off
of the node that publishes, a power-off of one that does not, and a notice. Each time a replacement
joins. The job ends DONE at its last step: no lost node was taken for a failure of the script."""

from __future__ import annotations

import sys
from pathlib import Path

from tests.integration.lost_nodes import (
    TIMEOUT,
    every_node_finishes,
    held,
    lose_each_kind_of_node,
    no_lost_node_was_a_failure,
)
from tests.integration.test_multinode import cluster, job_store

pytestmark = TIMEOUT

STEPS = 90
SILENT_DDP = Path(__file__).resolve().parents[1] / "fixtures" / "plain_scripts" / "ddp_silent.py"


def test_a_silent_ddp_script_survives_every_kind_of_lost_node(
    aws_env: dict[str, str], bucket: str, tmp_path: Path
) -> None:
    job = f"own-ddp-{bucket[-8:]}"
    store = job_store(aws_env, bucket, job)
    # Held until each loss is in, as S3 reaches steps 20, 40 and 60 (each ckpt_<N>.pt counts once the
    # next is saved): the job is still training at the third.
    command = held(f"{sys.executable} {SILENT_DDP} --steps {STEPS} --save-every 10 --step-seconds 0.05",
                   tmp_path / "gates", 30, 50, 70)
    with cluster(aws_env, bucket, job, tmp_path, command=command, restart_budget="1") as group:
        lose_each_kind_of_node(group, store, first=20, gap=20, gates=tmp_path / "gates")
        every_node_finishes(group, store)
    assert store.get_json("status.json")["state"] == "DONE"
    assert store.latest_step() == STEPS
    no_lost_node_was_a_failure(group)
