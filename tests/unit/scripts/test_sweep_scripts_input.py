"""The scripts that measure a stored sweep (bench/makespan_measured.py, scripts/h200/gpu_visibility.py):
a mistake in what they are given is one line and exit 2, and no MLflow store is created; the
committed H200 store (bench/h200/store.tgz) gives the figure the README quotes."""

from __future__ import annotations

import re
import subprocess
import sys
import tarfile

import pytest

from conftest import REPO

H200_SWEEP = "aa0e8ed837734ac3bb3a11f5178e8f9e"
SCRIPTS = {
    "makespan": ["bench/makespan_measured.py", "--gpus", "1"],
    "visibility": ["scripts/h200/gpu_visibility.py", "--samples", "{tmp}/s.csv", "--gpus-list", "{tmp}/g.txt"],
}


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("h200-store")
    with tarfile.open(REPO / "bench/h200/store.tgz") as tar:
        tar.extractall(tmp, filter="data")
    return tmp


def _run(script, sweep_id, uri, tmp):
    (tmp / "s.csv").write_text("")
    (tmp / "g.txt").write_text("")
    path, *rest = SCRIPTS[script]
    argv = [sys.executable, str(REPO / path), sweep_id, "--tracking-uri", uri, *(a.format(tmp=tmp) for a in rest)]
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, cwd=tmp)


@pytest.mark.parametrize("script", sorted(SCRIPTS))
def test_an_unknown_sweep_is_one_line_and_exit_2(script, store, tmp_path):
    proc = _run(script, "0" * 32, f"sqlite:///{store / 'mlflow.db'}", tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().splitlines()[-1].endswith(f"error: SWEEP_ID: no sweep with id '{'0' * 32}' in "
                                                         f"sqlite:///{store / 'mlflow.db'}")
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize("script", sorted(SCRIPTS))
def test_a_missing_store_is_one_line_and_is_not_created(script, tmp_path):
    proc = _run(script, H200_SWEEP, f"sqlite:///{tmp_path / 'mlflow.db'}", tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert f"there is no tracking store at {tmp_path / 'mlflow.db'}" in proc.stderr.strip().splitlines()[-1]
    assert "Traceback" not in proc.stderr and not (tmp_path / "mlflow.db").exists()


def test_the_committed_h200_sweep_gives_the_quoted_efficiency(store, tmp_path):
    """What the script prints of the committed store holds together (each sitting's efficiency is
    its ideal over its makespan, the sittings hold every span of GPU use), and every figure the H200
    README quotes from it is one the script prints."""
    proc = _run("makespan", H200_SWEEP, f"sqlite:///{store / 'mlflow.db'}", tmp_path)
    assert proc.returncode == 0, proc.stderr
    head = re.search(r"(\d+) span\(s\) of GPU use", proc.stdout)
    sittings = [line.split() for line in proc.stdout.splitlines() if line.strip()[:1].isdigit()]
    assert head and sittings, proc.stdout
    for _, _, makespan, ideal, efficiency, _ in sittings:
        assert int(ideal) <= int(makespan) and float(efficiency) == round(int(ideal) / int(makespan), 2)
    assert sum(int(s[1]) for s in sittings) == int(head.group(1))
    printed = {(int(s[2]), int(s[3]), s[4]) for s in sittings}
    readme = " ".join((REPO / "bench/h200/README.md").read_text().split())
    quoted = re.findall(r"([\d,]+) s makespan against ([\d,]+) s ideal, efficiency (\d\.\d\d)", readme)
    assert quoted
    for makespan, ideal, efficiency in quoted:
        assert (int(makespan.replace(",", "")), int(ideal.replace(",", "")), efficiency) in printed
