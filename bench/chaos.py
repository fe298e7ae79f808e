"""Chaos: a real mock sweep while engines, drivers and the tracking server are killed at random
points; then resumed until it is finished, and counted from the store (issue 51).

    python bench/chaos.py                       # 50 iterations, seed 51
    python bench/chaos.py --iterations 3 --seed 7 --keep

Each iteration, in a fresh temporary folder: a `farm server` (MLflow tracking server) on a store of
its own, and a `farm sweep` of three mock trials (two at a time, one short profile) against it, the
driver in a process group of its own (its local Ray inside it). One fault, of a kind dealt in turn
from a seeded shuffle, at a random point:

- driver: the driver's process group is killed outright (SIGKILL) at a random second of the sweep;
- engine: one trial's engine (its pid from the trial's workdir, `engine.pid`, as the actor writes
  it; never a name) is killed (SIGKILL) a random time after it started;
- server: the tracking server's process group is killed (SIGKILL) at a random second, kept down a
  random while, then started again on the same store and port.

Then `farm sweep --resume SWEEP_ID` (or, where the driver died before the sweep's run existed, the
sweep again) until the sweep's run is finished and every trial has a final answer, at most
`--max-resumes` times. The store is then counted, trial by trial of the grid, over the sweep's
active child runs (MLflow's deleted runs, which a resume drops, are not counted):

- once: exactly one child run carries the trial's id, and its status is final (ok, or a recorded
  failure such as engine_crashed; not a transient one, which a resume runs again);
- lost: no child run with the trial's id has a final status;
- duplicated: a final status, and more than one child run carries the trial's id.

A table per fault kind follows (and `--json FILE` keeps every iteration's facts). Every process
this script starts is in a process group it stops; what a killed driver left (its engines, their
watchdogs, guidellm clients) is found by a mark in their environment (FARM_CHAOS_MARK), counted as
left behind and stopped. Ctrl-C stops everything, then prints the table so far.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "scripts"))  # the scripts' shared helpers (health.py)

KINDS = ("driver", "engine", "server")
GRID = "g"
# Three mock trials, two at a time, one short profile: a clean sweep takes about 40 s on 2 cores.
STUDY = """\
name: chaos
primary_profile: p
models: {tiny: {name: farm-tiny, tokenizer: "farm:tiny"}}
engines: {mock: {ready_timeout_s: 90}}
profiles:
  p: {data: {kind: synthetic, prompt_tokens: 16, output_tokens: 8}, rate: 1000, requests: 8,
      max_concurrency: 4, max_seconds: 60}
grids:
  g:
    max_concurrent_trials: 2
    blocks:
      - {engine: mock, models: [tiny], name: a, flags: {ttft-ms: 5, itl-ms: 100}}
      - {engine: mock, models: [tiny], name: b, flags: {ttft-ms: 6, itl-ms: 100}}
      - {engine: mock, models: [tiny], name: c, flags: {ttft-ms: 7, itl-ms: 100}}
"""


# -- counting (the store's answer) -------------------------------------------------------------

@dataclass
class Count:
    """How the store holds a sweep's grid trials (each trial in exactly one of once, lost, duplicated)."""

    trials: int = 0
    once: int = 0
    lost: int = 0
    duplicated: int = 0
    failed: int = 0     # of the trials with a final answer: a recorded failure, not ok
    strays: int = 0     # child runs whose trial id is not of the grid
    lost_ids: list[str] = field(default_factory=list)
    duplicated_ids: list[str] = field(default_factory=list)


