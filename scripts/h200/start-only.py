"""Start one trial's engine exactly as farm's actor would, wait until it is ready, stop it.

For capacity lines on a lent GPU when a full trial does not fit the time left: the log of the
start (what the engine says it can hold) is what farm's adapters parse, and the parsing tests
want it from the real machine. Nothing is measured, nothing goes to MLflow.

    python scripts/h200/start-only.py CONFIG GRID TRIAL_NAME OUT_DIR
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from actors.proc import EngineProcess, clean_env, expand_env, free_port
from actors.tokenizer import cache_dir
from farm.engines import get_engine
from farm.study.grid import expand
from farm.study.load import load_study


def main(config: str, grid: str, name: str, out: str) -> int:
    study = load_study(config)
    trial = next((t for t in expand(study, grid) if t.label == name or t.id == name), None)
    if trial is None:
        print(f"{config}: grid {grid} has no trial {name}", file=sys.stderr)
        return 2
    spec = study.engines[trial.engine]
    engine = get_engine(trial.engine)
    caches = engine.cache_env(cache_dir() / "compile")
    wanted = engine.env(spec, trial)
    env = clean_env(dict(os.environ), {**{k: v for k, v in caches.items() if k not in wanted},
                                       **expand_env(wanted, dict(os.environ))})
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
        print(f"{name}: ready in {ready_s:.0f} s; reported {engine.reported_capacity(proc_log(out_dir))}")
    except Exception as exc:  # the log is the finding either way
        print(f"{name}: not ready after {time.monotonic() - started:.0f} s: {exc}")
    finally:
        proc.stop()
    return 0


def proc_log(out_dir: Path) -> str:
    return (out_dir / "engine.log").read_text(errors="replace")


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:5]))
