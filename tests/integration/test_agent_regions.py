"""A job of several regions, agent by agent: a start in a region whose bucket holds nothing newer restores the
job's newest step from the region it was saved in, once, across regions; its saves go to its own region's
bucket; the job's one lease is in home's bucket."""

from __future__ import annotations

from pathlib import Path

from localcloud.fake_imds import FakeImds
from tests.integration.agent_runner import STEPPER, AgentProcess, agent_env
from tests.integration.region_buckets import AWAY, HOME, region_buckets


def run_until_notice(agent: AgentProcess, imds: FakeImds, past_step: int) -> int:
    """Train beyond `past_step`, then a spot notice; the step the command saved at it ("saved N")."""
    try:
        agent.wait_for(lambda: any(e["step"] > past_step for e in agent.events("step")), what=f"step {past_step}")
        imds.announce_interruption(in_seconds=120)
        assert agent.wait() == 0, agent.text()
    finally:
        agent.stop()
    (saved,) = [int(line.split()[-1]) for line in agent.lines if line.startswith("saved ")]
    return saved


def test_a_start_in_another_region_resumes_from_the_newest_step_and_saves_where_it_runs(
    aws_env: dict[str, str], tmp_path: Path
) -> None:
    job = "moving"
    made = region_buckets(aws_env, job, "moving")
    buckets, stores, job_buckets = made.buckets, made.stores, made.job_buckets

    def agent(region: str, instance: str, imds: FakeImds) -> AgentProcess:
        return AgentProcess(agent_env(aws_env, bucket=buckets[region], job=job, region=region,
                                      checkpoint_dir=tmp_path / instance, imds_url=imds.url, instance_id=instance,
                                      command=STEPPER, job_buckets=job_buckets)).start()

    with FakeImds(instance_id="i-home") as imds:
        saved_home = run_until_notice(agent(HOME, "i-home", imds), imds, past_step=25)
    assert stores[HOME].latest_step() == saved_home and stores[AWAY].latest_step() is None

    with FakeImds(instance_id="i-away") as imds:
        away = agent(AWAY, "i-away", imds)
        saved_away = run_until_notice(away, imds, past_step=saved_home + 15)
    crossed = [line for line in away.lines if "across regions" in line]
    assert len(crossed) == 1 and f"from {HOME} (s3://{buckets[HOME]})" in crossed[0], away.text()
    assert min(e["step"] for e in away.events("step")) == saved_home + 1  # no step trained twice, none lost
    assert stores[AWAY].latest_step() == saved_away and stores[HOME].latest_step() == saved_home
    (restore,) = [e for e in stores[AWAY].events() if e["kind"] == "region_restore"]
    assert (restore["region"], restore["step"]) == (HOME, saved_home) and restore["bytes"] > 0
    # one lease for the job, in home's bucket, whichever region trained
    assert stores[HOME].get_json("lease.json") and stores[AWAY].get_json("lease.json") is None

    with FakeImds(instance_id="i-away-2") as imds:  # a replacement in the same region: its own bucket is newest
        again = agent(AWAY, "i-away-2", imds)
        run_until_notice(again, imds, past_step=saved_away + 5)
    assert not any("across regions" in line for line in again.lines), again.text()
    assert min(e["step"] for e in again.events("step")) == saved_away + 1
