"""Compile-cache packs travel from one lent H200 to the next (issue "Warm starts"): the real
scripts, on real files, as the device calls run them (scripts/h200/device.sh `packs-out` cuts a
machine's packs into parts that fit what a call brings back; scripts/h200/packs.sh collects them
here; `stage` carries them; `run` puts them together first), with the machine's folder and $OUT in
a tmp dir. A part that changed on the way is refused and the packs are left out: the sweep starts
cold, never fails."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from conftest import REPO

DEVICE, PACKS = REPO / "scripts/h200/device.sh", REPO / "scripts/h200/packs.sh"
PART = 1024 * 1024  # parts of 1 MiB here (16 MiB on the H200): the same cutting, smaller files


def _sh(script: Path, *args: str, cwd: Path, machine: Path | None = None, out: Path | None = None) -> str:
    env = {**os.environ, "FARM_H200_PACK_PART_BYTES": str(PART)}
    if machine:
        env["FARM_H200_DIR"] = str(machine)
    if out:
        env["OUT"] = str(out)
    done = subprocess.run(["bash", str(script), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


@pytest.fixture
def machine_with_packs(tmp_path):
    """A machine whose sweeps published two groups' packs (one of 4.5 MiB: five parts)."""
    machine = tmp_path / "h200-a"
    packs = machine / "packs"
    packs.mkdir(parents=True)
    for key, size in (("vllm-aaaa", 4 * PART + PART // 2), ("vllm-bbbb", 1000)):
        (packs / f"{key}.tgz").write_bytes(os.urandom(size))
        (packs / f"{key}.json").write_text(f'{{"key": "{key}", "bytes": {size}}}')
    repo = tmp_path / "repo-a"
    repo.mkdir()
    return machine, repo


def test_packs_come_back_in_parts_and_start_the_next_machine_with_the_same_files(tmp_path, machine_with_packs):
    machine, repo_a = machine_with_packs
    first = _sh(DEVICE, "packs-out", cwd=repo_a, machine=machine, out=tmp_path / "call-1")
    assert "parts 0-2 of 5" in first and "next: packs-out 3" in first
    # what one call brings back: three parts and the manifest, each part within its size
    back = sorted(p.name for p in (tmp_path / "call-1").iterdir())
    assert back == ["packs.manifest", "packs.part000", "packs.part001", "packs.part002"]
    assert all((tmp_path / "call-1" / p).stat().st_size <= PART for p in back)

    here = tmp_path / "here"
    here.mkdir()
    status = _sh(PACKS, "collect", str(tmp_path / "call-1"), cwd=here)
    assert "3 of 5 parts" in status and "2 compile group(s)" in status and "device.sh packs-out 3" in status

    second = _sh(DEVICE, "packs-out", "3", cwd=repo_a, machine=machine, out=tmp_path / "call-2")
    assert "parts 3-4 of 5" in second and "all sent" in second
    status = _sh(PACKS, "collect", str(tmp_path / "call-1"), str(tmp_path / "call-2"), cwd=here)
    assert "5 of 5 parts" in status and "missing" not in status
    carry = _sh(PACKS, "carry", cwd=here).splitlines()
    assert len(carry) == 2 and all(".h200/packs/packs.manifest" in line for line in carry)

    # the next machine: `stage` takes the carried parts, `run` puts them together before the sweep
    fresh = tmp_path / "h200-b"
    said = _sh(DEVICE, "packs-in", cwd=here, machine=fresh)
    assert "2 pack(s) carried" in said
    for f in (machine / "packs").iterdir():
        assert (fresh / "packs" / f.name).read_bytes() == f.read_bytes()


def test_a_part_changed_on_the_way_leaves_the_packs_out(tmp_path, machine_with_packs):
    machine, repo_a = machine_with_packs
    here = tmp_path / "here"
    here.mkdir()
    _sh(DEVICE, "packs-out", cwd=repo_a, machine=machine, out=tmp_path / "call-1")
    _sh(DEVICE, "packs-out", "3", cwd=repo_a, machine=machine, out=tmp_path / "call-2")
    _sh(PACKS, "collect", str(tmp_path / "call-1"), str(tmp_path / "call-2"), cwd=here)
    part = here / ".h200/packs/packs.part001"
    data = bytearray(part.read_bytes())
    data[100] ^= 0xFF
    part.write_bytes(bytes(data))
    fresh = tmp_path / "h200-b"
    said = _sh(DEVICE, "packs-in", cwd=here, machine=fresh)
    assert "does not match its sha256" in said and "starting cold" in said
    assert not any((fresh / "packs").glob("*.tgz"))


def test_parts_not_all_carried_yet_start_cold_and_say_how_many(tmp_path, machine_with_packs):
    machine, repo_a = machine_with_packs
    here = tmp_path / "here"
    here.mkdir()
    _sh(DEVICE, "packs-out", cwd=repo_a, machine=machine, out=tmp_path / "call-1")
    _sh(PACKS, "collect", str(tmp_path / "call-1"), cwd=here)
    said = _sh(DEVICE, "packs-in", cwd=here, machine=tmp_path / "h200-b")
    assert "2 part(s) not carried yet" in said
    assert not any((tmp_path / "h200-b" / "packs").glob("*.tgz"))


def test_collect_without_a_manifest_is_one_line_and_exit_2(tmp_path):
    done = subprocess.run(["bash", str(PACKS), "collect", str(tmp_path)], cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 2 and done.stderr.strip().count("\n") == 0 and "no packs.manifest" in done.stderr
    assert not (tmp_path / ".h200").exists()


def test_a_machine_without_packs_sends_nothing(tmp_path):
    (tmp_path / "repo").mkdir()
    said = _sh(DEVICE, "packs-out", cwd=tmp_path / "repo", machine=tmp_path / "m", out=tmp_path / "o")
    assert "no pack" in said and not any((tmp_path / "o").iterdir())


def test_prepare_restores_the_store_and_starts_no_sweep(tmp_path):
    """`device.sh prepare` readies a fresh machine (installs, the carried store) without starting
    the sweep, so the `run` after it starts its trial at once and a trial of ~9 minutes fits in
    that one call: a machine lost between calls then costs no trial in flight."""
    import tarfile

    machine, repo = tmp_path / "h200", tmp_path / "repo"
    for name in ("farm-node", "engine-vllm"):  # installed by an earlier call of this machine
        (machine / "tree" / name).mkdir(parents=True)
        (machine / "tree" / name / ".installed").touch()
    (machine / "facts" / "vllm").mkdir(parents=True)
    (machine / "facts" / "vllm" / "help.txt").write_text("--help of an earlier call\n")
    (repo / ".h200").mkdir(parents=True)
    store = tmp_path / "store"
    store.mkdir()
    (store / "mlflow.db").write_bytes(b"SQLite format 3\x00")
    (store / "sweep-id").write_text("a" * 32 + "\n")
    (store / "sweep-id.sglang").write_text("b" * 32 + "\n")  # each grid's sweep has an id file of its own
    with tarfile.open(repo / ".h200" / "store.tgz", "w:gz") as tar:
        for f in store.iterdir():
            tar.add(f, arcname=f.name)
    said = _sh(DEVICE, "prepare", cwd=repo, machine=machine)
    # every grid's sweep is named: a SGLang sitting saw only seed's id and took it for the wrong sweep
    assert f"store restored from .h200/store.tgz (sweep-id {'a' * 32}; sweep-id.sglang {'b' * 32}; )" in said
    assert "no sweep started" in said
    assert (machine / "store" / "mlflow.db").is_file()
    assert not (machine / "job.pid").exists() and not (machine / "sweep.log").exists()
