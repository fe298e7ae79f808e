"""bench/quality_false_alarm.py (issue 49): the gate's verdict of a configuration against itself
stays under the 5 % false-alarm target, and a clearly degraded one is refused; on few resamples,
seeded, so each case is the same every run."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from conftest import REPO

_spec = importlib.util.spec_from_file_location("quality_false_alarm", REPO / "bench" / "quality_false_alarm.py")
bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)


def _config(seed: int = 7, pool: int = 2000):
    rng = np.random.default_rng(seed)
    pool_p = rng.beta(0.7, 0.3, size=pool)
    return rng, pool_p, rng.random(pool) < pool_p


@pytest.mark.parametrize("flip", [0.0, 0.02, 0.05])
def test_the_same_configuration_is_rarely_worse_than_itself(flip):
    rng, pool_p, greedy = _config()
    out = bench.simulate(items=300, flip=flip, resamples=400, margin=0.02, rng=rng, pool_p=pool_p, greedy=greedy)
    assert sum(out["tally"].values()) == 400
    assert out["tally"]["worse"] / 400 <= 0.05


def test_identical_runs_are_equivalent_and_a_ten_point_loss_is_refused():
    rng, pool_p, greedy = _config()
    same = bench.simulate(items=300, flip=0.0, resamples=50, margin=0.02, rng=rng, pool_p=pool_p, greedy=greedy)
    assert same["tally"]["equivalent"] == 50 and same["discordant"] == 0
    worse = bench.simulate(items=300, flip=0.01, resamples=200, margin=0.02, rng=rng, pool_p=pool_p, greedy=greedy,
                           loss=0.10)
    assert worse["tally"]["worse"] / 200 >= 0.95


def test_the_script_prints_its_tables_and_meets_the_target(capsys):
    assert bench.main(["--resamples", "50", "--items", "300", "--flips", "0.01", "--losses", "0.05"]) == 0
    out = capsys.readouterr().out
    assert "| 300 | 1 % |" in out and "(target: at most 5 %): met" in out


def test_the_committed_readme_holds_a_printed_table():
    text = (REPO / "bench" / "quality" / "README.md").read_text()
    assert "bench/quality_false_alarm.py" in text and "Highest false-alarm rate" in text
    rows = [line for line in text.splitlines() if line.startswith("| 300 | ")]
    assert len(rows) >= 5 + 3
