"""The quality gate's task is read once a sweep: by the checks before it starts
(farm/run/preflight.py's `check_sweep`, where a bad task is one line naming its file and line), which
hand the job down to the driver (`quality_jobs(..., job)`), which reads nothing again. On the
committed study configs/tiny-answers-vllm-cpu.yaml and the tiny model's 400 items."""

from __future__ import annotations

from pathlib import Path

import pytest

import farm.analysis.quality_verdicts as quality_verdicts
from farm.analysis.quality_verdicts import quality_jobs, study_job
from farm.errors import UserError
from farm.run.preflight import check_sweep
from farm.study.grid import expand
from farm.study.load import load_study

REPO = Path(__file__).resolve().parents[3]
CONFIG = REPO / "configs" / "tiny-answers-vllm-cpu.yaml"


@pytest.fixture
def reads(monkeypatch):
    """The task files read from now on."""
    seen: list[Path] = []
    real = quality_verdicts.read_task

    def counted(path, **kw):
        seen.append(Path(path))
        return real(path, **kw)

    monkeypatch.setattr(quality_verdicts, "read_task", counted)
    return seen


def _check(study, trials, tmp_path, address=None):
    return check_sweep(study, trials, grid="gate", address=address, tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}",
                       resume=None)


def test_the_preflight_reads_the_task_once_and_the_driver_answers_with_it(tmp_path, monkeypatch, reads):
    monkeypatch.setenv("FARM_CACHE_DIR", str(tmp_path / "cache"))
    study = load_study(CONFIG)
    trials = expand(study, "gate")
    expected = quality_jobs(study, trials)  # the driver on its own reads the task itself
    assert len(reads) == 1
    reads.clear()
    checks = _check(study, trials, tmp_path)
    assert checks.point is None and checks.quality is not None and len(checks.quality.items) == 400
    assert [p.resolve() for p in reads] == [REPO / "models" / "tiny-answers" / "eval.jsonl"]
    assert quality_jobs(study, trials, checks.quality) == expected
    assert len(reads) == 1  # the driver read nothing again


def test_a_bad_task_is_still_one_line_before_anything_starts(tmp_path, monkeypatch):
    monkeypatch.setenv("FARM_CACHE_DIR", str(tmp_path / "cache"))
    task = tmp_path / "eval.jsonl"
    task.write_text('{"id": "a", "prompt": "1+1=", "answer": "2"}\nnot json\n')
    study = load_study(CONFIG)
    study = study.model_copy(update={"quality": study.quality.model_copy(update={"task": str(task), "items": 2})})
    with pytest.raises(UserError) as err:
        _check(study, expand(study, "gate"), tmp_path)
    assert "\n" not in str(err.value) and str(task) in str(err.value) and "line 2" in str(err.value)


def test_no_quality_section_reads_nothing_and_hands_down_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("FARM_CACHE_DIR", str(tmp_path / "cache"))
    study = load_study(CONFIG)
    study = study.model_copy(update={"quality": None})
    checks = _check(study, expand(study, "gate"), tmp_path)
    assert checks.quality is None and study_job(study) is None


def test_farm_sweep_hands_the_job_it_read_to_the_driver(tmp_path, monkeypatch, reads):
    """`farm sweep` up to the driver (stood in for: no Ray here): the task read once, the job passed on."""
    from click.testing import CliRunner

    import farm.run.driver as driver
    from farm.cli.main import cli

    class Started(Exception):
        pass

    given: dict = {}

    def run_sweep(plan, events=None):
        given["quality_job"] = plan.quality_job
        raise Started

    monkeypatch.setattr(driver, "run_sweep", run_sweep)
    monkeypatch.setenv("FARM_CACHE_DIR", str(tmp_path / "cache"))
    got = CliRunner().invoke(cli, ["sweep", "--config", str(CONFIG), "--grid", "gate", "--tracking-uri",
                                   f"sqlite:///{tmp_path / 'mlflow.db'}", "--workdir", str(tmp_path / "runs")])
    assert isinstance(got.exception, Started), got.output
    assert len(reads) == 1 and given["quality_job"] is not None and len(given["quality_job"].items) == 400
