"""A same-configuration copy's runs are its trial's on the copy's machine (selection's comparisons,
farm/analysis/selection/machines.py: side_blocks), on the lent H100's real runs
(bench/h100/from-seed/results.json): farm's repair of the seed's command ran in the first sitting
(machine unknown), then again as a control (`vllm-1ffa2a61@resume1.1`, `@resume1.2`) in the third
and fourth sittings, each on a machine of its own; GPU memory 0.95 ran beside the fourth's control."""

from __future__ import annotations

from pathlib import Path

from farm.analysis import stats as fstats
from farm.analysis.results_file import read_results_file
from farm.analysis.select import build_table
from farm.analysis.selection.machines import cell_blocks, cell_difference, copies_of, side_blocks

REPO = Path(__file__).resolve().parents[3]
PROFILE = "sharegpt_synthetic.rung1"
REPAIR, MEMORY, PREFIX_OFF = "vllm-1ffa2a61", "vllm-d19a1e96", "vllm-d9b0e5bb"


def _cells():
    table = build_table(read_results_file(REPO / "bench/h100/from-seed/results.json"), "total_tps", 0.99, None)
    return table, {c.trial: c for c in table.on(PROFILE)}


def test_the_repairs_copies_count_as_its_runs_on_their_machines():
    table, cells = _cells()
    assert sorted(c.trial for c in copies_of(table, cells[REPAIR])) == [f"{REPAIR}@resume1.1", f"{REPAIR}@resume1.2"]
    own, side = cell_blocks(cells[REPAIR], "total_tps"), side_blocks(table, cells[REPAIR], "total_tps")
    assert list(own) == [fstats.UNKNOWN] and len(side) == 3 and side[fstats.UNKNOWN] == own[fstats.UNKNOWN]
    assert sorted(len(v) for v in side.values()) == [5, 5, 5]


def test_a_trial_run_beside_a_copy_is_compared_within_that_machine():
    table, cells = _cells()
    d = cell_difference(table, cells[MEMORY], cells[REPAIR], "total_tps", 0.95)
    (machine,) = cell_blocks(cells[MEMORY], "total_tps")
    assert d.machines == "within" and d.machines_note.startswith(f"within machine {machine}")
    assert "left out" in d.machines_note  # the repair's runs on its other machines
    assert -0.01 < d.relative < 0.01 and (d.n_a, d.n_b) == (5, 5)
    # its own runs alone never met GPU memory 0.95 on a machine: no comparison at all
    alone = fstats.blocked_difference(cell_blocks(cells[MEMORY], "total_tps"), cell_blocks(cells[REPAIR], "total_tps"))
    assert alone.machines == "no_shared_control" and alone.relative is None


def test_a_trial_whose_machine_no_copy_reached_stays_across_machines():
    table, cells = _cells()
    d = cell_difference(table, cells[PREFIX_OFF], cells[REPAIR], "total_tps", 0.95)
    assert d.machines == "no_shared_control" and d.p_value is None
