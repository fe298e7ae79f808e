"""Selection on a capacity profile: ranked by capacity under the SLO, farm's tie rule, and the
one-line answer when no trial meets the SLO (the default study's `smoke_capacity`: P95 TTFT
<= 450 ms, mean TPOT <= 100 ms, success >= 90 %, ladder 1, 2, 4)."""

from __future__ import annotations

import pytest

from farm.analysis.records import Results, RunRecord, profile_info
from farm.analysis.select import select, settings_for
from farm.errors import SLONotMet
from farm.report import build_report, render

PROFILE = "smoke_capacity"


def _runs(trial: str, flags: dict, loads: dict[float, float]) -> list[RunRecord]:
    """One run per load: load -> P95 TTFT (ms)."""
    return [RunRecord(id=f"{trial}/{PROFILE}/{i}", trial=trial, engine="mock", model="farm-tiny", flags=flags,
                      profile=PROFILE, repeat=i, load=load, total_requests=20,
                      metrics={"ttft_p95_ms": ttft, "tpot_mean_ms": 30.0, "success_rate": 1.0,
                               "successful_requests": 20, "total_tps": 60.0 * load, "request_throughput": 2.0 * load})
            for i, (load, ttft) in enumerate(loads.items())]


def _results(study, *records: list[RunRecord]) -> Results:
    return Results(source="test", profiles={PROFILE: profile_info(study, PROFILE)},
                   records=[r for rs in records for r in rs], primary_profile=PROFILE)


def _select(study, results):
    return select(results, settings_for(results, study, grid="smoke_capacity"))


BIG = {"ttft-ms": 200, "admission-limit": 4}
SMALL = {"ttft-ms": 200, "admission-limit": 2}


def test_the_trial_with_most_capacity_wins_when_the_runs_separate_them(study):
    big = _runs("big", BIG, {1: 210, 2: 220, 4: 230, 8: 800, 6: 700, 5: 720})
    small = _runs("small", SMALL, {1: 210, 2: 220, 4: 800, 3: 700})
    sel = _select(study, _results(study, small, big))
    ranking = sel.capacity[0]
    assert [(r.trial, r.capacity, r.high) for r in ranking.rows] == [("big", 4, 5), ("small", 2, 3)]
    assert ranking.decision == "winner" and sel.recommended.trial == "big"
    # the throughput tables see each trial at its capacity
    assert sel.recommended.total_tps == pytest.approx(240.0)
    assert sel.verdict(PROFILE).decision == "winner"


def test_overlapping_intervals_are_a_tie_and_the_simplest_trial_is_recommended(study):
    # 'tuned' reached 6 with one more flag; 'plain' ran out of budget between 4 and 8: the search
    # cannot say that 'tuned' serves more
    tuned = _runs("tuned", {**BIG, "itl-ms": 20}, {1: 210, 2: 220, 4: 230, 8: 800, 6: 240, 7: 700})
    plain = _runs("plain", BIG, {1: 210, 2: 220, 4: 230, 8: 800})
    sel = _select(study, _results(study, tuned, plain))
    ranking = sel.capacity[0]
    assert ranking.leader == "tuned" and ranking.decision == "tie"
    assert set(ranking.tied) == {"tuned", "plain"}
    assert sel.recommended.trial == "plain"
    text = render(build_report(_results(study, tuned, plain), settings_for(_results(study, tuned, plain), study,
                                                                              grid="smoke_capacity")))
    assert "Capacity under the SLO: smoke_capacity" in text and "intervals overlap" in text
    # every load tried is on the curve, with what it broke
    assert "P95 TTFT 800 ms > 450 ms" in text and text.count("tuned ") >= 6


def test_no_trial_meeting_the_slo_is_one_line_naming_the_closest_and_its_misses(study):
    far = _runs("far", BIG, {1: 2000})
    near = _runs("near", SMALL, {1: 600})
    with pytest.raises(SLONotMet) as err:
        _select(study, _results(study, far, near))
    line = err.value.reason
    assert "\n" not in line and err.value.exit_code == 3
    assert line.startswith("no trial meets the SLO of smoke_capacity at its lowest load (1 concurrent requests)")
    assert "closest: near, P95 TTFT 600 ms > 450 ms (+33%)" in line


def test_trials_that_measured_no_load_are_a_failed_sweep_not_an_slo_verdict(study):
    from farm.analysis.results import Status
    from farm.errors import UserError

    failed = [RunRecord(id=f"{t}/{PROFILE}/0", trial=t, engine="mock", model="farm-tiny", flags=BIG, profile=PROFILE,
                        status=Status.engine_failed_to_start, reason="exited", total_requests=20) for t in ("a", "b")]
    with pytest.raises(UserError) as err:
        _select(study, _results(study, failed))
    assert not isinstance(err.value, SLONotMet) and err.value.exit_code == 2  # the sweep's end turns it into exit 1
