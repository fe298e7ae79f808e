"""Start one trial's engine exactly as farm's actor would, wait until it is ready, stop it.

For capacity lines on a lent GPU when a full trial does not fit the time left: the log of the
start (what the engine says it can hold) is what farm's adapters parse, and the parsing tests
want it from the real machine. Nothing is benchmarked, nothing goes to MLflow.

    python scripts/h200/start-only.py CONFIG GRID TRIAL_NAME OUT_DIR [PACKS_DIR]

The engine's compile cache is the actor's: the trial's compile-group directory in farm's node
cache. With PACKS_DIR (the packs a sweep published, or carried from another machine:
scripts/h200/device.sh) the group's pack is pulled first where the node has none, and a cold
start publishes its pack there, as the actor does (actors/compile_cache.py): a start on a fresh
machine from a carried cache, measured without a trial's runs. `start.json` in OUT_DIR says cold or warm, what was pulled, and the
phases farm reads from the engine's log.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from actors import compile_cache
from actors.bench import _gpu_name
from actors.proc import EngineProcess, clean_env, expand_env, free_port
from actors.tokenizer import cache_dir
from farm.analysis.start_phases import start_cache, start_phases
from farm.engines import get_engine
from farm.study.grid import expand
from farm.study.load import load_study


def pull(engine, trial, packs: str | None, reported: dict) -> tuple[str | None, Path]:
    """The trial's compile group and its directory in the node cache, the group's pack pulled first
    from `packs` where the node has none of it (as the actor pulls it: actors/bench.py)."""
    group = compile_cache.group_key(engine, trial, _gpu_name([]) if trial.gpus else None)
    group_dir = cache_dir() / "compile" / group if group else cache_dir() / "compile"
    if group:
        reported["compile_cache_group"] = group
    if packs and group and not compile_cache.has_files(group_dir):
        reported.update(compile_cache.pull_group(compile_cache.DirStore(packs), group, group_dir))
    return group, group_dir


def publish(engine, trial, group: str | None, group_dir: Path, packs: str | None, reported: dict) -> None:
    """After a start that compiled, the group's pack into `packs`, as the actor publishes it."""
    if packs and group and compile_cache.compiled_here(reported, group_dir):
        reported.update(compile_cache.publish_group(compile_cache.DirStore(packs), group_dir, group, engine.name,
                                                    _gpu_name([]) if trial.gpus else None))


def main(config: str, grid: str, name: str, out: str, packs: str | None = None) -> int:
    study = load_study(config)
    trial = next((t for t in expand(study, grid) if t.label == name or t.id == name), None)
    if trial is None:
        print(f"{config}: grid {grid} has no trial {name}", file=sys.stderr)
        return 2
    spec = study.engines[trial.engine]
    engine = get_engine(trial.engine)
    reported: dict = {}
    group, group_dir = pull(engine, trial, packs, reported)
    wanted = engine.env(spec, trial)
    caches = {k: v for k, v in engine.cache_env(group_dir, trial.all_flags).items() if k not in wanted}
    reported["compile_cache_cold"] = compile_cache.cache_dirs_cold(caches)
    env = clean_env(dict(os.environ), {**caches, **expand_env(wanted, dict(os.environ))})
    port = free_port(spec.host)
    argv = engine.command(spec, trial, port=port)
    out_dir = Path(out)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "command.txt").write_text(" ".join(argv) + "\n")
    proc = EngineProcess(argv, env, out_dir / "engine.log")
    started = time.monotonic()
    proc.start()
    try:
        ready_s = proc.wait_ready(f"http://{spec.host}:{port}{engine.ready_path}", spec.ready_timeout_s,
                                  fatal=engine.classify)
        reported["ready_s"] = ready_s
        print(f"{name}: ready in {ready_s:.0f} s; reported {engine.reported_capacity(proc_log(out_dir))}")
    except Exception as exc:  # the log is the finding either way
        print(f"{name}: not ready after {time.monotonic() - started:.0f} s: {exc}")
    finally:
        proc.stop()
    reported.update(engine.reported_startup(proc_log(out_dir)))
    publish(engine, trial, group, group_dir, packs, reported)
    facts = {"trial": name, "start": start_cache(reported), "phases": start_phases(reported), **reported}
    (out_dir / "start.json").write_text(json.dumps(facts, indent=1, default=str) + "\n")
    print(f"{name}: {facts['start']} start; pulled {reported.get('compile_cache_pulled')}; phases {facts['phases']}")
    return 0


def proc_log(out_dir: Path) -> str:
    return (out_dir / "engine.log").read_text(errors="replace")


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:6]))