def count_trials(runs: list[tuple[str, str | None]], grid_ids: list[str], final: set[str]) -> Count:
    """`runs`: (trial id, status tag or None) of each active child run of the sweep; `final`: the
    statuses that are a trial's final answer (farm.analysis.outcome.FINISHED)."""
    by_trial: dict[str, list[str | None]] = {}
    for trial_id, status in runs:
        by_trial.setdefault(trial_id, []).append(status)
    c = Count(trials=len(grid_ids), strays=sum(len(v) for k, v in by_trial.items() if k not in set(grid_ids)))
    for trial_id in grid_ids:
        statuses = by_trial.get(trial_id, [])
        answers = [s for s in statuses if s in final]
        if not answers:
            c.lost += 1
            c.lost_ids.append(trial_id)
        elif len(statuses) > 1:
            c.duplicated += 1
            c.duplicated_ids.append(trial_id)
        else:
            c.once += 1
        if answers and answers[-1] != "ok":
            c.failed += 1
    return c


def store_runs(uri: str, sweep_id: str) -> list[tuple[str, str | None]]:
    """(trial id, status) of every active child run of the sweep (MLflow's default view: deleted
    runs are not in it)."""
    from farm.store import schema as S
    from farm.store.tracking import trial_runs

    return [(r.data.tags.get(S.TRIAL_TAG, ""), r.data.tags.get(S.STATUS_TAG)) for r in trial_runs(uri, sweep_id)]


def count_store(uri: str, sweep_id: str, grid_ids: list[str]) -> Count:
    from farm.analysis.outcome import FINISHED

    return count_trials(store_runs(uri, sweep_id), grid_ids, {s.value for s in FINISHED})


def sweep_runs(uri: str, experiment: str) -> list:
    """The sweep runs (parents) of an experiment, oldest first."""
    from farm.store import schema as S
    from farm.store.tracking import client

    c = client(uri)
    exp = c.get_experiment_by_name(experiment)
    runs = c.search_runs([exp.experiment_id], filter_string=f"tags.`{S.KIND_TAG}` = '{S.KIND_SWEEP}'") if exp else []
    return sorted(runs, key=lambda r: r.info.start_time or 0)


# -- processes ---------------------------------------------------------------------------------

class Group:
    """A process this script started in a session (process group) of its own."""

    registry: list["Group"] = []

    def __init__(self, argv: list[str], *, cwd: Path, env: dict[str, str], log: Path):
        with open(log, "ab") as out:
            self.proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, start_new_session=True)
        self.log = log
        Group.registry.append(self)

    def kill(self, sig: int = signal.SIGKILL) -> None:
        try:
            os.killpg(self.proc.pid, sig)
        except ProcessLookupError:
            pass

    def stop(self, grace: float = 8) -> int | None:
        """SIGTERM to the group, a grace period, SIGKILL to what is left of it."""
        if self.proc.poll() is None:
            self.kill(signal.SIGTERM)
            try:
                self.proc.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                pass
        self.kill(signal.SIGKILL)
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            pass
        if self in Group.registry:
            Group.registry.remove(self)
        return self.proc.returncode


def marked_pids(mark: str) -> list[int]:
    """Processes whose environment holds `mark` (NAME=VALUE): what this iteration's drivers started,
    down to engines and their watchdogs (every one of them inherits the drivers' environment)."""
    pids = []
    needle = mark.encode()
    for environ in Path("/proc").glob("[0-9]*/environ"):
        try:
            if needle in environ.read_bytes().split(b"\0") and int(environ.parent.name) != os.getpid():
                pids.append(int(environ.parent.name))
        except (OSError, ValueError):  # gone meanwhile, or not ours to read
            continue
    return pids


def alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def engines(workdir: Path) -> list[int]:
    """The pids of every engine an iteration's trials started (every attempt's `engine.pid`)."""
    pids = []
    for path in Path(workdir).glob("*/*/attempt-*/engine.pid"):
        text = path.read_text().split()
        if len(text) == 2:
            pids.append(int(text[0]))
    return pids


