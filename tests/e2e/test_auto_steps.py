"""`--repeats auto` in a study of ordered steps, run in pieces as a GPU sitting is (a lent machine
lasts one sitting): through the CLI, the session's Ray, real mock engines, real guidellm, MLflow on
SQLite. The decisions are the steps, each against the one it builds on (the seed's question: does
this flag help on top of the last?), not every trial against the leader: a later pass runs the two
trials of each undecided step and nothing else. A resume that adds a step with `--control` after
a finished pass plans its own passes; it does not take its new trials for a pass cut short."""

from __future__ import annotations

import re

import pytest

from conftest import REPO, run_farm

pytestmark = pytest.mark.slow

# s0 answers in 90 ms a request (TTFT 10 ms, 8 tokens at 10 ms), s1 in 280 ms: s1 against s0 is
# decided at the first look. s2 and s3 add 5 ms each to s1's TTFT (under 2 %): those steps stay
# open. Two requests at once keep each rate bound by the mock's latencies, not the runner's cores.
STUDY = f"""
include: [{REPO / 'configs' / 'smoke.yaml'}]
name: auto-steps
experiment: auto-steps
primary_profile: short
repeats: auto
max_runs: 40
min_success_rate: 0.9
profiles:
  short:
    data: {{kind: synthetic, prompt_tokens: 16, output_tokens: 8}}
    rate: 1000
    requests: 16
    max_concurrency: 2
    seed: 42
    max_seconds: 120
grids:
  steps:
    ordered: true
    profiles: [short]
    max_concurrent_trials: 1
    blocks:
      - {{name: s0, engine: mock, models: [tiny], flags: {{ttft-ms: 10}}}}
      - {{name: s1, engine: mock, models: [tiny], flags: {{ttft-ms: 200}}, after: s0}}
      - {{name: s2, engine: mock, models: [tiny], flags: {{ttft-ms: 205}}, after: s1}}
      - {{name: s3, engine: mock, models: [tiny], flags: {{ttft-ms: 210}}, after: s2}}
"""


def _events(out: str) -> list[str]:
    """The sweep's timestamped lines, each whole (the terminal wraps a long one at 200 columns)."""
    lines: list[str] = []
    for line in out.splitlines():
        if re.match(r"\[\s*\d+s\] ", line):
            lines.append(line)
        elif lines and line and not line.startswith(("\u2502", "\u250f", "\u2503", "\u2517", "\u2514", "\u2521")):
            lines[-1] = re.sub(r"\s+", " ", f"{lines[-1]} {line}")
    return lines


def _passes(out: str) -> list[str]:
    return [line for line in _events(out) if "repeats auto, " in line]


def _open_and_rerun(line: str) -> tuple[set[str], set[str]]:
    """The trials of the steps a pass line names as open, and the trials it runs again."""
    opened = {t for a, b in re.findall(r"\b(s\d) vs (s\d) \(", line) for t in (a, b)}
    rerun = set(re.search(r"more repeats for ([s\d, ]+)", line).group(1).split(", "))
    return opened, rerun


@pytest.fixture(scope="module")
def pieces(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("auto-steps")
    (tmp / "study.yaml").write_text(STUDY)
    common = ("--config", str(tmp / "study.yaml"), "--grid", "steps", "--tracking-uri", f"sqlite:///{tmp / 'mlflow.db'}",
              "--workdir", str(tmp / "runs"))
    # piece 1: three steps, a first pass and one more (the budget: 9 runs, then 4)
    first = run_farm("sweep", *common, "--trial", "s0", "--trial", "s1", "--trial", "s2", "--run-budget", "13", cwd=tmp)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    sweep = re.search(r"^sweep ([0-9a-f]{32})", first.stdout, re.M).group(1)
    # piece 2 (another sitting): the last step, beside a copy of the step it builds on (6 runs), then
    # one pass for the three trials of the two steps still open (6)
    second = run_farm("sweep", *common, "--resume", sweep, "--trial", "s3", "--control", "s2", "--run-budget", "25",
                      cwd=tmp)
    assert second.returncode == 0, second.stdout[-3000:] + second.stderr[-3000:]
    return first.stdout, second.stdout


def test_a_later_pass_runs_the_trials_of_the_open_steps_and_no_others(pieces):
    first, _ = pieces
    (line, *_) = [p for p in _passes(first) if "pass 2 (" in p]
    assert "step(s) open" in line and "s2 vs s1 (" in line, line
    opened, rerun = _open_and_rerun(line)
    assert rerun == opened and {"s1", "s2"} <= rerun
    # s1 against s0 is a threefold difference: decided at the first look, so s0, the leader by far,
    # is not run again (the leader rule ran it in every pass)
    assert "s1 vs s0 (" not in line and "s0" not in rerun
    assert "pass 2 ok              s0" not in first


def test_a_resume_that_adds_a_step_plans_its_own_pass(pieces):
    _, second = pieces
    assert "was stopped before" not in second  # pass 2 of piece 1 was finished: s3 was no part of it
    starts = [m.group(1) for line in _events(second) if (m := re.match(r"\[\s*\d+s\] start\s+(\S+)", line))]
    assert starts[0] == "s2@control1" and "s3" in starts, starts  # the copy first, one trial at a time
    (line, *_) = _passes(second)
    # the plan after the copy's and s3's first runs judges s3 against s2, the step it builds on:
    # decided already, or open, and then in a pass of its own, pass 3, with the other open steps
    assert re.search(r"\bs3 (vs s2 \(|better than s2|worse than s2|equivalent to s2)", line), line
    if "step(s) open" in line:
        assert "pass 3 (" in line, line
        opened, rerun = _open_and_rerun(line)
        assert rerun == opened, line
