"""The move rule: when the job leaves its region, where it goes, and when it hands over to on-demand."""

from __future__ import annotations

import pytest

from spot_trainer.capacity.regions.launch_failures import LaunchFailure
from spot_trainer.capacity.regions.moves import Action, JobPlace, Move, MoveRules, decide
from spot_trainer.capacity.regions.observations import LaunchFailures, RegionObservation, failures_since_success

REGIONS = ("us-east-1", "us-west-2", "eu-west-1")
RULES = MoveRules(region_wait=900, capacity_failures=3, min_score=6, max_moves_per_day=4, backoff_seconds=600)
NO_CAPACITY = "Could not launch Spot Instances. UnfulfillableCapacity - There is no capacity available."
QUOTA = "Could not launch Spot Instances. MaxSpotInstanceCountExceeded - Max spot instance count exceeded."
NOW = 10_000.0


def failed(*messages: str) -> LaunchFailures:
    return failures_since_success([{"StatusCode": "Failed", "StatusMessage": m} for m in messages])


def seen(active_idle_for: float = 1000, active_failures: LaunchFailures | None = None,
         scores: tuple[int | None, ...] = (2, 9, 7), prices: tuple[float, ...] = (0.9, 1.0, 1.1),
         running: int = 0) -> dict[str, RegionObservation]:
    regions = {name: RegionObservation(name, score=score, spot_price=price)
               for name, score, price in zip(REGIONS, scores, prices, strict=True)}
    regions["us-east-1"] = RegionObservation("us-east-1", running=running,
                                             idle_since=None if running else NOW - active_idle_for,
                                             failures=active_failures or LaunchFailures(),
                                             score=scores[0], spot_price=prices[0])
    return regions


def at_home(**kwargs: object) -> JobPlace:
    return JobPlace(regions=REGIONS, active="us-east-1", **kwargs)  # type: ignore[arg-type]


def test_a_region_with_an_instance_running_is_kept() -> None:
    decision = decide(at_home(), seen(running=2), RULES, NOW)
    assert (decision.action, decision.region) == (Action.STAY, "us-east-1")
    assert "2 instance(s) running" in decision.reason


def test_the_job_waits_in_its_region_until_region_wait_passes() -> None:
    decision = decide(at_home(), seen(active_idle_for=600), RULES, NOW)
    assert decision.action is Action.STAY
    assert decision.reason == ("waiting for spot capacity in us-east-1: 10m of region_wait 15m, "
                               "0 of 3 capacity failures")


def test_region_wait_without_an_instance_moves_the_job_to_the_best_scored_region() -> None:
    decision = decide(at_home(), seen(active_idle_for=900), RULES, NOW)
    assert (decision.action, decision.region) == (Action.MOVE, "us-west-2")
    assert decision.reason.startswith("no instance has run in us-east-1 for 15m (region_wait 15m)")
    assert "placement score 9" in decision.reason


def test_k_launches_failed_for_capacity_move_before_region_wait() -> None:
    two, three = failed(NO_CAPACITY, NO_CAPACITY), failed(NO_CAPACITY, NO_CAPACITY, NO_CAPACITY)
    assert decide(at_home(), seen(active_idle_for=60, active_failures=two), RULES, NOW).action is Action.STAY
    decision = decide(at_home(), seen(active_idle_for=60, active_failures=three), RULES, NOW)
    assert decision.action is Action.MOVE
    assert decision.reason.startswith("3 launches in us-east-1 failed for capacity (UnfulfillableCapacity)")


def test_quota_failures_never_hasten_a_move_and_say_waiting_does_not_help() -> None:
    decision = decide(at_home(), seen(active_idle_for=60, active_failures=failed(QUOTA, QUOTA, QUOTA, QUOTA)),
                      RULES, NOW)
    assert decision.action is Action.STAY
    assert "quota (MaxSpotInstanceCountExceeded), not for capacity: waiting does not help" in decision.reason


def test_a_configuration_failure_is_named_as_such() -> None:
    decision = decide(at_home(), seen(active_idle_for=60, active_failures=failed("Invalid IAM Instance Profile name")),
                      RULES, NOW)
    assert decision.action is Action.STAY
    assert "fail on the job's configuration, not for capacity: Invalid IAM Instance Profile name" in decision.reason


