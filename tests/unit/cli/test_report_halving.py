"""`farm report SWEEP_ID` of a halving sweep: its Halving section as the sweep recorded it, each
of several sweeps' under its id; and a sweep's Memory fit section, read back where the model's
config.json is not.

The stores are real MLflow (SQLite in tmp_path), written by farm's own writers: the halving
one search runner (farm/run/search.py `run_search` with farm/run/halving.py's strategy: its tags,
halving.json, later rungs appended to the trials' runs), the trial actor's logging of rung 1 and `record_check`'s tags.
What stands in for Ray and the engines is only the benchmark numbers, chosen so that the stops
are known (as tests/unit/cli/test_report_sweeps.py does for a grid sweep)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from mlflow.tracking import MlflowClient

from farm.analysis.results import ProfileRun, RunMetrics, Status, TrialResult
from farm.cli.main import cli
from farm.study.grid import expand
from farm.study.load import load_study
from sweeptools import shape_config

REPO = Path(__file__).resolve().parents[3]
BUDGET = 1.0


def _metrics(tps: float) -> RunMetrics:
    return RunMetrics(successful_requests=24, total_requests=24, success_rate=1.0, duration_s=2.0,
                      total_input_tokens=tps, total_output_tokens=tps, request_throughput=12, output_tps=tps / 2,
                      total_tps=tps, ttft_mean_ms=5.0, ttft_p95_ms=8.0, tpot_mean_ms=20.0)


def _halving_sweep(uri: str, study, grid: str, tps: dict[str, float]) -> str:
    """One halving sweep of `grid`, its rungs run by the driver's own loop."""
    from actors.bench import TrialJob
    from farm.run import search
    from farm.store import tracking

    trials = expand(study, grid)
    exp_id, sweep_id = tracking.start_sweep(uri, study.experiment_name, study, grid, trials,
                                            command=f"farm sweep --grid {grid} --strategy halving", repeats=3)
    clock = [1.7e9]

    def make_job(trial, repeats, pass_index):  # as the driver's: a rung's pass is its index
        return TrialJob(sweep_id=sweep_id, trial=trial, engine_spec=study.engines[trial.engine], profiles={},
                        repeats=repeats, min_success_rate=study.min_success_rate, workdir="", order_seed=pass_index - 1,
                        first_pass=pass_index == 1, tracking_uri=uri if pass_index == 1 else None)

    def run_jobs(jobs, on_result):
        out = []
        for job in jobs:
            trial, index = job.trial, job.order_seed + 1
            t0 = clock[0] = clock[0] + 100
            runs = [ProfileRun(profile=name, repeat=i, status=Status.ok, metrics=_metrics(tps[trial.name] * (1 + 0.01 * i)),
                               started_at=t0 + 20 + 10 * i, finished_at=t0 + 28 + 10 * i)
                    for name in job.profiles for i in range(job.repeats)]
            result = TrialResult(sweep_id=sweep_id, trial=trial, status=Status.ok, runs=runs, attempt=1,
                                 serve_command=f"serve {trial.name}", started_at=t0, finished_at=t0 + 60,
                                 guidellm_version="0.8.1", node="laptop")
            if index == 1:  # the trial actor logs its first pass itself
                tracking.log_trial(uri, exp_id, sweep_id, result, None)
            on_result(result)
            out.append(result)
        return out

    ctx = search.SearchContext(study=study, grid=grid, trials=trials, tracking_uri=uri, experiment_id=exp_id,
                               sweep_id=sweep_id, make_job=make_job, budget_gpu_hours=BUDGET)
    search.run_search(search.strategy_for("halving", ctx), ctx, run_jobs=run_jobs)
    tracking.finish_sweep(uri, sweep_id, "finished", [])
    return sweep_id


