"""A sweep's makespan against its ideal (farm/analysis/makespan.py), as bench/makespan_measured.py prints it."""

import pytest

from farm.analysis.makespan import Held, cluster_use, sittings


def test_two_gpus_kept_busy_by_four_equal_trials_are_fully_efficient():
    held = [Held(0, 100, 1), Held(0, 100, 1), Held(100, 200, 1), Held(100, 200, 1)]
    u = cluster_use(held, gpus=2)
    assert (u.makespan_s, u.ideal_s, u.efficiency, u.busy) == (200, 200, 1.0, 1.0)


def test_a_gpu_left_idle_while_a_long_trial_runs_is_counted_against_the_order():
    # One GPU runs 100 s + 300 s in sequence while the other idles after 100 s: the ideal packs
    # the 300 s trial alone and the two short ones beside it (300 s).
    held = [Held(0, 100, 1), Held(0, 100, 1), Held(100, 400, 1)]
    u = cluster_use(held, gpus=2)
    assert u.makespan_s == 400 and u.ideal_s == 300
    assert u.efficiency == pytest.approx(0.75) and u.busy == pytest.approx(500 / 800)


def test_a_tp2_trial_counts_both_gpus_and_cpu_trials_none():
    u = cluster_use([Held(0, 100, 2), Held(100, 150, 1), Held(0, 999, 0)], gpus=2)
    assert u.trials == 2 and u.gpu_seconds == 250 and u.makespan_s == 150


def test_a_sweep_resumed_hours_later_is_measured_per_sitting():
    held = [Held(0, 100, 1), Held(90, 200, 1), Held(5000, 5100, 1)]
    parts = sittings(held, gap_s=60)
    assert [len(p) for p in parts] == [2, 1]
    assert cluster_use(parts[1], gpus=1).makespan_s == 100


def test_no_gpus_is_a_mistake_not_a_division_by_zero():
    with pytest.raises(ValueError, match="gpus must be positive"):
        cluster_use([Held(0, 1, 1)], gpus=0)
