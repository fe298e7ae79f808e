"""Selection's comparisons by machine (farm/analysis/stats/blocks.py): a cell's runs by the machine
they ran on, the trials that may bridge two machines, a comparison of two cells, and the note that
says once what the machines of a report are."""

from __future__ import annotations

from farm.analysis import stats as fstats
from farm.analysis.records import Results, RunRecord
from farm.analysis.selection.rules import Cell, Table


def machine_of(rec: RunRecord) -> str:
    """The machine key a run recorded (`MachineFingerprint.key`), or `UNKNOWN`: results written before
    farm fingerprinted machines are one unknown machine, as they were always treated."""
    prov = rec.provenance
    return prov.machine_key if prov is not None and prov.machine_key else fstats.UNKNOWN


def cell_blocks(cell: Cell, metric: str) -> dict[str, list[float]]:
    """A cell's values of `metric` by machine."""
    out: dict[str, list[float]] = {}
    for r in cell.runs_ok:
        if (v := r.metric(metric)) is not None:
            out.setdefault(machine_of(r), []).append(v)
    return out


def copies_of(table: Table, cell: Cell) -> list[Cell]:
    """The cells on `cell`'s profile that repeat its trial as a control (a node control, a resume's
    control: `node_control_of`), each run on the machine its sitting had."""
    return [c for c in table.on(cell.profile) if c.control_of == cell.trial]


def side_blocks(table: Table, cell: Cell, metric: str) -> dict[str, list[float]]:
    """A side of a comparison by machine: the cell's runs with those of its copies. The same
    configuration run again as a control where the sweep resumed on another machine is that side's
    run there, so that a trial measured only on the new machine is compared within it."""
    out = cell_blocks(cell, metric)
    for copy in copies_of(table, cell):
        for machine, values in cell_blocks(copy, metric).items():
            out.setdefault(machine, []).extend(values)
    return out


def controls_on(table: Table, profile: str, metric: str, names: dict[str, str] | None = None) -> list[fstats.Control]:
    """Every configuration measured on `profile`, as a control that may bridge two machines: the runs of
    its trials by machine (a baseline and its node controls, which repeat it on other nodes, are one).
    The baseline's configuration first (the study's own reference point), then those covering the
    most machines, then the most runs: an order fixed before any comparison is made. `names` maps
    trial ids to the names the caller's comparisons use."""
    names = names or {}
    groups: dict[tuple, list[Cell]] = {}
    for cell in table.on(profile):
        if cell.values(metric):
            groups.setdefault(table.first[cell.trial].key, []).append(cell)
    base_key = table.first[table.baseline].key if table.baseline in table.first else None
    ranked = []
    for key, cells in groups.items():
        lead = next((c.trial for c in cells if c.trial == table.baseline), cells[0].trial)
        control = fstats.Control(name=names.get(lead, table.first[lead].label),
                                 parts={names.get(c.trial, c.trial): cell_blocks(c, metric) for c in cells})
        blocks = control.blocks
        ranked.append(((key != base_key, -len(blocks), -sum(map(len, blocks.values())), control.name), control))
    return [c for _, c in sorted(ranked, key=lambda t: t[0])]


def cell_difference(table: Table, a: Cell, b: Cell, metric: str, confidence: float) -> fstats.Diff:
    """a against b on the ratio scale, each side with its copies' runs (`side_blocks`), within the
    machines they share or through a control (less the two sides' own runs)."""
    own = {a.trial, b.trial} | {c.trial for side in (a, b) for c in copies_of(table, side)}
    controls = (c.without(own) for c in controls_on(table, a.profile, metric))
    return fstats.blocked_difference(side_blocks(table, a, metric), side_blocks(table, b, metric),
                                     confidence=confidence, controls=[c for c in controls if c is not None])


def machines_note(results: Results) -> str | None:
    """What the report's machines are, said once: none recorded (one unknown machine, as before), or
    several (comparisons within a machine or through a control)."""
    seen = sorted({machine_of(r) for r in results.records if r.measured})
    if seen == [fstats.UNKNOWN]:
        return ("No run records the machine it ran on (results written before farm fingerprinted machines): every "
                "run counts as one unknown machine, as before, so runs of different machines, if any, are pooled.")
    if len(seen) < 2:
        return None
    unknown = (f"; runs that record no machine count as one more, '{fstats.UNKNOWN}'" if fstats.UNKNOWN in seen else "")
    return (f"Runs come from {len(seen)} machines ({', '.join(seen)}: the machine key of each run's fingerprint"
            f"{unknown}). Each comparison is made within the machines its two trials share, or across machines "
            f"through a control that ran on a machine of each; never from runs of different machines pooled. The "
            f"decisions say which.")
