"""The lines a synth ends with say how the nodes train, where torch comes from, what the cap buys at the
highest price the job can pay, and whether the grace period fits a spot notice. The CDK CLI's synth
printing them is proven by the walkthrough's test (tests/e2e/test_walkthrough.py)."""

from __future__ import annotations

import tomllib

from stacks.job.spec import JOBS_DIR
from stacks.job_file import parse_job
from stacks.synth.summary import summary_lines

EXAMPLE = tomllib.loads((JOBS_DIR / "example.toml").read_text())
PYTORCH_IMAGE = "/aws/service/deeplearning/ami/x86_64/oss-nvidia-driver-gpu-pytorch-2.9-ubuntu-24.04/latest/ami-id"


def job(**capacity: object) -> dict[str, object]:
    schedule = {"budget_usd": 40}
    return {**EXAMPLE, "capacity": {**EXAMPLE["capacity"], "instance_types": ["g5.xlarge", "g6.xlarge"],
                                    "ami": PYTORCH_IMAGE, "root_device": "/dev/sda1", **capacity},
            "schedule": schedule}


def test_two_standing_by_nodes_and_what_forty_dollars_buy() -> None:
    lines = summary_lines(parse_job(job(nodes=2), JOBS_DIR / "example.toml"))
    assert lines[0] == ("SpotTrainer-example: 2 nodes (g5.xlarge or g6.xlarge): one trains and 1 stand by to take "
                        "over; to train on all 2, set capacity.distributed = true")
    assert lines[1].endswith("the image's PyTorch env (/opt/pytorch), torch as the image ships it; pin your own "
                             'with run.setup = "pip install torch==…"')
    # g5.xlarge's on-demand $1.006/h is the dearest listed: $40 / (2 x 1.006) = 19.9 h
    assert lines[2] == ("cap $40 buys at least 19.9 h of 2 x g5.xlarge, g6.xlarge at the on-demand cap of g5.xlarge, "
                        "$1.006/h")
    assert lines[3] == "a spot notice leaves the command its full run.grace_seconds = 60 s to save"


def test_distributed_nodes_a_max_price_and_a_long_grace() -> None:
    data = job(nodes=3, distributed=True, min_nodes=2, max_price=0.5)
    data["run"] = {**EXAMPLE["run"], "grace_seconds": 300}
    lines = summary_lines(parse_job(data, JOBS_DIR / "example.toml"))
    assert lines[0].endswith("3 nodes (g5.xlarge or g6.xlarge) train one model together under torchrun elastic, "
                             "going on while 2 are up")
    assert lines[2] == "cap $40 buys at least 26.7 h of 3 x g5.xlarge, g6.xlarge at your max price $0.5/h"
    assert "run.grace_seconds = 300 cannot fit in a spot notice" in lines[3]
