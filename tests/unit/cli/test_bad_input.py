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

from farm.cli.main import cli

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
    ("mock-admission-limit-zero", _edit("      ttft-ms: 5\n", "      ttft-ms: 5\n      admission-limit: 0\n"), [],
     "{study}: engines.mock.flags.admission-limit: expected a whole number >= 1, got 0"),
    ("exclude-names-nothing", _edit("          itl-ms: [1, 2]\n", "          itl-ms: [1, 2]\n        exclude: [{itl: 1}]\n"),
     [], "{study}: grids.g.blocks[0].exclude[0].itl: 'itl' is no axis, knob or flag of this block: the rule would "
         "match nothing"),
    ("two-blocks-one-name", _edit("          itl-ms: [1, 2]\n", "          itl-ms: [1, 2]\n"
                                  "      - {engine: mock, models: [tiny], name: a}\n"
                                  "      - {engine: mock, models: [tiny], name: a, flags: {itl-ms: 7}}\n"),
     [], "{study}: grids.g.blocks[2].name: 'a' names blocks[1] too: a name is one trial ('after' and --trial find it "
         "by it)"),
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
    ("unknown-strategy", _edit("name: broken\n", "name: broken\nstrategy: best\n"), [],
     "{study}: strategy: Input should be 'grid', 'halving' or 'local'"),
    ("negative-budget", _edit("name: broken\n", "name: broken\nstrategy: halving\nbudget_gpu_hours: -1\n"), [],
     "{study}: budget_gpu_hours: Input should be greater than 0"),
    ("equivalence-margin-zero", _edit("name: broken\n", "name: broken\nequivalence_margin: 0\n"), [],
     "{study}: equivalence_margin: Input should be greater than 0"),
    ("equivalence-margin-a-percentage", _edit("name: broken\n", "name: broken\nequivalence_margin: 3\n"), [],
     "{study}: equivalence_margin: Input should be less than 1"),
    ("equivalence-margin-text", _edit("name: broken\n", "name: broken\nequivalence_margin: 3 %\n"), [],
     "{study}: equivalence_margin: Input should be a valid number, unable to parse string as a number"),
    ("budget-without-halving", _edit("name: broken\n", "name: broken\nbudget_gpu_hours: 2\n"), [],
     "{study}: budget_gpu_hours: only with strategy: halving or local (a grid sweep runs every trial, whatever the budget)"),
    ("budget-option-zero", None, ["--strategy", "halving", "--budget", "0"],
     "--budget: expected GPU-hours above 0 and at most 1,000,000, got 0"),
    ("budget-option-with-grid", None, ["--budget", "1.5"],
     "--budget: only with --strategy halving or local (a grid sweep runs every trial, whatever the budget)"),
    ("halving-with-repeats-auto", None, ["--strategy", "halving", "--repeats", "auto"],
     "--strategy: --strategy halving plans its own rungs and repeats; it does not combine with --repeats auto"),
    ("accelerator-option-malformed", None, ["--accelerator", "H 200"],
     "--accelerator: expected a GPU model as Ray names it (e.g. H200, A100, RTX-PRO-6000) or auto, got 'H 200'"),
    ("accelerator-option-empty", None, ["--accelerator", ""], "--accelerator: expected a GPU model, got an empty value"),
    ("accelerator-option-with-dry-run", None, ["--accelerator", "-H200", "--dry-run"],
     "--accelerator: expected a GPU model as Ray names it (e.g. H200, A100, RTX-PRO-6000) or auto, got '-H200'"),
    ("accelerator-option-jobs-address", None, ["--accelerator", "H200;", "--address", "http://127.0.0.1:1"],
     "--accelerator: expected a GPU model as Ray names it (e.g. H200, A100, RTX-PRO-6000) or auto, got 'H200;'"),
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
     "{study}: grids.g.blocks[0].axes.ttft-ms: flag given twice (engine 'mock' already sets it)"),
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
    from farm.store import tracking
    from farm.study.grid import expand
    from farm.study.load import load_study

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
    monkeypatch.chdir(tmp_path)  # the store's artifacts (./mlruns) land here, not in the checkout
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


