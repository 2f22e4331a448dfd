"""Time from user data start to a running agent, in the sandbox (moto as S3, fake IMDS, the systemctl
stand-in), for a first boot and for a rerun (a reboot with everything in place). Prints JSON.

    python benchmarks/userdata_bootstrap.py [--trials 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import boto3

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")

from localcloud.fake_imds import FakeImds  # noqa: E402
from localcloud.moto_server import MotoServer  # noqa: E402
from stacks.instance.user_data import render_user_data  # noqa: E402
from stacks.job.spec import CURRENT_USERDATA_VERSION  # noqa: E402
from tests.support.userdata_sandbox import (  # noqa: E402
    UNIT,
    UserDataSandbox,
    asset_key,
    build_trainer_wheel,
    job_header,
)

STEPS = ("instance-metadata", "python-env", "trainer-package", "job-code", "agent-config", "agent-service")


def main_pid_started_at(sandbox: UserDataSandbox) -> float:
    """When the stand-in wrote the agent's pid: the moment systemd would report the unit started."""
    return (sandbox.run_dir / f"{UNIT}.pid").stat().st_mtime


def run_trial(root: Path, moto: MotoServer, imds_url: str, script: str) -> dict[str, float]:
    sandbox = UserDataSandbox(root, moto.env(), imds_url)
    try:
        started = time.time()
        first = sandbox.run(script)
        first_done = time.time()
        if first.returncode != 0:
            raise SystemExit(f"bootstrap failed:\n{first.stderr}")
        agent_started = main_pid_started_at(sandbox)
        again_started = time.time()
        again = sandbox.run(script)
        rerun = time.time() - again_started
        if again.returncode != 0 or "nothing to do" not in again.stderr:
            raise SystemExit(f"rerun was not a no-op:\n{again.stderr}")
        return {
            "to_agent_start_s": agent_started - started,
            "script_total_s": first_done - started,
            "rerun_total_s": rerun,
        }
    finally:
        sandbox.stop_agent()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--trials", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, MotoServer() as moto, FakeImds() as imds:
        work = Path(tmp)
        wheel = build_trainer_wheel(work)
        s3 = boto3.client("s3", endpoint_url=moto.endpoint, region_name="us-east-1",
                          aws_access_key_id="testing", aws_secret_access_key="testing")
        s3.create_bucket(Bucket="bench-userdata")
        key = asset_key(wheel)
        s3.upload_file(str(wheel), "bench-userdata", key)
        script = render_user_data(CURRENT_USERDATA_VERSION, job_header(
            "bench-userdata", f"s3://bench-userdata/{key}", SPOT_JOB="bench", SPOT_GRACE_SECONDS="10",
            SPOT_COMMAND="python -c 'import time; time.sleep(600)'",
        ))
        trials = [run_trial(work / f"instance-{n}", moto, imds.url, script) for n in range(args.trials)]
    summary = {
        name: {"median": round(statistics.median(t[name] for t in trials), 3),
               "min": round(min(t[name] for t in trials), 3), "max": round(max(t[name] for t in trials), 3)}
        for name in trials[0]
    }
    print(json.dumps({
        "benchmark": "userdata_bootstrap",
        "what": f"rendered {CURRENT_USERDATA_VERSION} user data in the sandbox: S3 wheel download + pip install "
                "--no-deps, no job code; base python probe; systemctl stand-in",
        "trials": args.trials,
        "rendered_bytes": len(script.encode()),
        **summary,
    }, indent=1))


if __name__ == "__main__":
    main()
