"""What `farm sweep` prints around a sweep, without running one: `--json` and `--quiet` with
`--dry-run`, the options refused where they would change nothing, the Ray dashboard's token hint,
the actors' names and the live progress line (through the real CLI where there is one)."""

from __future__ import annotations

import json

import pytest

from conftest import run_farm
from farm.run.jobs import DASHBOARD_CLOSED, dashboard_line, dashboard_link, token_hint
from farm.run.ray_names import actor_name
from farm.run.sweep_view import Progress
from farm.study.grid import expand, grid_cost
from farm.study.load import load_study


def test_dry_run_json_lists_every_trial_with_its_command_and_nothing_else(tmp_path):
    proc = run_farm("sweep", "--grid", "smoke", "--dry-run", "--json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["grid"] == "smoke" and len(data["trials"]) == 4
    assert all("mock-server" in t["command"] for t in data["trials"])
    assert {(t["flags"]["ttft-ms"], t["flags"]["itl-ms"]) for t in data["trials"]} == {(50, 10), (50, 40), (200, 10), (200, 40)}
    assert data["estimate"]["gpu_hours"] == 0 and data["estimate"]["trial_hours"] > 0
    assert list(tmp_path.iterdir()) == []  # nothing started, nothing written


def test_dry_run_quiet_prints_the_command_lines_alone(tmp_path):
    proc = run_farm("sweep", "--grid", "smoke", "--dry-run", "--quiet", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert len(lines) == 4 and all("mock-server" in line for line in lines)


@pytest.mark.parametrize("args, option", [
    (("--json", "--quiet"), "--json"),
    (("--json", "--address", "http://127.0.0.1:1"), "--json"),
    (("--quiet", "--address", "http://127.0.0.1:1"), "--quiet"),
])
def test_output_options_that_would_be_ignored_are_refused(tmp_path, args, option):
    proc = run_farm("sweep", "--grid", "smoke", *args, cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and option in lines[0], lines
    assert proc.stdout == "" and list(tmp_path.iterdir()) == []


def test_the_dashboard_hint_says_where_the_token_is_and_never_shows_it(monkeypatch):
    monkeypatch.delenv("RAY_AUTH_TOKEN", raising=False)
    monkeypatch.delenv("RAY_AUTH_TOKEN_PATH", raising=False)
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    assert token_hint() is None
    monkeypatch.setenv("RAY_AUTH_MODE", "token")
    assert "`ray get-auth-token`" in token_hint() and "~/.ray/auth_token" in token_hint()
    monkeypatch.setenv("RAY_AUTH_TOKEN_PATH", "/etc/ray/token")
    assert "/etc/ray/token" in token_hint()
    monkeypatch.setenv("RAY_AUTH_TOKEN", "s3cr3t-token-value")
    assert "$RAY_AUTH_TOKEN" in token_hint() and "s3cr3t" not in token_hint()
    assert dashboard_link("127.0.0.1:8265") == "http://127.0.0.1:8265"
    assert dashboard_link(None) is None


def test_the_dashboard_line_says_a_local_ray_closes_with_the_sweep_and_a_cluster_stays_up():
    link = "http://127.0.0.1:8265"
    local = dashboard_line(link, local=True)
    assert local.startswith(f"Ray dashboard: {link}") and "closes with the sweep" in local
    cluster = dashboard_line(link, local=False)
    assert cluster == f"Ray dashboard: {link}"  # a cluster's dashboard stays up: nothing says it closes
    hint = "it asks for the cluster's token: `ray get-auth-token` prints it"
    assert dashboard_line(link, local=False, hint=hint) == f"Ray dashboard: {link}  ({hint})"
    both = dashboard_line(link, local=True, hint=hint)
    assert "closes with the sweep" in both and hint in both
    assert "MLflow" in DASHBOARD_CLOSED  # the end of a local sweep says where the results stay


def test_actor_names_tell_trials_apart_by_engine_and_knobs(study):
    trials = expand(study, "full")
    names = [actor_name("0123456789abcdef", t, 1) for t in trials]
    assert len(set(names)) == len(names)
    with_knobs = next(t for t in trials if t.knobs)
    name = actor_name("0123456789abcdef", with_knobs, 2)
    engine, short, label, sweep, attempt = name.split(":")
    assert engine == with_knobs.engine and short == with_knobs.id.split("-")[-1]
    assert label == with_knobs.name[:160] and sweep == "01234567" and attempt == "a2"  # the name MLflow shows
    unnamed = with_knobs.model_copy(update={"name": None})  # a trial stored before names: its knobs
    first = next(iter(unnamed.knobs))
    assert actor_name("0123456789abcdef", unnamed, 1).split(":")[2].startswith(f"{first}=")


def test_actor_names_mask_secret_flags(study):
    trial = expand(study, "smoke")[0]
    secret = trial.model_copy(update={"flags": {**trial.flags, "api-key": "sk-live-123"}})
    assert "sk-live-123" not in actor_name("0123456789abcdef", secret, 1)


def test_progress_counts_trials_gpu_hours_and_an_eta_from_the_estimate():
    study = load_study()
    trials = expand(study, "full")[:6]
    now = [0.0]
    progress = Progress(study, "full", trials, total=6, clock=lambda: now[0])
    per_trial = grid_cost(study, "full", trials=trials).trial_hours * 3600 / 6
    for t in trials[:2]:
        progress.started(t)
    assert progress.eta_s() == pytest.approx((2 * per_trial + 4 * per_trial) / 2)
    now[0] = 1800.0
    progress.finished(trials[0], ok=True)
    assert progress.gpu_hours() == pytest.approx((1800 * trials[0].gpus + 1800 * trials[1].gpus) / 3600)
    # one finished trial took 1800 s: the ETA follows what the cluster really takes
    progress.started(trials[2])
    assert progress.eta_s() == pytest.approx((0 + 1800 + 3 * 1800) / 2)
    line = progress.line()
    assert line.startswith("trials: 1 done, 0 failed, 2 running, 3 pending | GPU-hours ")
    assert "estimated | ETA ~" in line


def test_a_search_step_line_names_trials_not_hashes():
    from farm.run.sweep_view import readable_ids

    names = {"vllm-132b604b": "max-num-seqs=4", "vllm-03e1e34b": "max-num-seqs=16"}
    line = readable_ids("step 2: vllm-132b604b against 1 neighbour(s); the final comparison: the start against "
                        "vllm-03e1e34b, not vllm-00000000", names)
    assert line == ("step 2: max-num-seqs=4 against 1 neighbour(s); the final comparison: the start against "
                    "max-num-seqs=16, not vllm-00000000")  # an id it does not know stays an id


def test_a_trial_measured_only_on_a_shortened_rung_shows_that_rungs_throughput():
    from farm.analysis.results import ProfileRun, RunMetrics, Status, TrialResult
    from farm.run.sweep_view import _primary_tps
    from farm.study.grid import expand
    from farm.study.load import load_study

    trial = expand(load_study(), "smoke")[0]

    def run(profile, tps):
        metrics = RunMetrics(successful_requests=24, total_requests=24, success_rate=1.0, duration_s=2.0,
                             total_input_tokens=tps, total_output_tokens=tps, request_throughput=12, output_tps=tps / 2,
                             total_tps=tps, ttft_mean_ms=5.0, ttft_p95_ms=8.0, tpot_mean_ms=20.0)
        return ProfileRun(profile=profile, status=Status.ok, metrics=metrics)

    step = TrialResult(sweep_id="s", trial=trial, status=Status.ok, runs=[run("smoke_chat.rung1", 90.0), run("smoke_chat.rung1", 110.0)])
    assert _primary_tps(step, "smoke_chat") == (100.0, "smoke_chat.rung1")
    full = step.model_copy(update={"runs": step.runs + [run("smoke_chat", 300.0)]})
    assert _primary_tps(full, "smoke_chat") == (300.0, "smoke_chat")
    assert _primary_tps(step.model_copy(update={"runs": []}), "smoke_chat") is None
