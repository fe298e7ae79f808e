"""Where a local search starts: a serve command read back by its engine (each engine owns the
inverse of its rendering), checked against the engine's own flag list, matched with the grid."""

from __future__ import annotations

import shlex

import pytest

from conftest import REPO
from farm.analysis.start_command import start_of
from farm.engines import ENGINES, get_engine
from farm.errors import UserError
from farm.study.grid import expand
from farm.study.load import load_study

H200 = load_study(REPO / "configs/h200-dummy.yaml")
DEFAULT = load_study()
STEP3_ON_THE_H200 = (REPO / "bench/h200/engine-logs/"
                     "vllm-0.20.2-fp8-prefix-throughput-dummy-pass2-fresh-machine-start.command.txt").read_text()


def _trials_of_every_engine():
    for study, grid in ((H200, "full"), (DEFAULT, "smoke"), (DEFAULT, "full")):
        for t in expand(study, grid):
            yield study, t


@pytest.mark.parametrize("engine", sorted(ENGINES))
def test_render_parse_render_round_trips_for_every_trial_of_the_engine(engine):
    seen = 0
    for study, t in _trials_of_every_engine():
        if t.engine != engine:
            continue
        e, spec = get_engine(engine), study.engines[engine]
        command = e.serve_command_of(spec, t.model, t.all_flags, t.weights)
        model, flags = e.parse_command(shlex.split(command), spec)
        assert model == t.model
        assert e.serve_command_of(spec, model, flags, t.weights) == command
        seen += 1
    assert seen, f"no trial of {engine} in the studies"


def test_the_seeds_command_as_the_h200_ran_it_is_a_trial_of_the_full_grid():
    trials = expand(H200, "full")
    out, start = start_of(H200, "full", trials, STEP3_ON_THE_H200)
    t = next(t for t in out if t.id == start)
    # where the model sat on the GPU machine does not matter: the directory's name does
    assert t.model != STEP3_ON_THE_H200.split()[4] and t.model.endswith("qwen3.5-35b-a3b-shape")
    assert t.knobs["quantization"] == "fp8" and t.knobs["prefix_caching"] is True
    assert t.flags["performance-mode"] == "throughput" and not t.knobs["speculative"]
    assert out == trials  # nothing outside the grid's flags: the trials are the grid's own


def test_a_flag_no_trial_sets_stays_verbatim_in_every_trial():
    trials = expand(DEFAULT, "smoke")
    out, start = start_of(DEFAULT, "smoke", trials,
                          "guidellm mock-server --model farm-tiny --ttft-ms 200 --itl-ms 40 --output-tokens 16")
    assert all(t.flags["output-tokens"] == 16 for t in out) and {t.id for t in out}.isdisjoint(t.id for t in trials)
    me = next(t for t in out if t.id == start)
    assert me.flags["ttft-ms"] == 200 and me.flags["itl-ms"] == 40


def test_a_trial_of_the_grid_by_name_or_id():
    trials = expand(H200, "seed")
    assert start_of(H200, "seed", trials, "step3_performance_mode")[1] == \
        next(t.id for t in trials if t.name == "step3_performance_mode")


@pytest.mark.parametrize("command, words", [
    ("guidellm mock-server --model farm-tiny --ttft-ms 200 --itl-ms 40 --bogus 1", "mock takes no flag '--bogus'"),
    ("guidellm mock-server --model other --ttft-ms 200 --itl-ms 40", "the command serves 'other'"),
    ("guidellm mock-server --model farm-tiny --ttft-ms 120 --itl-ms 40", "matches no trial of grid 'smoke'"),
    ("guidellm mock-server --ttft-ms 200", "no model in the command"),
    ("docker run vllm/vllm-openai", "not a serve command of an engine of grid 'smoke'"),
    ("guidellm mock-server --model farm-tiny --ttft-ms 1 --ttft-ms 2", "given twice"),
    ("guidellm mock-server 'unclosed", "cannot split the command"),
    ("no_such_trial", "no trial 'no_such_trial'"),
])
def test_a_command_farm_cannot_start_from_is_one_line(command, words):
    with pytest.raises(UserError) as err:
        start_of(DEFAULT, "smoke", expand(DEFAULT, "smoke"), command)
    # the study file, then the option
    assert words in err.value.line() and err.value.line().startswith(f"{DEFAULT.source}: --from: ")
    assert "\n" not in err.value.line()


def test_sglangs_flags_are_checked_against_its_help():
    sglang = get_engine("sglang")
    assert sglang.unknown_flags({"mem-fraction-static": 0.9, "disable-radix-cache": True}) == []
    assert sglang.unknown_flags({"max-num-seqs": 8}) == ["max-num-seqs"]  # vLLM's name, not SGLang's


def test_from_the_seeds_command_the_h200_search_races_one_knob_at_a_time():
    """The H200 run's first step (grid full, the seed's command): each neighbour changes exactly one
    thing, speculative decoding (not measurable on dummy weights) is never raced, and a knob at
    the value that renders no flag is the engine's default, not a second coordinate."""
    from farm.analysis.local_search import coordinates, neighbours
    from farm.run.local_search import effective_knobs, knob_flags, raceable

    trials, start = start_of(H200, "full", expand(H200, "full"), STEP3_ON_THE_H200)
    ranked = raceable(H200, trials, start)
    assert not any(t.knobs.get("speculative") for t in ranked)
    nbrs = neighbours(start, ranked, coordinates(ranked, knob_flags(ranked), effective_knobs(ranked)))
    axes = sorted(n.axis for n in nbrs)
    assert axes == sorted(["--performance-mode", "knob:quantization", "knob:prefix_caching", "knob:kv_cache_dtype",
                           "knob:kv_offload", "knob:gpu_memory_fraction", "knob:cuda_graph", "knob:cuda_graph",
                           "knob:max_batched_tokens", "knob:max_running_requests"])


# (from a sibling folder the user types ../<checkout>/...: the checkout's own name, whatever it is)
@pytest.mark.parametrize("typed", [".models/tiny-qwen3-moe", "./.models/tiny-qwen3-moe",
                                   f"../{REPO.name}/.models/tiny-qwen3-moe", "tiny-qwen3-moe"])
def test_a_local_model_typed_as_the_shell_sees_it_is_the_grids_model(typed):
    # the user's command as they run it from the repository: the study resolved the same
    # directory against its own file (an absolute path)
    study = load_study(REPO / "configs/tiny-vllm-cpu.yaml")
    trials = expand(study, "cpu")
    out, start = start_of(study, "cpu", trials, f"vllm serve {typed} --max-model-len 2048 --dtype bfloat16 "
                                                "--max-num-seqs 4 --no-enable-prefix-caching")
    t = next(t for t in out if t.id == start)
    assert t.model.endswith("/.models/tiny-qwen3-moe") and t.flags["max-num-seqs"] == 4


@pytest.mark.parametrize("typed", ["other/tiny-qwen3-moe", ".models/tiny-qwen3", "Qwen/Qwen3-0.6B"])
def test_another_directory_or_a_hub_id_is_not_the_grids_local_model(typed):
    study = load_study(REPO / "configs/tiny-vllm-cpu.yaml")
    with pytest.raises(UserError, match="the command serves"):
        start_of(study, "cpu", expand(study, "cpu"), f"vllm serve {typed} --max-model-len 2048 --dtype bfloat16 "
                                                     "--max-num-seqs 4 --no-enable-prefix-caching")
