"""The command line that runs a job's training under torchrun elastic on one node of several.

Every node runs the same line: `--nnodes=MIN:MAX` lets the world shrink to MIN nodes and grow back,
the `s3` rendezvous keeps its state in the job's own S3 prefix (no node hosts it), and
`--max-restarts=0` hands every failed round back to the agent, which fetches the newest checkpoint
from S3 before it starts torchrun again (torchrun alone would restart the workers from whatever
this node's disk holds).
"""

from __future__ import annotations

import sys

from ..instance.config import AgentConfig
from ..program.command import RUNTIME_PACKAGE

JOIN_TIMEOUT_SECONDS = 3600  # a replacement may take long to boot; the survivors wait for MIN nodes


def torchrun_argv(config: AgentConfig, local_addr: str, worker: list[str]) -> list[str]:
    """`python -P -m spot_trainer.distributed.launch <torchrun options> --no-python <worker...>`."""
    conf = (f"last_call_timeout={int(config.rdzv_last_call_seconds)},join_timeout={JOIN_TIMEOUT_SECONDS},"
            f"keep_alive_interval={int(config.rdzv_keep_alive_seconds)},keep_alive_max_attempt=3")
    return [
        sys.executable, "-P", "-m", f"{RUNTIME_PACKAGE}.distributed.launch",
        f"--nnodes={config.min_nodes}:{config.max_nodes}",
        f"--nproc-per-node={config.procs_per_node}",
        "--rdzv-backend=s3", f"--rdzv-endpoint={config.bucket}/{config.job}", f"--rdzv-id={config.job}",
        f"--rdzv-conf={conf}", f"--local-addr={local_addr}", "--max-restarts=0",
        "--no-python", *worker,
    ]