def test_a_region_scoring_below_the_threshold_is_no_target() -> None:
    decision = decide(at_home(), seen(scores=(2, 3, 7)), RULES, NOW)
    assert decision.region == "eu-west-1"


def test_a_score_tie_goes_to_the_region_holding_the_newest_checkpoint() -> None:
    place = at_home(checkpoint_region="eu-west-1")
    decision = decide(place, seen(scores=(2, 8, 8), prices=(0.9, 0.5, 1.5)), RULES, NOW)
    assert decision.region == "eu-west-1"
    assert "holds the newest checkpoint" in decision.reason


def test_a_score_tie_without_the_checkpoint_goes_to_the_lower_spot_price() -> None:
    decision = decide(at_home(), seen(scores=(2, 8, 8), prices=(0.9, 1.5, 0.5)), RULES, NOW)
    assert decision.region == "eu-west-1"
    assert "lowest spot price among the tied, $0.500/h" in decision.reason


def test_a_score_tie_with_a_price_unknown_goes_to_the_job_file_s_order_and_says_why() -> None:
    unknown = seen(scores=(2, 8, 8), prices=(0.9, 1.5, 0.5))
    unknown["us-west-2"] = RegionObservation("us-west-2", score=8, spot_price=None)
    decision = decide(at_home(), unknown, RULES, NOW)
    assert decision.region == "us-west-2"
    assert "spot price unknown in us-west-2, so the job file's order decides" in decision.reason


def test_a_price_breaks_no_tie_that_the_score_or_the_checkpoint_already_decides() -> None:
    assert decide(at_home(), seen(scores=(2, 9, 8), prices=(0.9, 1.5, 0.5)), RULES, NOW).region == "us-west-2"
    decision = decide(at_home(checkpoint_region="us-west-2"), seen(scores=(2, 8, 8), prices=(0.9, 1.5, 0.5)), RULES,
                      NOW)
    assert decision.region == "us-west-2" and "spot price" not in decision.reason


def test_the_checkpoint_does_not_outweigh_a_better_score() -> None:
    decision = decide(at_home(checkpoint_region="eu-west-1"), seen(scores=(2, 9, 8)), RULES, NOW)
    assert decision.region == "us-west-2"


def test_without_scores_the_untried_regions_go_by_checkpoint_then_price() -> None:
    unscored = seen(scores=(None, None, None), prices=(0.9, 1.2, 0.8))
    assert decide(at_home(), unscored, RULES, NOW).region == "eu-west-1"
    decision = decide(at_home(checkpoint_region="us-west-2"), unscored, RULES, NOW)
    assert decision.region == "us-west-2"
    assert "not tried in this sweep" in decision.reason


def test_no_region_scoring_high_enough_hands_over_to_the_on_demand_rules() -> None:
    decision = decide(at_home(), seen(scores=(2, 3, 1)), RULES, NOW)
    assert (decision.action, decision.region) == (Action.ON_DEMAND, "us-east-1")
    assert "no other region scores 6 or more (us-east-1 2, us-west-2 3, eu-west-1 1)" in decision.reason


def test_without_scores_one_sweep_of_every_region_hands_over_to_the_on_demand_rules() -> None:
    moves = (Move(NOW - 800, "us-east-1", "eu-west-1", "r"), Move(NOW - 100, "eu-west-1", "us-west-2", "r"))
    place = JobPlace(regions=REGIONS, active="us-west-2", moves=moves, last_running_at=NOW - 3000)
    regions = {name: RegionObservation(name, idle_since=NOW - 1000) for name in REGIONS}
    decision = decide(place, regions, RULES, NOW + 1200)  # past the backoff, within an hour of both moves
    assert decision.action is Action.ON_DEMAND and decision.region == "us-west-2"
    assert "one sweep of all 3 regions found no spot capacity" in decision.reason


def test_without_scores_a_region_left_an_hour_ago_is_tried_again() -> None:
    moves = (Move(NOW - 2500, "us-east-1", "eu-west-1", "r"), Move(NOW - 100, "eu-west-1", "us-west-2", "r"))
    place = JobPlace(regions=REGIONS, active="us-west-2", moves=moves, last_running_at=NOW - 3000)
    regions = {name: RegionObservation(name, idle_since=NOW - 1000) for name in REGIONS}
    decision = decide(place, regions, RULES, NOW + 1200)
    assert (decision.action, decision.region) == (Action.MOVE, "us-east-1")


