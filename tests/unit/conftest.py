"""Unit-layer fixtures: each shipped job synthesized once per session (per test worker), shared by every
module that reads a shipped job's template."""

from __future__ import annotations

import pytest

from tests.unit.stack_support import JOBS, Synthesized, synth


@pytest.fixture(scope="session")
def synthesized(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Synthesized]:
    return {job: synth(job, tmp_path_factory.mktemp(job)) for job in JOBS}
