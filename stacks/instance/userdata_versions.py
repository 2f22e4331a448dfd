"""What each user data version supports, in one table: synth's refusals, the console's parameters and
the renderer read it here.

A version is a contract with the stacks deployed with it: an entry never changes once released (v1 is
frozen byte for byte); what a new version changes goes into a new entry. A version on disk that the
table does not list is rendered as its one file, as is (tests add such versions).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class UserDataVersion:
    runtime_import: str  # the runtime's import name: `trainer` (spot-trainer 0.1) or `spot_trainer`
    heredoc_header: bool  # deploy-time values in quoted here-documents: run.setup must be one line
    compressed_body: bool  # the script travels gzip + base64 after the header (the CLI's 50 KiB template)
    checkpoint_dir: bool  # run.checkpoint_dir: a folder of the job's own
    multi_node: bool  # capacity.distributed
    budget: bool  # schedule.budget_usd
    restart_on_stall: bool  # notify.restart_on_stall, on single-node jobs
    # The header's names in their order where they are frozen (None: every setting the job sets); the
    # runtime of such a version reads none of the later settings, so synth refuses them.
    frozen_header: tuple[str, ...] | None = None
    # Shared parts of userdata/lib/, rendered in this order before the version's own bootstrap.sh.
    parts: tuple[str, ...] = ()


# The name this checkout's runtime wheel installs as (pyproject.toml's package-dir).
SHIPPED_RUNTIME_IMPORT = "spot_trainer"
V1_HEADER = ("SPOT_USERDATA_VERSION", "SPOT_JOB", "SPOT_STACK", "SPOT_BUCKET", "SPOT_REGION", "SPOT_ASG_NAME",
             "SPOT_LIFECYCLE_HOOK", "SPOT_LOG_GROUP", "SPOT_COMMAND", "SPOT_TRAIN_ARGS", "SPOT_WORKDIR",
             "SPOT_SETUP_COMMAND", "SPOT_CODE_URI", "SPOT_TRAINER_PACKAGE", "SPOT_STOP_SIGNAL", "SPOT_GRACE_SECONDS",
             "SPOT_RESTART_BUDGET", "SPOT_REACT_TO_REBALANCE", "SPOT_KEEP_CHECKPOINTS")
_V2_PARTS = ("settings", "log", "steps", "failure_record", "retry", "aws", "header", "python_env", "env_cache",
             "runtime_package", "job_code", "agent_config", "agent_service")

USERDATA_VERSIONS = {
    "v1": UserDataVersion(runtime_import="trainer", heredoc_header=True, compressed_body=False,
                          checkpoint_dir=False, multi_node=False, budget=False, restart_on_stall=False,
                          frozen_header=V1_HEADER),
    "v2": UserDataVersion(runtime_import="spot_trainer", heredoc_header=False, compressed_body=True,
                          checkpoint_dir=True, multi_node=True, budget=True, restart_on_stall=True,
                          parts=_V2_PARTS),
}
_UNLISTED = UserDataVersion(runtime_import="spot_trainer", heredoc_header=False, compressed_body=False,
                            checkpoint_dir=True, multi_node=True, budget=True, restart_on_stall=True)


def userdata_version(name: str) -> UserDataVersion:
    """The table's entry for `name`; a version it does not list is one plain script supporting everything."""
    return USERDATA_VERSIONS.get(name, _UNLISTED)