def _memory_sweep(uri: str, tmp: Path) -> tuple[str, list[str]]:
    """A vLLM grid sweep of Qwen3.5's shape on the H200 whose trials reported their KV-cache tokens;
    the sweep's check recorded, then the model's directory removed."""
    from farm.run.memory import record_check
    from farm.store import tracking

    model = tmp / "model"
    model.mkdir()
    (model / "config.json").write_text(json.dumps(shape_config()))
    data = yaml.safe_load((REPO / "configs" / "h200-dummy.yaml").read_text())
    data["models"]["bf16"]["name"] = str(model)
    data["accelerator_type"] = "H200"  # `auto` as the driver stores it on the H200 (farm/run/driver.py)
    (tmp / "h200.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    study = load_study(tmp / "h200.yaml")
    chosen = [t for t in expand(study, "seed") if t.name in ("engine_vllm_default", "step3_performance_mode")]
    exp_id, sweep_id = tracking.start_sweep(uri, study.experiment_name, study, "seed", chosen,
                                            command="farm sweep --grid seed", repeats=1)
    results = []
    for k, trial in enumerate(chosen):
        runs = [ProfileRun(profile=p, repeat=i, status=Status.ok, metrics=_metrics(30000 + 5000 * k + 100 * i),
                           started_at=1.7e9 + i, finished_at=1.7e9 + i + 1)
                for p in ("throughput", "sharegpt_synthetic") for i in range(3)]
        results.append(TrialResult(sweep_id=sweep_id, trial=trial, status=Status.ok, runs=runs, attempt=1,
                                   serve_command=f"vllm serve {trial.name}", started_at=1.7e9, finished_at=1.7e9 + 60,
                                   engine_version="0.20.2", node="h200", gpus=["0"], gpu_name="NVIDIA H200",
                                   engine_reported={"kv_cache_tokens": 1_000_000 + 900_000 * k}))
        tracking.log_trial(uri, exp_id, sweep_id, results[-1], None)
    lines = record_check(uri, sweep_id, study, results)  # as the end of `farm sweep` does
    tracking.finish_sweep(uri, sweep_id, "finished", [])
    shutil.rmtree(model)  # `farm report` runs elsewhere: the predictor has no config.json there
    return sweep_id, lines


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("report-halving")
    uri = f"sqlite:///{tmp / 'mlflow.db'}"
    short = {"data": {"kind": "synthetic", "prompt_tokens": 16, "output_tokens": 24}, "requests": 24, "max_seconds": 60}
    (tmp / "race.yaml").write_text(yaml.safe_dump({
        "name": "race", "primary_profile": "q", "strategy": "halving", "budget_gpu_hours": BUDGET,
        "models": {"tiny": {"name": "farm-tiny", "tokenizer": "farm:tiny"}}, "engines": {"mock": {}},
        "profiles": {"q": short},
        "grids": {g: {"blocks": [{"engine": "mock", "models": ["tiny"], "name": f"{g}_{name}", "flags": {"itl-ms": itl}}
                                 for name, itl in (("fast", fast), ("slow", slow))]}
                  for g, fast, slow in (("a", 20, 150), ("b", 25, 200))}}))
    study = load_study(tmp / "race.yaml")
    h200 = yaml.safe_load((REPO / "configs" / "h200-dummy.yaml").read_text())["experiment"]
    for name in (study.experiment_name, h200):  # artifacts in tmp, not ./mlruns
        MlflowClient(uri).create_experiment(name, artifact_location=(tmp / "artifacts" / name).as_uri())
    a = _halving_sweep(uri, study, "a", {"a_fast": 800, "a_slow": 60})
    b = _halving_sweep(uri, study, "b", {"b_fast": 700, "b_slow": 50})
    memory, memory_lines = _memory_sweep(uri, tmp)
    recorded = MlflowClient(uri).download_artifacts(a, "halving.md", str(tmp))
    return dict(uri=uri, a=a, b=b, memory=memory, memory_lines=memory_lines,
                halving_md=Path(recorded).read_text().splitlines())


def _farm(*args: str):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def _section(out: str, title: str) -> str:
    return out.split(f"## {title}\n\n")[1].split("\n## ")[0]


def test_the_halving_section_is_what_the_sweep_recorded(store):
    res = _farm("report", store["a"], "--tracking-uri", store["uri"], "--format", "markdown")
    assert res.exit_code == 0, res.output
    lines = store["halving_md"]
    section = _section(res.output, "Halving")
    assert section.startswith(lines[0] + "\n\n" + "\n".join("- " + line.strip() for line in lines[1:]))
    assert "- stopped a_slow: rung 1: significantly worse than the leader" in section
    assert "- rung 1: " in section and "- rung 2: " in section
    # the rungs' runs are read with the rungs' profiles, as the sweep's own report read them
    assert "q.rung1" in res.output and "recommended" in res.output.lower() and "a_fast" in res.output


def test_the_json_has_each_rungs_spend_and_each_stop(store):
    res = _farm("report", store["a"], "--tracking-uri", store["uri"], "--format", "json")
    assert res.exit_code == 0, res.output
    (h,) = json.loads(res.output)["halving"]
    assert h["sweep_id"] is None and h["done"] and h["budget_gpu_hours"] == BUDGET
    assert set(h["spent_by_rung"]) == {"1", "2"} and 0 < h["spent_gpu_hours"] <= BUDGET
    assert [(s["label"], s["rung"], s["kind"]) for s in h["stops"]] == [("a_slow", 1, "significantly_worse")]


def test_two_halving_sweeps_each_get_their_section_under_their_id(store):
    res = _farm("report", store["a"], store["b"], "--tracking-uri", store["uri"], "--format", "markdown")
    assert res.exit_code == 0, res.output
    section = _section(res.output, "Halving")
    a, b = section.split(f"### Sweep `{store['a']}`\n\n")[1], section.split(f"### Sweep `{store['b']}`\n\n")[1]
    assert "stopped a_slow" in a.split("### Sweep")[0] and "stopped b_slow" in b and "a_slow" not in b
    data = json.loads(_farm("report", store["a"], store["b"], "--tracking-uri", store["uri"], "--format", "json").output)
    assert [(h["sweep_id"], [s["label"] for s in h["stops"]]) for h in data["halving"]] == [
        (store["a"], ["a_slow"]), (store["b"], ["b_slow"])]


def test_the_memory_fit_section_is_the_sweeps_check_without_the_models_config(store):
    assert len(store["memory_lines"]) == 3 and "over 2 trial(s)" in store["memory_lines"][0]
    res = _farm("report", store["memory"], "--tracking-uri", store["uri"], "--format", "text")
    assert res.exit_code == 0, res.output
    first, *trials = store["memory_lines"]
    # the sweep's own lines, naming the GPU model whose memory was predicted (a fit is per model)
    assert f"Memory fit\n----------\n\n{first} (predicted for the memory of one H200)\n\n" + "\n".join(line.strip() for line in trials) + "\n\n" in res.output
    assert "Halving" not in res.output
    data = json.loads(_farm("report", store["memory"], "--tracking-uri", store["uri"], "--format", "json").output)
    assert [t["reported"] for t in data["memory_fit"][0]["trials"]] == [1_000_000, 1_900_000]
