"""Nothing starts before every local path is usable (issue 29): a `--workdir`, `--out`, `--plots`,
`--store` or FARM_CACHE_DIR that exists as a file, lies under a file, or cannot be made or written
is refused in one line before Ray, MLflow or an engine starts, and nothing is made to find out."""

from __future__ import annotations

import os

import pytest

from refusals import mock_study, refused

STUDY = mock_study("paths")
SWEEP = ["sweep", "--config", "s.yaml", "--grid", "g"]
FILES = {"s.yaml": STUDY, "notes.txt": "a file", "r.json": '{"profiles": {}, "runs": []}'}

CASES = [
    ("workdir-under-a-file", SWEEP + ["--workdir", "notes.txt/runs"], None,
     "--workdir: notes.txt/runs cannot be made: {tmp}/notes.txt on its path is a file, not a directory"),
    ("workdir-deep-under-a-file", SWEEP + ["--workdir", "notes.txt/a/b/c"], None,
     "--workdir: notes.txt/a/b/c cannot be made: {tmp}/notes.txt on its path is a file, not a directory"),
    ("workdir-a-file", SWEEP + ["--workdir", "notes.txt"], None, "--workdir: notes.txt exists and is not a directory"),
    ("workdir-under-a-file-dry-run", SWEEP + ["--dry-run", "--workdir", "notes.txt/runs"], None,
     "--workdir: notes.txt/runs cannot be made: {tmp}/notes.txt on its path is a file, not a directory"),
    ("report-out-under-a-file", ["report", "abc", "--out", "notes.txt/report"], None,
     "--out: notes.txt/report cannot be made: {tmp}/notes.txt on its path is a file, not a directory"),
    ("analyze-plots-under-a-file", ["analyze", "--results", "r.json", "--plots", "r.json/plots"], None,
     "--plots: r.json/plots cannot be made: {tmp}/r.json on its path is a file, not a directory"),
    ("server-store-under-a-file", ["server", "--store", "notes.txt/store"], None,
     "--store: notes.txt/store cannot be made: {tmp}/notes.txt on its path is a file, not a directory"),
    ("store-under-a-file", SWEEP + ["--tracking-uri", "sqlite:///notes.txt/mlflow.db"], None,
     "--tracking-uri: the SQLite store notes.txt/mlflow.db cannot be made: notes.txt on its path is a file, not a "
     "directory"),
    ("store-from-the-environment-under-a-file", ["status"], {"MLFLOW_TRACKING_URI": "sqlite:///notes.txt/a/mlflow.db"},
     "MLFLOW_TRACKING_URI: the SQLite store notes.txt/a/mlflow.db cannot be made: notes.txt on its path is a file, "
     "not a directory"),
    ("cache-dir-under-a-file", SWEEP, {"FARM_CACHE_DIR": "notes.txt/cache"},
     "FARM_CACHE_DIR: notes.txt/cache cannot be made: {tmp}/notes.txt on its path is a file, not a directory"),
]


@pytest.mark.parametrize("args,env,expected", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_a_path_that_cannot_be_a_directory_is_refused_before_anything_starts(tmp_path, args, env, expected):
    assert refused(tmp_path, args, FILES, env=env) == expected.format(tmp=tmp_path)


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes anywhere: a read-only directory is writable to it")
@pytest.mark.parametrize("option,args", [("--workdir", SWEEP), ("--out", ["report", "abc"]),
                                         ("--plots", ["analyze", "--results", "r.json"])])
def test_a_directory_that_cannot_be_written_is_refused(tmp_path, option, args):
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        line = refused(tmp_path, args + [option, "locked/sub"], FILES)
    finally:
        locked.chmod(0o700)
    assert line == f"{option}: locked/sub cannot be made: {locked} is not writable"