def engine_of(workdir: Path, trial_id: str) -> int | None:
    """The pid of a trial's engine from the newest attempt folder's `engine.pid` (the actor writes it)."""
    found = [p for p in Path(workdir).glob(f"*/{trial_id}/attempt-*/engine.pid")]
    if not found:
        return None
    text = max(found, key=lambda p: p.stat().st_mtime_ns).read_text().split()
    return int(text[0]) if len(text) == 2 else None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """`farm server` (MLflow's tracking server) on one store and port for the whole run; each
    iteration's sweep is in an experiment of its own. Killed and started again on the same store
    and port by a server fault."""

    def __init__(self, store: Path, env: dict[str, str], log: Path):
        self.store, self.env, self.log, self.port = store, env, log, free_port()
        self.uri = f"http://127.0.0.1:{self.port}"
        self.group: Group | None = None
        self.start()

    def start(self, timeout: float = 180) -> None:
        from health import wait_healthy  # scripts/health.py

        self.group = Group([sys.executable, "-m", "farm.cli", "server", "--store", str(self.store), "--port",
                            str(self.port), "--workers", "1"], cwd=self.log.parent, env=self.env, log=self.log)
        if wait_healthy(self.group.proc, f"{self.uri}/health", timeout, interval_s=0.3,
                        request_timeout_s=5) == "ready":
            return
        self.group.stop()
        raise RuntimeError(f"farm server did not come up on port {self.port}: see {self.log}")

    def crash(self) -> None:
        self.group.kill(signal.SIGKILL)
        self.group.stop()

    def stop(self) -> None:
        if self.group is not None:
            self.group.stop()


# -- one iteration -----------------------------------------------------------------------------

@dataclass
class Iteration:
    n: int
    kind: str
    fault: str = ""                 # what was done, when (or why nothing was: the sweep had ended)
    hit: bool = False               # the fault happened while the sweep ran
    drivers: list[int] = field(default_factory=list)  # exit codes, first driver first
    resumes: int = 0
    finished: bool = False          # the sweep's run finished and every trial has a final answer
    sweeps: int = 0                 # sweep runs in the store (a driver killed before its run existed: 0 then 1)
    left_behind: int = 0            # engines (or, with --ray own, any process of a driver) alive 30 s after the last driver ended
    seconds: float = 0.0
    first_driver_s: float = 0.0     # how long the first driver ran
    count: Count = field(default_factory=Count)
    statuses: dict[str, list[str | None]] = field(default_factory=dict)
    folder: str = ""