# -- the boundary (farm/inputs.py): every kind of input a person can plausibly hand farm -------

DEEP_JSON = "[" * 100_000 + "]" * 100_000  # deeper than Python's JSON parser recurses


def _write(tmp: Path, name: str, data: bytes | str) -> Path:
    path = tmp / name
    path.write_bytes(data.encode() if isinstance(data, str) else data)
    return path


# The four inputs issue 12 names, through `farm` as a real process: the exit code is the real one.
NAMED = [
    ("study-not-utf8", ["sweep", "--config", "latin1.yaml", "--grid", "g", "--dry-run"],
     {"latin1.yaml": VALID.replace("name: broken", "name: café").encode("latin-1")},
     "error: latin1.yaml: is not UTF-8 text (byte 0xe9 at line 1, column 10); farm reads UTF-8 only: save it as UTF-8"),
    ("results-nested-too-deep", ["analyze", "--results", "deep.json"], {"deep.json": DEEP_JSON.encode()},
     "error: deep.json: nested deeper than 32 levels"),
    ("tracking-scheme-unknown", ["sweep", "--config", "study.yaml", "--grid", "g", "--tracking-uri", "mlflow://head:5000"],
     {"study.yaml": VALID.encode()},
     "error: --tracking-uri: unsupported tracking URI scheme 'mlflow' in 'mlflow://head:5000' (farm takes "
     "sqlite:///PATH or http(s)://HOST[:PORT]; for another MLflow store, run an MLflow server in front of it)"),
    ("ray-address-unparsable", ["sweep", "--config", "study.yaml", "--grid", "g", "--address", "http://[::1"],
     {"study.yaml": VALID.encode()},
     "error: --address: 'http://[::1' is not a Ray address (HOST:PORT, ray://HOST:PORT, http://HEAD:8265 or auto) "
     "(Invalid IPv6 URL)"),
]


@pytest.mark.parametrize("args,files,expected", [c[1:] for c in NAMED], ids=[c[0] for c in NAMED])
def test_the_four_inputs_of_issue_12_are_one_line_and_exit_2_from_the_real_process(tmp_path, args, files, expected):
    from conftest import run_farm

    for name, data in files.items():
        _write(tmp_path, name, data)
    before = {p.name for p in tmp_path.iterdir()}
    proc = run_farm(*args, cwd=tmp_path, env={"MLFLOW_TRACKING_URI": ""}, timeout=120)
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert proc.stderr.splitlines() == [expected]
    assert {p.name for p in tmp_path.iterdir()} == before


def _big(tmp: Path, name: str, size: int) -> None:
    with open(tmp / name, "wb") as fh:  # sparse: costs no disk
        fh.truncate(size)


