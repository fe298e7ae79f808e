"""Did each trial's engine use exactly its GPUs, and did trials share a machine's GPUs at once?

On a lent machine of several GPUs, sweep-job.sh samples `nvidia-smi --query-compute-apps` every
5 s into gpu-apps.csv (`time,pid,pgid,gpu_uuid,used_MiB`) and `nvidia-smi -L` into gpus.txt. An
engine runs in its own process group (its `engine_pid`), so the GPUs its processes held are the
samples of that group. Each trial's Ray-given ids (CUDA_VISIBLE_DEVICES, the result's `gpus`)
name the GPUs it should hold; they are physical indices, as nvidia-smi -L numbers them.

    python scripts/h200/gpu_visibility.py SWEEP_ID --tracking-uri URI --samples gpu-apps.csv --gpus-list gpus.txt

Prints one line per trial (expected GPUs, GPUs its engine held, verdict) and the pairs of trials
that held disjoint GPUs at the same time. Exit 1 when an engine held a GPU that is not its own.
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

_LIST = re.compile(r"^GPU (\d+): .*\(UUID: (GPU-[0-9a-fA-F-]+)\)")


@dataclass(frozen=True)
class Sample:
    t: float
    pid: int
    pgid: int | None
    uuid: str


@dataclass(frozen=True)
class TrialHold:
    label: str
    engine_pid: int | None
    gpu_ids: tuple[str, ...]
    started: float
    finished: float


def parse_gpu_list(text: str) -> dict[str, str]:
    """`nvidia-smi -L` -> physical index -> UUID."""
    return {m.group(1): m.group(2) for m in map(_LIST.match, text.splitlines()) if m}


def parse_samples(text: str) -> list[Sample]:
    out = []
    for line in text.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) < 4 or not parts[1].isdigit():
            continue  # "No running processes found", a header, a cut line
        pgid = int(parts[2]) if parts[2].isdigit() else None
        out.append(Sample(float(parts[0]), int(parts[1]), pgid, parts[3]))
    return out


def check(trials: list[TrialHold], samples: list[Sample], uuids: dict[str, str]) -> tuple[list[str], list[str], bool]:
    """(one line per trial, one line per pair of trials on disjoint GPUs at once, all as expected)."""
    lines, ok, held = [], True, {}
    for tr in trials:
        want = {uuids.get(g, f"index {g}") for g in tr.gpu_ids}
        seen = {s.uuid for s in samples if tr.engine_pid is not None and s.pgid == tr.engine_pid
                and tr.started <= s.t <= tr.finished}
        held[tr.label] = seen
        if not seen:
            verdict = "no sample of its engine (too short, or nvidia-smi shows no pids here)"
        elif seen <= want:
            verdict = "ok" if seen == want else f"ok, but used {len(seen)} of its {len(want)} GPUs"
        else:
            ok = False
            verdict = f"held GPUs that are not its own: {sorted(seen - want)}"
        lines.append(f"{tr.label}: given {sorted(tr.gpu_ids)} ({len(want)} GPU), its engine held "
                     f"{len(seen)}: {verdict}")
    pairs = []
    for i, a in enumerate(trials):
        for b in trials[i + 1:]:
            overlap = min(a.finished, b.finished) - max(a.started, b.started)
            if overlap > 0 and held[a.label] and held[b.label] and not (held[a.label] & held[b.label]):
                pairs.append(f"{a.label} and {b.label}: {overlap:.0f} s at the same time on different GPUs")
    return lines, pairs, ok


def main() -> int:
    from farm.errors import UserError
    from farm.run.preflight import stored_sweep_results

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("sweep_id")
    p.add_argument("--tracking-uri", required=True)
    p.add_argument("--samples", type=Path, required=True)
    p.add_argument("--gpus-list", type=Path, required=True)
    a = p.parse_args()
    for path in (a.samples, a.gpus_list):
        if not path.is_file():
            p.error(f"{path}: no such file (device.sh brings gpu-apps.csv and gpus.txt back from a machine of several GPUs)")
    try:
        results = stored_sweep_results(a.tracking_uri, a.sweep_id)
    except UserError as exc:
        p.error(exc.line())
    trials = [TrialHold(r.trial.label, r.engine_pid, tuple(r.gpus), r.started_at, r.finished_at)
              for r in results if r.trial.gpus and r.started_at is not None and r.finished_at is not None]
    lines, pairs, ok = check(trials, parse_samples(a.samples.read_text()), parse_gpu_list(a.gpus_list.read_text()))
    print("\n".join(lines + (["at the same time:"] + pairs if pairs else ["no two trials held GPUs at the same time"])))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