def _env(mark: str, ray_tmp: Path | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAY_", "MLFLOW_TRACKING"))}
    key, value = mark.split("=", 1)
    return {**env, key: value, "RAY_USAGE_STATS_ENABLED": "0", **({"RAY_TMPDIR": str(ray_tmp)} if ray_tmp else {})}


def _fault(kind: str, rng: random.Random, *, driver: Group, server: Server, workdir: Path,
           grid_ids: list[str], window: float) -> tuple[str, bool]:
    """Do one fault of `kind` while `driver` runs; returns (what was done, whether it hit the sweep)."""
    t0 = time.monotonic()

    def wait(seconds: float) -> bool:  # False: the driver ended first
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            if driver.proc.poll() is not None:
                return False
            time.sleep(0.05)
        return driver.proc.poll() is None

    if kind == "none":  # the clean sweep that measures the window
        return "none", False
    if kind == "driver":
        at = rng.uniform(1.0, window)
        if not wait(at):
            return f"driver ended at {time.monotonic() - t0:.0f} s, before its kill at {at:.1f} s", False
        driver.kill(signal.SIGKILL)
        return f"driver's group SIGKILLed at {at:.1f} s", True
    if kind == "engine":
        trial = rng.choice(grid_ids)
        delay = rng.uniform(0.0, 8.0)
        pid = None
        while pid is None:
            pid = engine_of(workdir, trial)
            if pid is None and not wait(0.1):
                return f"driver ended before trial {trial}'s engine started", False
        if not wait(delay):
            return f"driver ended before trial {trial}'s engine was {delay:.1f} s old", False
        if not alive(pid):
            return f"trial {trial}'s engine (pid {pid}) had ended before its kill at {delay:.1f} s", False
        os.kill(pid, signal.SIGKILL)
        return f"trial {trial}'s engine (pid {pid}) SIGKILLed {delay:.1f} s after it started " \
               f"({time.monotonic() - t0:.0f} s into the sweep)", True
    if kind == "server":
        at, down = rng.uniform(1.0, window), rng.uniform(1.0, 30.0)
        if not wait(at):
            return f"driver ended at {time.monotonic() - t0:.0f} s, before the server's kill at {at:.1f} s", False
        server.crash()
        time.sleep(down)
        server.start()
        return f"server's group SIGKILLed at {at:.1f} s, down {down:.1f} s, started again", True
    raise ValueError(kind)


def run_iteration(n: int, kind: str, rng: random.Random, *, window: float, max_resumes: int, keep: bool,
                  driver_timeout: float, address: str | None, server: Server) -> Iteration:
    """One sweep, one fault, resumes until it is finished, the count. `address`: a Ray head the
    drivers join (None: each driver starts a local Ray of its own, inside its process group)."""
    from farm.study.grid import expand
    from farm.study.load import load_study

    it = Iteration(n=n, kind=kind)
    started = time.monotonic()
    tmp = Path(tempfile.mkdtemp(prefix=f"farm-chaos-{n:02d}-"))
    # a Ray of a driver's own: its folder short (Ray's socket paths are limited to 107 bytes)
    ray_tmp = None if address else Path(tempfile.mkdtemp(prefix="farm-rt-", dir="/tmp"))
    it.folder = str(tmp)
    mark = f"FARM_CHAOS_MARK={os.getpid()}-{n}-{rng.getrandbits(32):08x}"
    env = _env(mark, ray_tmp)
    study = tmp / "chaos.yaml"
    study.write_text(STUDY)
    grid_ids = [t.id for t in expand(load_study(str(study)), GRID)]
    uri, experiment = server.uri, f"chaos-{n:02d}-{os.getpid()}"
    workdir = tmp / "w"
    args = [sys.executable, "-m", "farm.cli", "sweep", "--config", str(study), "--grid", GRID, "--tracking-uri", uri,
            "--experiment", experiment, "--workdir", str(workdir), *(["--address", address] if address else [])]
    drivers: list[Group] = []

    def run_driver(extra: list[str]) -> Group:
        d = Group([*args, *extra], cwd=tmp, env=env, log=tmp / f"driver-{len(drivers)}.out")
        drivers.append(d)
        return d

    def finish(d: Group) -> int:
        try:
            d.proc.wait(timeout=driver_timeout)
        except subprocess.TimeoutExpired:  # a hang: a finding of its own (its exit code says -9)
            d.kill(signal.SIGKILL)
        return d.stop()

    try:
        first = run_driver([])
        t_first = time.monotonic()
        it.fault, it.hit = _fault(kind, rng, driver=first, server=server, workdir=workdir, grid_ids=grid_ids,
                                  window=window)
        it.drivers.append(finish(first))
        it.first_driver_s = time.monotonic() - t_first
        while True:
            sweeps = sweep_runs(uri, experiment)
            if sweeps:
                sweep = sweeps[-1]
                count = count_store(uri, sweep.info.run_id, grid_ids)
                done = sweep.info.status == "FINISHED" and count.lost == 0
                if done or it.resumes >= max_resumes:
                    break
                extra = ["--resume", sweep.info.run_id, "--wait-lease", "300"]
            elif it.resumes >= max_resumes:
                break
            else:
                extra = []  # the driver died before its sweep's run existed: the sweep again, from nothing
            it.resumes += 1
            it.drivers.append(finish(run_driver(extra)))
        it.sweeps = len(sweeps)
        if sweeps:
            sweep = sweeps[-1]
            it.count = count_store(uri, sweep.info.run_id, grid_ids)
            it.finished = sweep.info.status == "FINISHED" and it.count.lost == 0
            for trial_id, status in store_runs(uri, sweep.info.run_id):
                it.statuses.setdefault(trial_id, []).append(status)
        else:
            it.count = Count(trials=len(grid_ids), lost=len(grid_ids), lost_ids=list(grid_ids))
    finally:
        for d in drivers:
            d.stop()
        # A dead driver's engines end with its actors (Ray kills the actors a dead driver owned;
        # each engine's watchdog stops its group once its actor is gone, within its grace period).
        deadline = time.monotonic() + 30
        while any(alive(p) for p in engines(workdir)) and time.monotonic() < deadline:
            time.sleep(0.5)
        left = {p for p in engines(workdir) if alive(p)}
        if address is None:  # everything a driver started here carries the iteration's mark
            left |= {p for p in marked_pids(mark) if alive(p)}
        it.left_behind = len(left)
        for pid in left:  # ours by their mark: stopped by pid, never by name
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if ray_tmp is not None:
            shutil.rmtree(ray_tmp, ignore_errors=True)
        it.seconds = time.monotonic() - started
        anomaly = it.count.lost or it.count.duplicated or not it.finished or it.left_behind
        if not keep and not anomaly:
            shutil.rmtree(tmp, ignore_errors=True)
    return it


def calibrate(keep: bool, driver_timeout: float, address: str | None, server: Server) -> float:
    """Seconds a clean sweep of the study takes here: faults are placed within it."""
    it = run_iteration(0, "none", random.Random(0), window=1, max_resumes=0, keep=keep, driver_timeout=driver_timeout,
                       address=address, server=server)
    if not it.finished or it.count.once != it.count.trials or it.left_behind:
        raise SystemExit(f"the clean sweep did not finish with every trial once and nothing left behind ({it})")
    return it.first_driver_s


def start_head(mark: str, log_dir: Path):
    """`ray start --head` on free ports in a process group of its own (tests/raynodes.py): the
    Ray every driver of the run joins, as a cluster's head is."""
    sys.path.insert(0, str(REPO / "tests"))
    from raynodes import start_node

    return start_node(_env(mark), head=True, num_cpus=4, log_dir=log_dir)


# -- the table ---------------------------------------------------------------------------------

def versions() -> dict[str, str]:
    import importlib.metadata as md

    out = {}
    for name in ("farm", "guidellm", "mlflow", "ray"):
        try:
            out[name] = md.version(name)
        except md.PackageNotFoundError:
            out[name] = "not installed"
    return out


def machine() -> str:
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor() or "unknown CPU")
    return f"{cpu}, {os.cpu_count()} cores, Linux {platform.release()}, Python {platform.python_version()}"