# (id, files to write (name -> bytes, or a callable(tmp)), arguments, expected line; {tmp} filled in)
STUDY_ARGS = ["sweep", "--config", "s.yaml", "--grid", "g", "--dry-run"]
BOUNDARY = [
    # study files: bytes, encodings, file kinds, sizes
    ("study-utf16", {"s.yaml": VALID.encode("utf-16")}, STUDY_ARGS,
     "s.yaml: is UTF-16 text; farm reads UTF-8 only: save it as UTF-8"),
    ("study-utf16-without-bom", {"s.yaml": VALID.encode("utf-16-le")}, STUDY_ARGS,
     "s.yaml: contains NUL bytes (it looks like UTF-16 text); farm reads UTF-8 only: save it as UTF-8"),
    ("study-binary", {"s.yaml": bytes(range(256))}, STUDY_ARGS,
     "s.yaml: contains NUL bytes (it looks like a binary file); farm reads UTF-8 only: save it as UTF-8"),
    ("study-control-character", {"s.yaml": VALID.replace("broken", "bro\x07ken")}, STUDY_ARGS,
     "s.yaml: line 1 column 10: character U+0007 is not allowed in YAML"),
    ("study-a-directory", {"s.yaml/x": b""}, STUDY_ARGS, "s.yaml: is a directory, not a study file"),
    ("study-a-fifo", lambda tmp: os.mkfifo(tmp / "s.yaml"), STUDY_ARGS, "s.yaml: is a FIFO (named pipe), not a study file"),
    ("study-a-device", {}, ["sweep", "--config", "/dev/zero", "--grid", "g", "--dry-run"],
     "/dev/zero: is a device, not a study file"),
    ("study-too-large", lambda tmp: _big(tmp, "s.yaml", 2 << 20), STUDY_ARGS,
     "s.yaml: is 2 MiB; a study file may be at most 1 MiB"),
    ("study-empty-path", {}, ["sweep", "--config", "", "--grid", "g"], "--config: expected a file, got an empty value"),
    # YAML structure
    ("study-nested-too-deep", {"s.yaml": "name: " + "[" * 5000 + "]" * 5000}, STUDY_ARGS,
     "s.yaml: line 1: nested deeper than 32 levels"),
    ("study-alias-bomb", {"s.yaml": "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{c}: &{c} [{', '.join(['*' + p] * 10)}]\n" for p, c in zip("abcde", "bcdef"))}, STUDY_ARGS,
     "s.yaml: line 5: expands to more than 100,000 values with its aliases followed"),
    ("study-recursive-alias", {"s.yaml": "name: &n [*n]\n"}, STUDY_ARGS,
     "s.yaml: line 1: an alias refers to the node that contains it (a recursive structure)"),
    ("study-infinity", {"s.yaml": VALID.replace("    requests: 4\n", "    requests: 4\n    rate: .inf\n")}, STUDY_ARGS,
     "s.yaml: profiles.p.rate: expected a finite number, got inf"),
    ("study-nan", {"s.yaml": VALID.replace("      ttft-ms: 5\n", "      ttft-ms: .nan\n")}, STUDY_ARGS,
     "s.yaml: engines.mock.flags.ttft-ms: expected a finite number, got nan"),
    ("study-huge-int", {"s.yaml": VALID.replace("requests: 4", "requests: 100000000000000000000")}, STUDY_ARGS,
     "s.yaml: profiles.p.requests: the number 1e+20 is out of range (at most 9223372036854775807 in size)"),
    ("study-int-of-5000-digits", {"s.yaml": VALID.replace("requests: 4", "requests: " + "9" * 5000)}, STUDY_ARGS,
     "s.yaml: a whole number in it has more than 4300 digits (out of range)"),
    ("include-not-a-name", {"s.yaml": "include: {a: 1}\n" + VALID}, STUDY_ARGS,
     "{tmp}/s.yaml: include: expected a file name or a list of file names"),
    ("include-a-directory", {"s.yaml": "include: inc\n" + VALID, "inc/x": b""}, STUDY_ARGS,
     "{tmp}/inc: is a directory, not a study file"),
    ("include-not-utf8", {"s.yaml": "include: inc.yaml\n" + VALID, "inc.yaml": "description: é\n".encode("latin-1")},
     STUDY_ARGS, "{tmp}/inc.yaml: is not UTF-8 text (byte 0xe9 at line 1, column 14); farm reads UTF-8 only: "
                 "save it as UTF-8"),
    # results files
    ("results-nan", {"r.json": '{"profiles": {"p": {"total_requests": NaN}}, "runs": []}'},
     ["analyze", "--results", "r.json"], "r.json: profiles.p.total_requests: expected a finite number, got NaN "
                                         "(JSON has no NaN or Infinity; write null for a missing value)"),
    ("results-1e999", {"r.json": '{"profiles": {}, "runs": [{"metrics": {"total_tps": 1e999}}]}'},
     ["analyze", "--results", "r.json"], "r.json: runs[0].metrics.total_tps: expected a finite number, got inf"),
    ("results-key-twice", {"r.json": '{"profiles": {}, "profiles": {}, "runs": []}'},
     ["analyze", "--results", "r.json"], "r.json: key 'profiles' given twice in one object"),
    ("results-a-directory", {"r.json/x": b""}, ["analyze", "--results", "r.json"],
     "r.json: is a directory, not a results file"),
    ("results-too-large", lambda tmp: _big(tmp, "r.json", 200 << 20), ["analyze", "--results", "r.json"],
     "r.json: is 200 MiB; a results file may be at most 128 MiB"),
    ("results-utf16", {"r.json": '{"profiles": {}, "runs": []}'.encode("utf-16")}, ["analyze", "--results", "r.json"],
     "r.json: is UTF-16 text; farm reads UTF-8 only: save it as UTF-8"),
    ("results-nested-33", {"r.json": '{"profiles": {}, "runs": [], "x": ' + "[" * 32 + "]" * 32 + "}"},
     ["analyze", "--results", "r.json"], "r.json: x" + "[0]" * 31 + ": nested deeper than 32 levels"),
    # tracking URIs
    ("tracking-file-store", {"s.yaml": VALID}, ["sweep", "--config", "s.yaml", "--grid", "g", "--tracking-uri", "./mlruns"],
     "--tracking-uri: './mlruns' is a file store, which MLflow 3 no longer opens: use sqlite:///PATH "
     "(`mlflow migrate-filestore` converts an old one) or http(s)://HOST:PORT"),
    ("tracking-databricks", {"s.yaml": VALID}, ["sweep", "--config", "s.yaml", "--grid", "g", "--tracking-uri", "databricks"],
     "--tracking-uri: 'databricks' is a file store, which MLflow 3 no longer opens: use sqlite:///PATH "
     "(`mlflow migrate-filestore` converts an old one) or http(s)://HOST:PORT"),
    ("tracking-credentials", {"s.yaml": VALID},
     ["sweep", "--config", "s.yaml", "--grid", "g", "--tracking-uri", "http://me:secret@head:5000"],
     "--tracking-uri: credentials do not go in the URI (MLflow would record them): set MLFLOW_TRACKING_USERNAME "
     "and MLFLOW_TRACKING_PASSWORD"),
    ("tracking-port-out-of-range", {"s.yaml": VALID},
     ["sweep", "--config", "s.yaml", "--grid", "g", "--tracking-uri", "http://head:99999"],
     "--tracking-uri: 'http://head:99999' is not a valid URL (Port out of range 0-65535)"),
    ("tracking-sqlite-memory", {"s.yaml": VALID}, ["sweep", "--config", "s.yaml", "--grid", "g", "--tracking-uri", "sqlite:///:memory:"],
     "--tracking-uri: 'sqlite:///:memory:' names no database file (expected sqlite:///PATH)"),
    ("tracking-sqlite-not-a-database", {"s.yaml": VALID, "notes.db": "hello"},
     ["sweep", "--config", "s.yaml", "--grid", "g", "--tracking-uri", "sqlite:///notes.db"],
     "--tracking-uri: notes.db is not a SQLite database"),
    ("tracking-empty", {"s.yaml": VALID}, ["sweep", "--config", "s.yaml", "--grid", "g", "--tracking-uri", ""],
     "--tracking-uri: expected a tracking URI (sqlite:///PATH or http(s)://HOST[:PORT]), got an empty value"),
    # Ray addresses
    ("ray-port-zero", {"s.yaml": VALID}, ["sweep", "--config", "s.yaml", "--grid", "g", "--address", "head:0"],
     "--address: 'head:0' is not a Ray address (HOST:PORT, ray://HOST:PORT, http://HEAD:8265 or auto): "
     "port 0 is not a server's port"),
    ("ray-client-without-port", {"s.yaml": VALID}, ["sweep", "--config", "s.yaml", "--grid", "g", "--address", "ray://head"],
     "--address: 'ray://head' is not a Ray address (HOST:PORT, ray://HOST:PORT, http://HEAD:8265 or auto)"),
    ("ray-unknown-scheme", {"s.yaml": VALID}, ["sweep", "--config", "s.yaml", "--grid", "g", "--address", "grpc://head:6379"],
     "--address: 'grpc://head:6379' is not a Ray address (HOST:PORT, ray://HOST:PORT, http://HEAD:8265 or auto)"),
    ("ray-bad-host", {"s.yaml": VALID}, ["sweep", "--config", "s.yaml", "--grid", "g", "--address", "he!ad:6379"],
     "--address: 'he!ad' is not a host name or IP address (in 'he!ad:6379')"),
    # ids, names, numbers
    ("resume-id-with-a-quote", {"s.yaml": VALID}, ["sweep", "--config", "s.yaml", "--grid", "g", "--resume", "x' OR '1"],
     "--resume: 'x' OR '1' is not a sweep id (the run id farm printed: letters, digits, - and _)"),
    ("report-id-with-a-space", {}, ["report", "a b"],
     "SWEEP_ID: 'a b' is not a sweep id (the run id farm printed: letters, digits, - and _)"),
    ("repeats-zero", {"s.yaml": VALID}, ["sweep", "--config", "s.yaml", "--grid", "g", "--repeats", "0"],
     "--repeats: expected a whole number from 1 to 1000000, got 0"),
    ("repeats-inf", {"s.yaml": VALID}, ["sweep", "--config", "s.yaml", "--grid", "g", "--repeats", "inf"],
     "--repeats: expected a whole number from 1 to 1000000, got 'inf'"),
    ("run-budget-huge", {"s.yaml": VALID}, ["sweep", "--config", "s.yaml", "--grid", "g", "--repeats", "auto",
                                           "--run-budget", "1" + "0" * 40],
     "--run-budget: expected a whole number from 1 to 1000000, got one of 41 digits"),
    ("run-budget-without-auto", {"s.yaml": VALID}, ["sweep", "--config", "s.yaml", "--grid", "g", "--run-budget", "10"],
     "--run-budget: only with --repeats auto (or a study with repeats: auto); this sweep runs each profile 1 time(s), "
     "whatever the budget"),
    ("no-wait-here", {"s.yaml": VALID}, ["sweep", "--config", "s.yaml", "--grid", "g", "--no-wait"],
     "--no-wait: only with --address http://HEAD:8265 (a sweep run from here always waits for its end)"),
    ("experiment-empty", {"s.yaml": VALID}, ["sweep", "--config", "s.yaml", "--grid", "g", "--experiment", " "],
     "--experiment: ' ' is not a name farm can put in a file or folder name (letters, digits, '.', '_' and '-', "
     "not starting with '.' or '-', at most 100 characters)"),
    ("workdir-a-file", {"s.yaml": VALID, "runs": "x"}, ["sweep", "--config", "s.yaml", "--grid", "g", "--workdir", "runs"],
     "--workdir: runs exists and is not a directory"),
    ("server-port-out-of-range", {}, ["server", "--port", "70000"], "--port: expected a whole number from 1 to 65535, got 70000"),
    ("server-workers-zero", {}, ["server", "--workers", "0"], "--workers: expected a whole number from 1 to 64, got 0"),
    ("server-host-bad", {}, ["server", "--host", "my host"], "--host: 'my host' is not a host name or IP address (in 'my host')"),
    ("server-store-a-file", {"store": "x"}, ["server", "--store", "store"], "--store: store exists and is not a directory"),
    ("server-auth-cache-without-auth", {}, ["server", "--auth-cache-s", "30"],
     "--auth-cache-s: only with --auth (it caches the basic-auth app's password checks)"),
    ("server-auth-cache-over-an-hour", {}, ["server", "--auth", "--auth-cache-s", "3601"],
     "--auth-cache-s: expected a whole number from 0 to 3600, got 3601"),
    ("server-auth-cache-negative", {}, ["server", "--auth", "--auth-cache-s", "-1"],
     "--auth-cache-s: expected a whole number from 0 to 3600, got -1"),
]

