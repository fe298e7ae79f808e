"""Names never become paths unchecked (issue 51 item 2): every name a user gives that farm puts in
a file or folder name (a profile's guidellm reports `<profile>-r<repeat>.json`, a capacity plot
`capacity_<profile>.png`) or that names where a sweep lands (study, grid, trial, experiment) is
one safe path component (farm/inputs.py SAFE_NAME_RULE), or the study is refused when it is read:
one line naming the file, the key and why, exit code 2, nothing written. Through the real `farm`
command; and a real trial on the mock engine, its names at the edge of the rule, writes nothing
outside its workdir."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from conftest import run_farm
from farm.cli.main import cli
from farm.inputs import SAFE_NAME_MAX

BASE = {
    "name": "names",
    "primary_profile": "p",
    "models": {"tiny": {"name": "farm-tiny", "tokenizer": "farm:tiny"}},
    "engines": {"mock": {"flags": {"ttft-ms": 5, "itl-ms": 1}, "ready_timeout_s": 60}},
    "profiles": {"p": {"data": {"kind": "synthetic", "prompt_tokens": 8, "output_tokens": 4}, "requests": 4,
                       "rate": 1000, "max_concurrency": 2, "max_seconds": 60}},
    "grids": {"g": {"blocks": [{"name": "t", "engine": "mock", "models": ["tiny"]}]}},
}


def _study(name: str, value: str) -> tuple[dict, str]:
    """BASE with `value` as the name `name` says; (study, the grid to ask for)."""
    d = copy.deepcopy(BASE)
    grid = "g"
    if name == "study":
        d["name"] = value
    elif name == "experiment":
        d["experiment"] = value
    elif name == "grid":
        d["grids"] = {value: d["grids"]["g"]}
        grid = value
    elif name == "grid experiment":
        d["grids"]["g"]["experiment"] = value
    elif name == "profile":
        d["profiles"] = {value: d["profiles"]["p"]}
        d["primary_profile"] = value
    elif name == "trial":
        d["grids"]["g"]["blocks"][0]["name"] = value
    return d, grid


KEYS = {"study": "name", "experiment": "experiment", "grid": "grids", "grid experiment": "grids.g.experiment",
        "profile": "profiles", "trial": "grids.g.blocks[0].name"}
HOSTILE = {"dotdot-slash": "../x", "absolute": "/abs", "slash": "a/b", "dotdot": "..", "dot": ".", "hidden": ".x",
           "dash": "-x", "space": "a b", "nul": "a\x00b", "newline": "a\nb", "long": "x" * (SAFE_NAME_MAX + 1),
           "very-long": "y" * 5000, "empty": ""}
VALID = ["A.b_c-1", "_x", "7", "p..x", "z" * SAFE_NAME_MAX]


def _files(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


def _sweep(tmp_path: Path, monkeypatch, study: dict, grid: str, *extra: str):
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(study))  # NUL and newlines escaped, long keys as `? key`
    return CliRunner().invoke(cli, ["sweep", "--config", "s.yaml", "--grid", grid, "--dry-run", *extra],
                              catch_exceptions=False)


@pytest.mark.parametrize("bad", HOSTILE, ids=list(HOSTILE))
@pytest.mark.parametrize("name", KEYS)
def test_a_hostile_name_is_refused_when_the_study_is_read(tmp_path, monkeypatch, name, bad):
    study, _ = _study(name, HOSTILE[bad])
    result = _sweep(tmp_path, monkeypatch, study, "g")  # --grid g: the study is refused as it is read
    assert result.exit_code == 2, result.output
    (line,) = result.stderr.splitlines()  # one line, and no traceback
    assert line.startswith(f"error: s.yaml: {KEYS[name]}: "), line
    assert len(line) < 400, line  # the 5000-character name is quoted short
    assert "\x00" not in line and "is not a" in line
    assert _files(tmp_path) == {"s.yaml"}  # nothing written: no store, no workdir


@pytest.mark.parametrize("good", VALID)
@pytest.mark.parametrize("name", KEYS)
def test_a_name_within_the_rule_still_works(tmp_path, monkeypatch, name, good):
    study, grid = _study(name, good)
    result = _sweep(tmp_path, monkeypatch, study, grid)
    assert result.exit_code == 0, result.output
    if name == "trial":
        assert good in result.stdout


@pytest.mark.parametrize("bad", ["../x", "/abs", "a/b", ".."])
def test_experiment_option_is_held_to_the_same_rule(tmp_path, monkeypatch, bad):
    result = _sweep(tmp_path, monkeypatch, BASE, "g", "--experiment", bad)
    assert result.exit_code == 2
    (line,) = result.stderr.splitlines()
    assert line.startswith(f"error: --experiment: '{bad}' is not a name farm can put in a file or folder name")
    assert _files(tmp_path) == {"s.yaml"}
    assert _sweep(tmp_path, monkeypatch, BASE, "g", "--experiment", "exp.1_a-b").exit_code == 0


def test_a_real_sweep_with_a_profile_named_out_of_its_folder_starts_nothing(tmp_path):
    """`farm sweep` as a real process, not a dry run: refused before a store, a workdir or Ray."""
    study, _ = _study("profile", "../../escaped")
    work = tmp_path / "a" / "b"
    work.mkdir(parents=True)
    (work / "s.yaml").write_text(yaml.safe_dump(study))
    out = run_farm("sweep", "--config", "s.yaml", "--grid", "g", cwd=work,
                   env={"MLFLOW_TRACKING_URI": "", "FARM_CACHE_DIR": str(work / "cache")})
    assert out.returncode == 2, out.stderr
    assert out.stderr.splitlines() == [
        "error: s.yaml: profiles: '../../escaped' is not a profile name farm can put in a file or folder name "
        "(letters, digits, '.', '_' and '-', not starting with '.' or '-', at most 100 characters)"]
    assert _files(tmp_path) == {"a", "a/b", "a/b/s.yaml"}


def test_a_results_file_whose_profile_names_a_path_writes_no_report(tmp_path, monkeypatch):
    """`farm analyze --out` names capacity plots by profile: a results file's profiles keep the rule."""
    from conftest import REPO

    data = json.loads((REPO / "tests/fixtures/seed-results.json").read_text())
    data["profiles"]["../../x"] = data["profiles"]["sharegpt"]
    (tmp_path / "r.json").write_text(json.dumps(data))
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(cli, ["analyze", "--results", "r.json", "--out", "out"], catch_exceptions=False)
    assert result.exit_code == 2
    (line,) = result.stderr.splitlines()
    assert line.startswith("error: r.json: profiles: '../../x' is not a profile name"), line
    assert _files(tmp_path) == {"r.json"}


