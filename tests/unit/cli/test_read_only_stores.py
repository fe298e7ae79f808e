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


# -- a damaged store and a store on read-only media (issue 51 item 4) --------------------------
# On the vLLM CPU search's committed store (bench/vllm-cpu/from-command/store.tgz): a real MLflow
# SQLite store that holds one sweep.

CPU_SWEEP = "c9d8eae5738142059994fd6419d149a9"
OTHER_STUDY = """\
name: other
primary_profile: p
models: {tiny: {name: farm-tiny, tokenizer: "farm:tiny"}}
engines: {mock: {}}
profiles: {p: {data: {kind: synthetic, prompt_tokens: 16, output_tokens: 8}, rate: 1000, requests: 8}}
grids: {g: {blocks: [{engine: mock, models: [tiny], name: a}]}}
"""


@pytest.fixture(scope="module")
def cpu_store(tmp_path_factory):
    import tarfile

    from conftest import REPO

    folder = tmp_path_factory.mktemp("cpu-store")
    with tarfile.open(REPO / "bench/vllm-cpu/from-command/store.tgz") as tar:
        tar.extractall(folder, filter="data")
    return folder


def _copy_store(src, dst):
    import shutil

    shutil.copytree(src, dst)
    return dst / "mlflow.db"


def _overwrite(db, start, end):
    raw = bytearray(db.read_bytes())
    raw[start:end] = b"A" * (min(end, len(raw)) - start)
    db.write_bytes(bytes(raw))


PAGE = 4096  # the store's page size
DAMAGE = [
    # the schema's pages and what follows them overwritten: no table can be read
    ("schema-pages", lambda db: _overwrite(db, 2 * PAGE, 200 * PAGE)),
    # cut short, as a copy that stopped midway
    ("truncated", lambda db: db.write_bytes(db.read_bytes()[:50 * PAGE])),
    # only the last pages (the runs' rows and indexes): the schema reads, the sweep's lookups fail
    ("runs-pages", lambda db: _overwrite(db, 250 * PAGE, 10**9)),
]


@pytest.mark.parametrize("damage", [d[1] for d in DAMAGE], ids=[d[0] for d in DAMAGE])
def test_a_damaged_store_is_said_to_be_damaged_by_every_command(tmp_path, cpu_store, damage):
    """`--resume`, `farm report` and `farm status` on a damaged SQLite store say it is damaged, in
    one line naming the store and exit 2; none says the sweep does not exist. The undamaged copy
    does hold the sweep (the resume gets as far as its study's name)."""
    (tmp_path / "s.yaml").write_text(OTHER_STUDY)
    good = _copy_store(cpu_store, tmp_path / "good")
    resume = ["sweep", "--config", "s.yaml", "--grid", "g", "--resume", CPU_SWEEP, "--tracking-uri"]
    proc = run_farm(*resume, f"sqlite:///{good}", cwd=tmp_path)
    assert proc.returncode == 2 and f"sweep {CPU_SWEEP} is of study 'tiny-vllm-cpu', not 'other'" in proc.stderr

    db = _copy_store(cpu_store, tmp_path / "damaged")
    damage(db)
    for command in (resume, ["report", CPU_SWEEP, "--tracking-uri"], ["status", CPU_SWEEP, "--tracking-uri"]):
        proc = run_farm(*command, f"sqlite:///{db}", cwd=tmp_path)
        assert proc.returncode == 2, (command, proc.stdout + proc.stderr)
        (line,) = proc.stderr.strip().splitlines()
        assert line.startswith(f"error: --tracking-uri: {db} is damaged: "), (command, line)
        assert line.endswith("restore it from a copy") and "no sweep" not in line and "Traceback" not in proc.stderr