# Inputs that the property test (tests/unit/cli/test_fuzz_inputs.py) found failing, kept as explicit cases:
# its minimal examples, run against the code before farm/inputs.py existed (a UnicodeDecodeError
# and a RecursionError traceback; @reproduce_failure('6.170.17', b'AEEFQQBhgA==') and
# b'AEEHQge+QQBBAA==' with its derandomized settings).
FOUND_BY_FUZZING = [
    ("fuzz-study-one-byte-0x80", {"s.yaml": b"\x80"}, STUDY_ARGS,
     "s.yaml: is not UTF-8 text (byte 0x80 at line 1, column 1); farm reads UTF-8 only: save it as UTF-8"),
    ("fuzz-results-1982-levels", {"r.json": "[" * 1982 + "1" + "]" * 1982}, ["analyze", "--results", "r.json"],
     "r.json: nested deeper than 32 levels"),
]


@pytest.mark.parametrize("files,args,expected", [c[1:] for c in BOUNDARY + FOUND_BY_FUZZING],
                         ids=[c[0] for c in BOUNDARY + FOUND_BY_FUZZING])
def test_every_kind_of_bad_input_is_one_line_and_exit_2(tmp_path, monkeypatch, files, args, expected):
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.chdir(tmp_path)
    if callable(files):
        files(tmp_path)
    else:
        for name, data in files.items():
            (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
            _write(tmp_path, name, data)
    before = {p.name for p in tmp_path.iterdir()}
    result = CliRunner().invoke(cli, args, catch_exceptions=False)
    assert result.stderr.splitlines() == ["error: " + expected.replace("{tmp}", str(tmp_path))], result.output
    assert result.exit_code == 2
    _assert_nothing_started(tmp_path, before)


def test_a_utf8_study_with_a_byte_order_mark_is_read(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _write(tmp_path, "s.yaml", "\ufeff" + VALID)
    result = CliRunner().invoke(cli, STUDY_ARGS, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert "2 trials" in result.output or "trial" in result.output


@pytest.mark.parametrize("name, value, args, expected", [
    ("MLFLOW_TRACKING_URI", "foo://bar", ["status"],
     "MLFLOW_TRACKING_URI: unsupported tracking URI scheme 'foo' in 'foo://bar' (farm takes sqlite:///PATH or "
     "http(s)://HOST[:PORT]; for another MLflow store, run an MLflow server in front of it)"),
    ("MLFLOW_TRACKING_URI", "http://[::1", ["sweep", "--config", "s.yaml", "--grid", "g"],
     "MLFLOW_TRACKING_URI: 'http://[::1' is not a valid URL (Invalid IPv6 URL)"),
    ("RAY_ADDRESS", "http://[::1", ["status", "--tracking-uri", "sqlite:///mlflow.db"],
     "RAY_ADDRESS: 'http://[::1' is not a Ray address (HOST:PORT, ray://HOST:PORT, http://HEAD:8265 or auto) "
     "(Invalid IPv6 URL)"),
    ("FARM_CACHE_DIR", "{tmp}/cache", ["sweep", "--config", "s.yaml", "--grid", "g"],
     "FARM_CACHE_DIR: {tmp}/cache is not a directory"),
    ("RAY_AUTH_TOKEN", "tok\nen", ["sweep", "--config", "s.yaml", "--grid", "g", "--address", "http://127.0.0.1:9",
                                   "--tracking-uri", "http://127.0.0.1:9"],
     "--address: RAY_AUTH_TOKEN holds a token with spaces, line breaks or non-ASCII characters inside it (Ray sends "
     "it in an HTTP header: copy it again with `ray get-auth-token`)"),
    ("RAY_AUTH_TOKEN_PATH", "/dev/zero", ["sweep", "--config", "s.yaml", "--grid", "g", "--address",
                                          "http://127.0.0.1:9", "--tracking-uri", "http://127.0.0.1:9"],
     "--address: RAY_AUTH_TOKEN_PATH names /dev/zero, which cannot be used: is a device, not a token file"),
])
def test_environment_variables_farm_reads_are_checked_like_options(tmp_path, monkeypatch, name, value, args, expected):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    _write(tmp_path, "s.yaml", VALID)
    _write(tmp_path, "cache", "a file, not a directory")
    if "sqlite:///mlflow.db" in args:  # a store that exists, so that status reaches the address
        from farm.store import tracking

        tracking.client(f"sqlite:///{tmp_path / 'mlflow.db'}").search_experiments()
    monkeypatch.setenv(name, value.replace("{tmp}", str(tmp_path)))
    before = {p.name for p in tmp_path.iterdir()}
    result = CliRunner().invoke(cli, args, catch_exceptions=False)
    assert result.stderr.splitlines() == ["error: " + expected.replace("{tmp}", str(tmp_path))], result.output
    assert result.exit_code == 2
    _assert_nothing_started(tmp_path, before)
