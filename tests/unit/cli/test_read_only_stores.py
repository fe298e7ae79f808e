"""Commands that only read (farm status, farm report) refuse a SQLite file that is not an MLflow
store in one line, and leave it byte for byte as it was (MLflow would write its schema into it)."""

from __future__ import annotations

import hashlib
import sqlite3

import pytest

from conftest import run_farm


def _other_tools_db(path):
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)")
    con.execute("INSERT INTO notes (body) VALUES ('mine')")
    con.commit()
    con.close()


@pytest.mark.parametrize("command", [["status"], ["report", "0" * 32]])
@pytest.mark.parametrize("make, words", [(_other_tools_db, "is not an MLflow store"),
                                         (lambda p: p.write_bytes(b""), "is an empty file, not an MLflow store")])
def test_a_database_that_is_not_an_mlflow_store_is_refused_and_left_as_it_was(tmp_path, command, make, words):
    db = tmp_path / "other.db"
    make(db)
    before = hashlib.sha256(db.read_bytes()).hexdigest()
    proc = run_farm(*command, "--tracking-uri", f"sqlite:///{db}", cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith("error: --tracking-uri: ") and words in line and "Traceback" not in proc.stderr
    assert hashlib.sha256(db.read_bytes()).hexdigest() == before
