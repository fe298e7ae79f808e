"""Several sweeps of one study reported as one: one grid per engine, or a grid measured in parts.

The runs keep their trial ids and provenance. A trial measured in two of the sweeps is refused,
not pooled: its runs were made on different engines starts, perhaps different machines, and a
sweep of its own (`--resume`) is the way to add repeats. The profiles must mean the same thing
in every part, or the report would compare different workloads.
"""

from __future__ import annotations

from farm.analysis.records import Results, check_trial_ids
from farm.errors import UserError


def merge_results(parts: list[Results]) -> Results:
    """`parts` (the first one leads: its grid, primary profile and sweep id) -> one `Results`."""
    if not parts:
        raise ValueError("nothing to merge")
    first = parts[0]
    if len(parts) == 1:
        return first
    profiles = dict(first.profiles)
    for part in parts[1:]:
        if part.study and first.study and part.study != first.study:
            raise UserError(f"is a sweep of study '{part.study}', not '{first.study}': sweeps of different "
                            "studies are not reported together", key=f"sweep {part.sweep_id}")
        for name, info in part.profiles.items():
            if name in profiles and profiles[name] != info:
                raise UserError(f"profile '{name}' asks for something else than in sweep {first.sweep_id} "
                                "(its data, load or request count changed): the runs cannot be pooled",
                                key=f"sweep {part.sweep_id}")
            profiles.setdefault(name, info)
    owner: dict[str, str | None] = {}
    for part in parts:
        for trial in {r.trial for r in part.records}:
            if trial in owner:
                raise UserError(f"trial '{trial}' was measured in sweep {owner[trial]} and in sweep {part.sweep_id}: "
                                "report them apart, or add its runs with `farm sweep --resume`", key="SWEEP_ID")
            owner[trial] = part.sweep_id
    records = [r for part in parts for r in part.records]
    source = " + ".join(p.source for p in parts)
    check_trial_ids(records, source)
    versions: dict[str, str] = {}
    for part in parts:
        for engine, version in part.engine_versions.items():
            versions.setdefault(engine, version)
    sweeps = [s for p in parts for s in (p.sweeps or [p.sweep_id]) if s]
    return first.model_copy(update={
        "source": source, "profiles": profiles, "records": records, "engine_versions": versions,
        "sweeps": list(dict.fromkeys(sweeps)),
        # each sweep's quality gate, paired within its sweep (a trial is measured in one sweep only)
        "quality": {trial: q for part in parts for trial, q in part.quality.items()},
    })