def _make_read_only(folder, db):
    """Makes the store's folder and file read-only by the strongest means this machine allows: the
    files' modes where the tests do not run as root; as root (whom modes do not stop), the
    immutable attribute where the filesystem has it (it stops root). Returns how, and the undo;
    "none" where neither holds (root on a filesystem without the attribute): the test then rests
    on the store's bytes, times and folder being unchanged."""
    import os
    import subprocess

    if os.geteuid() != 0:
        db.chmod(0o444)
        folder.chmod(0o555)
        return "modes", lambda: (folder.chmod(0o755), db.chmod(0o644))
    made = subprocess.run(["chattr", "+i", str(db), str(folder)], capture_output=True)
    if made.returncode == 0:
        return "immutable", lambda: subprocess.run(["chattr", "-i", str(db), str(folder)], check=True)
    return "none", lambda: None


def test_read_only_commands_read_a_store_on_read_only_media_and_write_nothing(tmp_path, cpu_store):
    """`farm report` and `farm status` read a store whose folder and file cannot be written (was:
    "the SQLite store is not writable"), and leave every byte, time and file of it as it was: no
    journal, no WAL. A sweep, which writes the store, is still refused there in one line."""
    import os

    db = _copy_store(cpu_store, tmp_path / "media")
    folder = db.parent
    (tmp_path / "s.yaml").write_text(OTHER_STUDY)

    def state():
        return (hashlib.sha256(db.read_bytes()).hexdigest(), os.stat(db).st_mtime_ns,
                sorted(p.name for p in folder.iterdir()), os.stat(folder).st_mtime_ns)

    before = state()
    how, undo = _make_read_only(folder, db)
    try:
        if how != "none":  # the mechanism holds: a write is refused
            with pytest.raises(OSError):
                (folder / "probe").write_text("x")
        uri = f"sqlite:///{db}"
        report = run_farm("report", CPU_SWEEP, "--tracking-uri", uri, cwd=tmp_path)
        assert report.returncode == 0, report.stderr
        assert "max-num-seqs=16" in report.stdout and report.stderr == ""
        status = run_farm("status", CPU_SWEEP, "--tracking-uri", uri, cwd=tmp_path)
        assert status.returncode == 0, status.stderr
        assert f"sweep {CPU_SWEEP} (tiny-vllm-cpu" in status.stdout and "3 done" in status.stdout
        if how != "none":
            sweep = run_farm("sweep", "--config", "s.yaml", "--grid", "g", "--tracking-uri", uri, cwd=tmp_path)
            assert sweep.returncode == 2
            assert sweep.stderr.strip() == f"error: --tracking-uri: the SQLite store is not writable: {db}"
    finally:
        undo()
    assert state() == before


_HOLD_LOCK = """
import sqlite3, sys, time
con = sqlite3.connect(sys.argv[1], isolation_level=None)
con.execute("BEGIN EXCLUSIVE")
con.execute("UPDATE runs SET name = name")
print("locked", flush=True)
time.sleep(300)
"""


def test_a_locked_store_is_said_to_be_locked_not_damaged(tmp_path, cpu_store):
    """A store another process holds the write lock of (BEGIN EXCLUSIVE, held) is "locked by another
    process" after a short wait, for `--resume`, `farm report` and `farm status`: not damaged, not
    without the sweep. Once the lock is let go, the same store reads."""
    import subprocess
    import sys

    db = _copy_store(cpu_store, tmp_path / "locked")
    (tmp_path / "s.yaml").write_text(OTHER_STUDY)
    holder = subprocess.Popen([sys.executable, "-c", _HOLD_LOCK, str(db)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        for command in (["sweep", "--config", "s.yaml", "--grid", "g", "--resume", CPU_SWEEP, "--tracking-uri"],
                        ["report", CPU_SWEEP, "--tracking-uri"], ["status", CPU_SWEEP, "--tracking-uri"]):
            proc = run_farm(*command, f"sqlite:///{db}", cwd=tmp_path)
            assert proc.returncode == 2, (command, proc.stdout + proc.stderr)
            (line,) = proc.stderr.strip().splitlines()
            assert line == (f"error: --tracking-uri: {db} is locked by another process, which held its write lock "
                            f"for 5 s: try again once that process is done (nothing was read or written)"), line
    finally:
        holder.kill()
        holder.wait()
    status = run_farm("status", CPU_SWEEP, "--tracking-uri", f"sqlite:///{db}", cwd=tmp_path)
    assert status.returncode == 0 and "3 done" in status.stdout, status.stderr
