"""A refusal names where the value came from (issue 29): the option, the environment variable
that set it (MLFLOW_TRACKING_URI, RAY_ADDRESS, FARM_CACHE_DIR), or farm's default when the user
named nothing. The same mistake reads differently depending on who made it: a user who never typed
`--tracking-uri` is not told to fix it."""

from __future__ import annotations

import pytest

from refusals import mock_study, refused

STUDY = mock_study("sources")
SWEEP = ["sweep", "--config", "s.yaml", "--grid", "g"]

CASES = [
    ("env-store-directory-missing", SWEEP, {"MLFLOW_TRACKING_URI": "sqlite:///nowhere/mlflow.db"},
     "MLFLOW_TRACKING_URI: the directory of the SQLite store does not exist: nowhere"),
    ("env-store-unreachable-status", ["status"], {"MLFLOW_TRACKING_URI": "http://127.0.0.1:1"},
     "MLFLOW_TRACKING_URI: cannot reach the MLflow server at http://127.0.0.1:1 (connection refused)"),
    ("env-store-unknown-scheme-report", ["report", "abc"], {"MLFLOW_TRACKING_URI": "ftp://head/x"},
     "MLFLOW_TRACKING_URI: unsupported tracking URI scheme 'ftp' in 'ftp://head/x'"),
    ("env-store-not-sqlite", SWEEP + ["--repeats", "1"], {"MLFLOW_TRACKING_URI": "sqlite:///notes.db"},
     "MLFLOW_TRACKING_URI: notes.db is not a SQLite database"),
    ("the-option-over-the-env", SWEEP + ["--tracking-uri", "sqlite:///gone/x.db"],
     {"MLFLOW_TRACKING_URI": "sqlite:///mlflow.db"}, "--tracking-uri: the directory of the SQLite store does not exist: gone"),
    ("env-ray-address-status", ["status"], {"RAY_ADDRESS": "head-without-port"},
     "RAY_ADDRESS: 'head-without-port' is not a Ray address"),
    ("env-ray-address-sweep", SWEEP, {"RAY_ADDRESS": "head-without-port"},
     "RAY_ADDRESS: 'head-without-port' is not a Ray address"),
    ("env-ray-address-unreachable-sweep", SWEEP, {"RAY_ADDRESS": "127.0.0.1:1", "RAY_AUTH_MODE": "disabled"},
     "RAY_ADDRESS: cannot reach the Ray cluster at 127.0.0.1:1 (connection refused)"),
    ("the-address-option-over-the-env", SWEEP + ["--address", "127.0.0.1:1"],
     {"RAY_ADDRESS": "head-without-port", "RAY_AUTH_MODE": "disabled"},
     "--address: cannot reach the Ray cluster at 127.0.0.1:1 (connection refused)"),
    ("env-cache-dir-a-file", SWEEP, {"FARM_CACHE_DIR": "s.yaml"}, "FARM_CACHE_DIR: s.yaml is not a directory"),
]


@pytest.mark.parametrize("args,env,expected", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_a_refusal_names_the_variable_or_option_that_set_the_value(tmp_path, args, env, expected):
    line = refused(tmp_path, args, {"s.yaml": STUDY, "notes.db": "not a database"}, env=env)
    assert line.startswith(expected), line


@pytest.mark.parametrize("args", [["status"], ["report", "abc"]], ids=["status", "report"])
def test_the_default_store_is_named_as_the_default_not_as_an_option(tmp_path, args):
    line = refused(tmp_path, args)
    assert line == (f"the default store (no --tracking-uri or MLFLOW_TRACKING_URI given): there is no tracking "
                    f"store at {tmp_path.resolve() / 'mlflow.db'}")


@pytest.mark.parametrize("args", [["status"], ["report", "abc"]], ids=["status", "report"])
def test_a_store_from_the_environment_that_is_not_mlflow_names_the_variable(tmp_path, args):
    line = refused(tmp_path, args, {"empty.db": b""}, env={"MLFLOW_TRACKING_URI": "sqlite:///empty.db"})
    assert line == "MLFLOW_TRACKING_URI: empty.db is an empty file, not an MLflow store (a sweep writes one)"


def test_a_store_from_the_environment_without_a_sweep_names_the_variable(tmp_path):
    from mlflow.tracking import MlflowClient

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    MlflowClient(uri).search_experiments()  # an MLflow store, with no sweep in it
    line = refused(tmp_path, ["status"], env={"MLFLOW_TRACKING_URI": uri})
    assert line == f"MLFLOW_TRACKING_URI: no sweep in {uri}"
