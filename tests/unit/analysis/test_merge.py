"""Several sweeps reported as one (`farm report A B`): what is pooled and what is refused."""

from __future__ import annotations

import copy

import pytest

from farm.analysis.merge import merge_results
from farm.analysis.records import results_from_data, results_to_data
from farm.errors import UserError


def _parts(seed_data):
    """The seed's runs split by engine, as two sweeps of one study."""
    parts = []
    for engine, sweep in (("vllm", "a" * 32), ("sglang", "b" * 32)):
        data = copy.deepcopy(seed_data)
        data["runs"] = [r for r in data["runs"] if r["engine"] == engine]
        data["sweep_id"], data["study"] = sweep, "seed"
        parts.append(data)
    return parts


def test_the_runs_of_both_are_pooled_and_each_sweep_named(seed_data):
    a, b = (results_from_data(p, f"part{i}") for i, p in enumerate(_parts(seed_data)))
    merged = merge_results([a, b])
    assert len(merged.records) == len(a.records) + len(b.records) == len(seed_data["runs"])
    assert merged.sweeps == ["a" * 32, "b" * 32] and merged.sweep_id == "a" * 32
    again = results_from_data(results_to_data(merged), "again")
    assert again.sweeps == merged.sweeps and len(again.records) == len(merged.records)


def test_a_trial_in_both_sweeps_is_refused(seed_data):
    a, _ = _parts(seed_data)
    twice = copy.deepcopy(a)
    twice["sweep_id"] = "c" * 32
    with pytest.raises(UserError, match="was measured in sweep a+ and in sweep c+"):
        merge_results([results_from_data(a, "a"), results_from_data(twice, "c")])


def test_a_profile_that_changed_is_refused(seed_data):
    a, b = _parts(seed_data)
    name = next(iter(b["profiles"]))
    b["profiles"][name]["total_requests"] += 1
    with pytest.raises(UserError, match=f"profile '{name}' asks for something else"):
        merge_results([results_from_data(a, "a"), results_from_data(b, "b")])


def test_sweeps_of_two_studies_are_refused(seed_data):
    a, b = _parts(seed_data)
    b["study"] = "another"
    with pytest.raises(UserError, match="sweeps of different studies"):
        merge_results([results_from_data(a, "a"), results_from_data(b, "b")])