def test_with_scores_a_region_left_earlier_goes_by_its_newest_score() -> None:
    moves = (Move(NOW - 300, "us-west-2", "us-east-1", "r"),)
    decision = decide(at_home(moves=moves, last_running_at=NOW - 3000), seen(scores=(2, 9, 3)), RULES, NOW + 900)
    assert (decision.action, decision.region) == (Action.MOVE, "us-west-2")


def test_moves_without_an_instance_between_back_off_doubling_the_gap() -> None:
    moves = (Move(NOW - 2000, "eu-west-1", "us-west-2", "r"), Move(NOW - 1000, "us-west-2", "us-east-1", "r"))
    place = at_home(moves=moves, last_running_at=NOW - 3000)
    decision = decide(place, seen(), RULES, NOW)
    assert decision.action is Action.STAY  # two moves in this sweep: 1200 s apart at least, 1000 s have passed
    assert "moves back off: the next one 3m20s from now at the earliest" in decision.reason
    assert decide(place, seen(active_idle_for=1200), RULES, NOW + 200).action is Action.MOVE


def test_an_instance_that_ran_ends_the_backoff() -> None:
    moves = (Move(NOW - 2000, "eu-west-1", "us-west-2", "r"), Move(NOW - 1000, "us-west-2", "us-east-1", "r"))
    assert decide(at_home(moves=moves, last_running_at=NOW - 950), seen(), RULES, NOW).action is Action.MOVE


def test_moves_are_bounded_per_24_hours_then_the_on_demand_rules_apply() -> None:
    moves = tuple(Move(NOW - 86000 + i * 1000, "us-west-2", "us-east-1", "r") for i in range(4))
    decision = decide(at_home(moves=moves, last_running_at=NOW - 100), seen(), RULES, NOW)
    assert decision.action is Action.ON_DEMAND
    assert "4 moves in 24 hours, the most allowed: on-demand rules apply" in decision.reason
    assert decide(at_home(moves=moves, last_running_at=NOW - 100), seen(), RULES, NOW + 500).action is Action.MOVE


def test_a_region_failing_on_its_quota_is_no_target() -> None:
    regions = seen(scores=(2, 9, 7))
    regions["us-west-2"] = RegionObservation("us-west-2", failures=failed(QUOTA), score=9)
    assert decide(at_home(), regions, RULES, NOW).region == "eu-west-1"


@pytest.mark.parametrize("message, kind", [
    (NO_CAPACITY, LaunchFailure.CAPACITY),
    ("Could not launch On-Demand Instances. InsufficientInstanceCapacity - We currently do not have sufficient "
     "g5.xlarge capacity in the Availability Zone you requested.", LaunchFailure.CAPACITY),
    (QUOTA, LaunchFailure.QUOTA),
    ("Could not launch Spot Instances. VcpuLimitExceeded - You have requested more vCPU capacity than your current "
     "vCPU limit of 0 allows.", LaunchFailure.QUOTA),
    ("The security group 'sg-1' does not exist. Launching EC2 instance failed.", LaunchFailure.CONFIGURATION),
])
def test_failed_launches_are_read_as_capacity_quota_or_configuration(message: str, kind: LaunchFailure) -> None:
    assert failed(message).newest is kind


def test_only_the_failures_since_the_last_successful_launch_count() -> None:
    activities = [{"StatusCode": "Failed", "StatusMessage": NO_CAPACITY},
                  {"StatusCode": "InProgress", "StatusMessage": ""},
                  {"StatusCode": "Failed", "StatusMessage": QUOTA},
                  {"StatusCode": "Successful", "StatusMessage": ""},
                  {"StatusCode": "Failed", "StatusMessage": NO_CAPACITY}]
    failures = failures_since_success(activities)
    assert failures.kinds == (LaunchFailure.CAPACITY, LaunchFailure.QUOTA)
    assert failures.last_code == "UnfulfillableCapacity"


@pytest.mark.parametrize("rules, problem", [
    ({"region_wait": 0}, "region_wait must be longer than zero, not 0 s"),
    ({"region_wait": 60, "capacity_failures": 0}, "must be at least 1, not 0 and 24"),
    ({"region_wait": 60, "min_score": 11}, "min_score 11 is outside it"),
])
def test_rules_that_cannot_work_are_named(rules: dict[str, float], problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        MoveRules(**rules)  # type: ignore[arg-type]
