"""Bad input is found before Ray starts or MLflow is touched: one line naming the file (or the
option), the key path and the reason, exit code 2, nothing started, nothing written.

Each case writes a small study (a valid one, then one thing broken) into an empty directory and
runs `farm sweep` there through the real command group (in this process: the table is long and
each case must stay cheap). After each case the directory holds only what the case wrote: no
`mlflow.db`, no `mlruns`, no `farm-runs`, and no Ray was started.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from farm.cli import cli

VALID = """\
name: broken
primary_profile: p
models:
  tiny: {name: farm-tiny, tokenizer: "farm:tiny"}
engines:
  mock:
    flags:
      ttft-ms: 5
profiles:
  p:
    data: {kind: synthetic, prompt_tokens: 8, output_tokens: 4}
    requests: 4
grids:
  g:
    blocks:
      - engine: mock
        models: [tiny]
        axes:
          itl-ms: [1, 2]
"""


def _edit(old: str, new: str):
    def apply(text: str) -> str:
        assert old in text, old
        return text.replace(old, new, 1)
    return apply


# (id, edit of the valid study, extra arguments, expected line: {study} and {tmp} are filled in)
CASES = [
    ("malformed-yaml", _edit("  p:\n", "  p: [\n"), [],
     "{study}: line 12: malformed YAML: expected ',' or ']', but got '<scalar>'"),
    ("unknown-key", _edit("name: broken\n", "name: broken\nmax_retires: 3\n"), [],
     "{study}: max_retires: unknown key"),
    ("unknown-nested-key", _edit("    requests: 4\n", "    requests: 4\n    requets: 5\n"), [],
     "{study}: profiles.p.requets: unknown key"),
    ("wrong-type", _edit("    requests: 4\n", "    requests: many\n"), [],
     "{study}: profiles.p.requests: Input should be a valid integer, unable to parse string as an integer"),
    ("out-of-range", _edit("    requests: 4\n", "    requests: 0\n"), [],
     "{study}: profiles.p.requests: Input should be greater than 0"),
    ("missing-key", _edit("    requests: 4\n", ""), [],
     "{study}: profiles.p.requests: required key missing"),
    ("unknown-engine", _edit("  mock:\n", "  turbo:\n"), [],
     "{study}: engines.turbo: unknown engine 'turbo' (known: mock, sglang, vllm)"),
    ("unknown-engine-in-grid", _edit("      - engine: mock\n", "      - engine: vllm\n"), [],
     "{study}: grids.g.blocks[0].engine: unknown engine 'vllm' (the study defines: mock)"),
    ("unknown-model", _edit("        models: [tiny]\n", "        models: [huge]\n"), [],
     "{study}: grids.g.blocks[0].models[0]: unknown model 'huge' (the study defines: tiny)"),
    ("unknown-profile", _edit("  g:\n", "  g:\n    profiles: [p, q]\n"), [],
     "{study}: grids.g.profiles[1]: unknown profile 'q'"),
    ("unknown-primary-profile", _edit("primary_profile: p\n", "primary_profile: sharegpt\n"), [],
     "{study}: primary_profile: unknown profile 'sharegpt'"),
    ("unknown-grid", None, ["--grid", "full"],
     "{study}: grids: unknown grid 'full' (the study defines: g)"),
    ("empty-grid", _edit("          itl-ms: [1, 2]\n", "          itl-ms: [1, 2]\n        exclude: [{itl-ms: 1}, {itl-ms: 2}]\n"), [],
     "{study}: grids.g: the grid expands to no trials (every combination excluded or skipped)"),
    ("empty-axis", _edit("          itl-ms: [1, 2]\n", "          itl-ms: []\n"), [],
     "{study}: grids.g.blocks[0].axes: axis 'itl-ms' has no values"),
    ("flag-twice-yaml", _edit("      ttft-ms: 5\n", "      ttft-ms: 5\n      ttft-ms: 6\n"), [],
     "{study_abs}: engines.mock.flags.ttft-ms: given twice (lines 8 and 9)"),
    ("flag-twice-dashes", _edit("      ttft-ms: 5\n", "      ttft-ms: 5\n      --ttft-ms: 6\n"), [],
     "{study}: engines.mock.flags: flag 'ttft-ms' given twice"),
    ("flag-twice-engine-and-grid", _edit("          itl-ms: [1, 2]\n", "          ttft-ms: [1, 2]\n"), [],
     "{study}: grids.g.blocks[0].ttft-ms: flag given twice (engine 'mock' already sets it)"),
    ("ray-env-to-engine", _edit("    flags:\n", "    env: {RAY_ADDRESS: 'head:6379'}\n    flags:\n"), [],
     "{study}: engines.mock.env: RAY_ADDRESS: RAY_* variables never reach an engine (it would join farm's own Ray cluster)"),
    ("dataset-missing", _edit("    data: {kind: synthetic, prompt_tokens: 8, output_tokens: 4}\n",
                              "    data: {kind: sharegpt, path: '{tmp}/data/sharegpt.json'}\n"), [],
     "{study}: profiles.p.data.path: dataset file {tmp}/data/sharegpt.json does not exist"),
    ("tracking-unreachable", None, ["--tracking-uri", "http://127.0.0.1:1"],
     "--tracking-uri: cannot reach the MLflow server at http://127.0.0.1:1 (connection refused)"),
    ("tracking-sqlite-dir-missing", None, ["--tracking-uri", "sqlite:///{tmp}/nowhere/mlflow.db"],
     "--tracking-uri: the directory of the SQLite store does not exist: {tmp}/nowhere"),
    ("ray-unreachable", None, ["--address", "127.0.0.1:1"],
     "--address: cannot reach the Ray cluster at 127.0.0.1:1 (connection refused)"),
    ("ray-address-malformed", None, ["--address", "head-without-port"],
     "--address: 'head-without-port' is not a Ray address (HOST:PORT, ray://HOST:PORT, http://HEAD:8265 or auto)"),
    ("resume-without-store", None, ["--resume", "0123456789abcdef"],
     "--resume: no sweep with id '0123456789abcdef': there is no tracking store at {tmp}/mlflow.db"),
    ("config-not-found", None, ["--config", "{tmp}/missing.yaml"],
     "{tmp}/missing.yaml: file not found"),
]


def _fill(text: str, tmp: Path, study: Path) -> str:
    return text.replace("{study_abs}", str(study.resolve())).replace("{study}", str(study)).replace("{tmp}", str(tmp))


def _sweep(tmp: Path, args: list[str]):
    """`farm sweep` run in `tmp` through the real command group; returns (exit code, stderr lines)."""
    runner = CliRunner()
    old = os.getcwd()
    os.chdir(tmp)
    try:
        result = runner.invoke(cli, ["sweep", *args], catch_exceptions=False)
    finally:
        os.chdir(old)
    return result.exit_code, result.stderr.splitlines(), result.stdout


def _assert_nothing_started(tmp: Path, before: set[str]) -> None:
    assert {p.name for p in tmp.iterdir()} == before, "something was written"
    ray = sys.modules.get("ray")
    assert ray is None or not ray.is_initialized(), "Ray was started"


@pytest.mark.parametrize("edit,args,expected", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_broken_input_is_one_line_and_exit_2(tmp_path, monkeypatch, edit, args, expected):
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    study = tmp_path / "study.yaml"
    study.write_text(_fill(edit(VALID) if edit else VALID, tmp_path, study))
    args = [_fill(a, tmp_path, study) for a in args]
    if "--config" not in args:
        args = ["--config", str(study), *args]
    if "--grid" not in args:
        args += ["--grid", "g"]
    before = {p.name for p in tmp_path.iterdir()}
    code, stderr, stdout = _sweep(tmp_path, args)
    assert stderr == ["error: " + _fill(expected, tmp_path, study)], stdout
    assert code == 2
    _assert_nothing_started(tmp_path, before)


def _store_with_a_sweep(tmp: Path, study_text: str, grid: str) -> tuple[str, str]:
    """A real SQLite store holding one sweep (its parent run only), as `farm sweep` starts one."""
    from farm import tracking
    from farm.grid import expand
    from farm.spec import load_study

    other = tmp / "other.yaml"
    other.write_text(study_text)
    study = load_study(other)
    uri = f"sqlite:///{tmp / 'mlflow.db'}"
    _, sweep_id = tracking.start_sweep(uri, study.experiment_name, study, grid, expand(study, grid),
                                       command="test", repeats=1)
    other.unlink()
    return uri, sweep_id


@pytest.mark.parametrize("case", ["unknown-id", "other-study", "other-grid", "changed-grid"])
def test_resume_of_a_sweep_that_does_not_fit_is_one_line_and_exit_2(tmp_path, monkeypatch, case):
    """`--resume` checks the sweep exists in the store and was of this study, grid and trials."""
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    stored = VALID
    if case == "other-study":
        stored = VALID.replace("name: broken", "name: another")
    if case == "other-grid":
        stored = VALID.replace("  g:\n", "  h:\n")
    uri, sweep_id = _store_with_a_sweep(tmp_path, stored, "h" if case == "other-grid" else "g")
    study = tmp_path / "study.yaml"
    text = VALID.replace("itl-ms: [1, 2]", "itl-ms: [1, 2, 3]") if case == "changed-grid" else VALID
    study.write_text(text)
    resume = "feedfacefeedface" if case == "unknown-id" else sweep_id
    db = tmp_path / "mlflow.db"
    db_before = db.read_bytes()
    before = {p.name for p in tmp_path.iterdir()}
    code, stderr, stdout = _sweep(tmp_path, ["--config", str(study), "--grid", "g", "--tracking-uri", uri,
                                             "--resume", resume])
    expected = {
        "unknown-id": f"no sweep with id 'feedfacefeedface' in {uri}",
        "other-study": f"sweep {sweep_id} is of study 'another', not 'broken' ({study})",
        "other-grid": f"sweep {sweep_id} ran grid 'h', not 'g'",
        "changed-grid": f"grid 'g' of {study} no longer expands to the trials of sweep {sweep_id} (1 new, 0 gone): "
                        "the study changed since the sweep started; start a new sweep",
    }[case]
    assert stderr == [f"error: --resume: {expected}"], stdout
    assert code == 2
    _assert_nothing_started(tmp_path, before)
    assert db.read_bytes() == db_before, "the store was written"


def test_an_invalid_results_file_is_one_line_and_exit_2(tmp_path):
    """`farm analyze --results` reads a results file the same way: one line, exit 2."""
    bad = tmp_path / "results.json"
    bad.write_text('{"profiles": {}, "runs": [\n')
    result = CliRunner().invoke(cli, ["analyze", "--results", str(bad)], catch_exceptions=False)
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [f"error: {bad}: line 2 column 1: not valid JSON: Expecting value"]


def test_the_farm_process_itself_prints_the_line_and_exits_2(tmp_path):
    """The same through `farm` as a process: stderr is the one line, no traceback, nothing written."""
    from conftest import run_farm

    study = tmp_path / "study.yaml"
    study.write_text(VALID)
    proc = run_farm("sweep", "--config", str(study), "--grid", "g", "--tracking-uri", "http://127.0.0.1:1",
                    cwd=tmp_path, env={"MLFLOW_TRACKING_URI": ""}, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == ["error: --tracking-uri: cannot reach the MLflow server at http://127.0.0.1:1 "
                                        "(connection refused)"]
    assert [p.name for p in tmp_path.iterdir()] == ["study.yaml"]


@pytest.mark.parametrize("command", [["report", "abc"], ["status"]])
@pytest.mark.parametrize("store, reason", [
    ("sqlite:///{tmp}/missing/mlflow.db", "the directory of the SQLite store does not exist"),
    ("sqlite:///{tmp}/mlflow.db", "there is no tracking store at"),
])
def test_reading_commands_never_create_a_store(tmp_path, command, store, reason):
    from conftest import run_farm

    proc = run_farm(*command, "--tracking-uri", store.format(tmp=tmp_path), cwd=tmp_path, timeout=120)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().startswith("error: --tracking-uri: " + reason), proc.stderr
    assert list(tmp_path.iterdir()) == []