@pytest.mark.slow
def test_a_real_trial_with_names_at_the_edge_of_the_rule_writes_only_in_its_workdir(tmp_path, monkeypatch):
    """A real guidellm against a real mock-server, through the actor's runner: its reports land as
    `<profile>-r<repeat>.json` in the trial's folder and nothing lands outside the workdir and the
    cache (the names hold dots and dashes the rule allows: `p..x`, a trailing `-`)."""
    from actors.bench import TrialJob, TrialRunner
    from farm.analysis.results import Status
    from farm.study.grid import expand
    from farm.study.spec import Study

    d = copy.deepcopy(BASE)
    profile = "p..x_Y-"
    d["profiles"] = {profile: d["profiles"]["p"], "q": {**d["profiles"]["p"], "requests": 2}}
    d["primary_profile"] = profile
    d["name"], d["grids"] = "s.t-u", {"g.1": {"blocks": [{"name": "t..1-", "engine": "mock", "models": ["tiny"]}]}}
    study = Study.model_validate(d)
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    monkeypatch.setenv("FARM_CACHE_DIR", str(tmp_path / "cache"))
    (trial,) = expand(study, "g.1")
    job = TrialJob(sweep_id="sweep1", trial=trial, engine_spec=study.engines["mock"], profiles=study.profiles,
                   workdir=str(tmp_path / "runs"))
    result = TrialRunner(job).run()
    assert result.status == Status.ok, result.reason
    trial_dir = tmp_path / "runs" / "sweep1" / trial.id / "attempt-1"
    assert (trial_dir / f"{profile}-r0.json").is_file() and (trial_dir / "q-r0.json").is_file()
    assert sorted(r.report_file for r in result.runs) == sorted([f"{profile}-r0.json", "q-r0.json"])
    written = _files(tmp_path)
    assert written and all(p.split("/")[0] in ("runs", "cache", "cwd") for p in written), written
    assert _files(cwd) == set()  # nothing in the directory farm ran in