def table(iterations: list[Iteration]) -> str:
    head = ("fault", "iterations", "hit", "trials", "once", "lost", "duplicated", "failed (recorded)",
            "resumes (max)", "sweeps finished", "left behind", "s / iteration")
    rows = []
    for kind in (*KINDS, "all"):
        its = [i for i in iterations if kind in ("all", i.kind)]
        if not its:
            continue
        rows.append((kind, len(its), sum(i.hit for i in its), sum(i.count.trials for i in its),
                     sum(i.count.once for i in its), sum(i.count.lost for i in its),
                     sum(i.count.duplicated for i in its), sum(i.count.failed for i in its),
                     f"{sum(i.resumes for i in its)} ({max(i.resumes for i in its)})",
                     sum(i.finished for i in its), sum(i.left_behind for i in its),
                     f"{sum(i.seconds for i in its) / len(its):.0f}"))
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(str(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def findings(iterations: list[Iteration]) -> list[str]:
    out = []
    for i in iterations:
        if i.count.lost or i.count.duplicated or not i.finished:
            out.append(f"iteration {i.n} ({i.kind}: {i.fault}): lost {i.count.lost_ids}, duplicated "
                       f"{i.count.duplicated_ids}, finished {i.finished}, drivers' exit codes {i.drivers}; "
                       f"the store's child runs (trial id: statuses) {i.statuses}; kept in {i.folder}")
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--iterations", type=int, default=50)
    parser.add_argument("--seed", type=int, default=51)
    parser.add_argument("--kinds", default=",".join(KINDS), help="fault kinds to deal, comma-separated")
    parser.add_argument("--window", type=float, default=None,
                        help="seconds of the sweep a driver or server kill falls in (default: a clean sweep's time)")
    parser.add_argument("--max-resumes", type=int, default=3)
    parser.add_argument("--driver-timeout", type=float, default=600, help="seconds a driver may run before it counts as hung")
    parser.add_argument("--ray", choices=("shared", "own"), default="shared",
                        help="shared: one Ray head for the run, every driver joins it (--address), as on a cluster; "
                             "own: every driver starts a local Ray of its own (about 20 s more a driver on 2 cores)")
    parser.add_argument("--keep", action="store_true", help="keep every iteration's folder (kept anyway on a finding)")
    parser.add_argument("--json", type=Path, help="write every iteration's facts here (JSON lines)")
    args = parser.parse_args()
    kinds = [k for k in args.kinds.split(",") if k]
    if args.iterations < 1 or not kinds or set(kinds) - set(KINDS):
        parser.error(f"--iterations: at least 1; --kinds: of {', '.join(KINDS)}")

    def on_term(signum, frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_term)
    rng = random.Random(args.seed)
    deal = [kinds[i % len(kinds)] for i in range(args.iterations)]
    rng.shuffle(deal)
    info = versions()
    print(f"farm {info['farm']}, guidellm {info['guidellm']}, mlflow {info['mlflow']}, ray {info['ray']}; {machine()}",
          flush=True)
    done: list[Iteration] = []
    head = server = None
    run_dir = Path(tempfile.mkdtemp(prefix="farm-chaos-run-"))
    try:
        address = None
        if args.ray == "shared":
            # Ctrl-C held back while the head starts: an interrupt inside start_node would leave a
            # head running that nothing here holds a handle to (it comes once `head` is set).
            signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
            try:
                head = start_head(f"FARM_CHAOS_MARK={os.getpid()}-head", run_dir)
            finally:
                signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM})
            address = f"127.0.0.1:{head.ports['gcs']}"
            print(f"Ray head at {address} (log in {run_dir})", flush=True)
        server = Server(run_dir / "store", _env(f"FARM_CHAOS_MARK={os.getpid()}-server"), run_dir / "server.log")
        print(f"farm server at {server.uri} (store and log in {run_dir})", flush=True)
        window = args.window
        if window is None:
            window = calibrate(args.keep, args.driver_timeout, address, server)
            print(f"a clean sweep's driver ran {window:.0f} s: driver and server kills fall within it",
                  flush=True)
        for n, kind in enumerate(deal, 1):
            it = run_iteration(n, kind, random.Random(rng.getrandbits(64)), window=window,
                               max_resumes=args.max_resumes, keep=args.keep, driver_timeout=args.driver_timeout,
                               address=address, server=server)
            done.append(it)
            c = it.count
            print(f"[{n}/{len(deal)}] {kind}: {it.fault}; drivers {it.drivers}; once {c.once}/{c.trials}, lost {c.lost}, "
                  f"duplicated {c.duplicated}, failed {c.failed}; {it.left_behind} left behind; {it.seconds:.0f} s",
                  flush=True)
            if args.json:
                with open(args.json, "a") as fh:
                    fh.write(json.dumps(asdict(it)) + "\n")
    except KeyboardInterrupt:
        print("interrupted: stopping what this script started", file=sys.stderr)
        for group in list(Group.registry):
            group.stop(grace=2)
    finally:
        if server is not None:
            server.stop()
        if head is not None:
            head.stop()
    print()
    print(table(done))
    lines = findings(done)
    for line in lines:
        print("finding:", line)
    if not lines and not args.keep:
        shutil.rmtree(run_dir, ignore_errors=True)
    return 0 if done and all(i.count.lost == 0 and i.count.duplicated == 0 for i in done) else 1


if __name__ == "__main__":
    sys.exit(main())
