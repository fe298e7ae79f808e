"""A results file's runs are physically plausible, in every quantity selection derives from them
(issue 29): a success rate is a fraction, an ok run's duration is above 0, no measurement is past
what any run could give, and no rate overflows or comes from a division by a vanishing (denormal)
duration or request count. A run that breaks one is refused in one line naming the run's id and
its key, never ranked on an infinity and never a traceback."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from refusals import refused, run_farm_here

SEED = json.loads((Path(__file__).resolve().parents[2] / "fixtures" / "seed-results.json").read_text())
FIRST = SEED["runs"][0]["id"]


def _with(**metrics) -> str:
    data = copy.deepcopy(SEED)
    data["runs"][0]["metrics"].update(metrics)
    return json.dumps(data)


CASES = [
    ("success-rate-above-one", _with(success_rate=5), "metrics.success_rate",
     "a success rate of 5 is not a fraction from 0 to 1"),
    ("more-successes-than-requests", _with(successful_requests=1e9), "metrics.successful_requests",
     "a success rate of 1e+06 is not a fraction from 0 to 1"),
    ("a-denormal-duration", _with(duration_s=1e-310), "metrics.duration_s",
     "its tokens per second from its totals come to inf"),
    ("a-zero-duration", _with(duration_s=0), "metrics.duration_s", "an ok run's duration must be above 0, got 0"),
    ("throughput-near-the-float-limit", _with(total_tps=1.7e308), "metrics.total_tps",
     "1.7e+308 is not a plausible measurement (farm takes at most 1e+15)"),
    ("tokens-whose-sum-overflows", _with(total_input_tokens=1.7e308, total_output_tokens=1.7e308),
     "metrics.total_input_tokens", "1.7e+308 is not a plausible measurement"),
    ("a-denormal-request-count", _with(successful_requests=5e-324), "metrics.successful_requests",
     "its output tokens per request come to inf"),
]


@pytest.mark.parametrize("fmt", ["text", "json"])
@pytest.mark.parametrize("text,key,reason", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_an_implausible_run_is_refused_with_its_id(tmp_path, text, key, reason, fmt):
    line = refused(tmp_path, ["analyze", "--results", "r.json", "--format", fmt], {"r.json": text})
    assert line.startswith(f"r.json: runs[0].{key}: run '{FIRST}': {reason}"), line


def test_the_seed_file_itself_is_plausible(tmp_path):
    result, _ = run_farm_here(tmp_path, ["analyze", "--results", "r.json"], {"r.json": json.dumps(SEED)})
    assert result.exit_code == 0, result.output
