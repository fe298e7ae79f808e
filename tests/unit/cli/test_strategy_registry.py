"""Adding a sweep strategy is one module and its tests (issue 52): a strategy registered here, in a
test module, with no edit to the CLI or the driver, is a choice of `farm sweep --strategy`, is
priced by `--dry-run` through the search protocol (its own `dry_run_lines`), is checked against the
options it does not take, and runs through the one runner on a real MLflow store (SQLite in
tmp_path) as the driver runs every strategy; an unregistered name is refused with the registry's
choices."""

from __future__ import annotations

from click.testing import CliRunner

from farm.analysis.results import ProfileRun, RunMetrics, Status, TrialResult
from farm.cli.main import cli
from farm.run import search
from farm.store import tracking
from farm.strict import Strict
from farm.study.grid import expand
from farm.study.load import load_study
from sweeptools import write_study


class OncePlan(Strict):
    done: bool
    reason: str
    trials: list[str] = []


@search.register("each-once-for-test")
class EachOnce(search.BaseStrategy):
    """Every trial of the grid once, stored by the runner; then done."""

    @classmethod
    def dry_run_lines(cls, study, grid, trials, *, fits, measured=None, start=None, waits=False):
        return [f"strategy each-once-for-test: {len(trials)} trial(s), one run each"]

    def plan(self, stored, first):
        todo = [t.id for t in self.ctx.trials if t.id not in {r.trial.id for r in stored}]
        return OncePlan(done=not todo, reason=f"{len(todo)} to run" if todo else "every trial ran", trials=todo)

    def jobs(self, p, stored, first):
        return [t for t in self.ctx.trials if t.id in p.trials]

    def store(self, new, previous, p):
        return None if new.status == Status.cancelled else search.Stored(first=new)

    def stopped(self, p):
        return p.model_copy(update={"done": True, "reason": "measured nothing"})


def _study(tmp_path):
    return write_study(tmp_path / "s.yaml", name="registry", grid="g",
                       blocks=[{"engine": "mock", "models": ["tiny"], "axes": {"ttft-ms": [10, 20]}}])


def _sweep(tmp_path, *args):
    return CliRunner().invoke(cli, ["sweep", "--config", str(_study(tmp_path)), "--grid", "g", *args],
                              catch_exceptions=False)


def test_a_registered_strategy_is_a_choice_the_dry_run_prices_through_the_protocol(tmp_path):
    assert "each-once-for-test" in search.choices() and "auto" not in search.choices()
    result = _sweep(tmp_path, "--strategy", "each-once-for-test", "--dry-run")
    assert result.exit_code == 0, result.output
    assert "strategy each-once-for-test: 2 trial(s), one run each" in result.output.splitlines()


def test_an_option_the_registered_strategy_does_not_take_is_refused_in_its_words(tmp_path):
    result = _sweep(tmp_path, "--strategy", "each-once-for-test", "--budget", "2", "--dry-run")
    assert result.exit_code == 2
    assert "only with --strategy halving or local" in result.output
    result = _sweep(tmp_path, "--strategy", "each-once-for-test", "--from", "vllm serve m", "--dry-run")
    assert result.exit_code == 2 and "only with --strategy local (where the local search starts)" in result.output


def test_an_unregistered_strategy_is_refused_with_the_registrys_choices(tmp_path):
    result = _sweep(tmp_path, "--strategy", "no-such", "--dry-run")
    assert result.exit_code == 2
    assert "'no-such' is not one of" in result.output and "'each-once-for-test'" in result.output


def test_the_registered_strategy_runs_through_the_one_runner(tmp_path):
    study = load_study(_study(tmp_path))
    trials = expand(study, "g")
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    exp_id, sweep_id = tracking.start_sweep(uri, study.experiment_name, study, "g", trials, command="farm sweep",
                                            repeats=1)
    ctx = search.SearchContext(study=study, grid="g", trials=trials, tracking_uri=uri, experiment_id=exp_id,
                               sweep_id=sweep_id, make_job=lambda t, n, i: None)
    [kind] = search.chain("each-once-for-test", auto_repeats=False)  # as the driver asks the registry
    ran = []

    def run_jobs(jobs, on_result):
        for trial in jobs:
            ran.append(trial.id)
            metrics = RunMetrics(successful_requests=8, total_requests=8, success_rate=1.0, duration_s=2.0,
                                 total_input_tokens=100, total_output_tokens=100, request_throughput=4,
                                 output_tps=50, total_tps=100, ttft_mean_ms=5.0, ttft_p95_ms=8.0, tpot_mean_ms=20.0)
            on_result(TrialResult(sweep_id=sweep_id, trial=trial, status=Status.ok, attempt=1,
                                  runs=[ProfileRun(profile="p", repeat=0, status=Status.ok, metrics=metrics,
                                                   started_at=1.7e9, finished_at=1.7e9 + 1)],
                                  serve_command="serve", started_at=1.7e9, finished_at=1.7e9 + 9))

    last = search.run_search(search.strategy_for(kind.name, ctx), ctx, run_jobs=run_jobs)
    assert last.done and last.reason == "every trial ran"
    assert sorted(ran) == sorted(t.id for t in trials)
    assert sorted(r.trial.id for r in tracking.load_results(uri, sweep_id)) == sorted(t.id for t in trials)
