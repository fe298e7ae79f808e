"""Studies that can never mean what they say are refused before anything starts (issue 29):
engine flags of the wrong type or range, flag keys that are no flag name or that repeat a flag in
another spelling, exclude rules that match nothing, grids that expand to no trial or to more
than farm expands. Each case: `farm sweep --dry-run` on a small study with one thing broken;
exit 2, one line naming the file, the key and the reason, nothing written.
"""

from __future__ import annotations

import pytest

from refusals import refused, run_farm_here

STUDY = """\
name: refusals
primary_profile: p
models:
  tiny: {name: farm-tiny, tokenizer: "farm:tiny"}
engines:
  mock:
    flags:
      ttft-ms: 5
  vllm:
    flags:
      max-num-seqs: 8
  sglang: {}
profiles:
  p:
    data: {kind: synthetic, prompt_tokens: 8, output_tokens: 4}
    requests: 4
grids:
  g:
    blocks:
      - engine: mock
        models: [tiny]
        axes:
          itl-ms: [1, 2]
"""
DRY = ["sweep", "--config", "s.yaml", "--grid", "g", "--dry-run"]


def _edit(old: str, new: str) -> str:
    assert old in STUDY, old
    return STUDY.replace(old, new, 1)


def _engine_flag(engine: str, text: str) -> str:
    anchor = {"mock": "      ttft-ms: 5\n", "vllm": "      max-num-seqs: 8\n"}.get(engine)
    if anchor is None:
        return _edit(f"  {engine}: {{}}\n", f"  {engine}:\n    flags:\n{text}")
    return _edit(anchor, anchor + text)


def _block(text: str) -> str:
    return STUDY + text


def test_the_study_itself_is_accepted(tmp_path):
    result, _ = run_farm_here(tmp_path, DRY, {"s.yaml": STUDY})
    assert result.exit_code == 0, result.output


# -- class 3: engine flags typed before anything starts --------------------------------------

TYPED = [
    ("tp-zero", _engine_flag("vllm", "      tensor-parallel-size: 0\n"),
     "engines.vllm.flags.tensor-parallel-size: expected a whole number >= 1, got 0"),
    ("tp-a-word", _engine_flag("vllm", "      tensor-parallel-size: two\n"),
     "engines.vllm.flags.tensor-parallel-size: expected a whole number >= 1, got 'two'"),
    ("memory-as-percent", _engine_flag("vllm", "      gpu-memory-utilization: 90\n"),
     "engines.vllm.flags.gpu-memory-utilization: expected a fraction above 0 and at most 1 (0.9 = 90 %), got 90"),
    ("memory-zero", _engine_flag("vllm", "      gpu-memory-utilization: 0\n"),
     "engines.vllm.flags.gpu-memory-utilization: expected a fraction above 0 and at most 1 (0.9 = 90 %), got 0"),
    ("boolean-as-word", _engine_flag("vllm", "      enforce-eager: 'yes'\n"),
     "engines.vllm.flags.enforce-eager: expected true or false, got 'yes'"),
    ("json-not-an-object", _engine_flag("vllm", "      speculative-config: '[1, 2]'\n"),
     "engines.vllm.flags.speculative-config: expected a JSON object (a mapping, or its JSON text), got '[1, 2]'"),
    ("sglang-fraction-above-one", _engine_flag("sglang", "      mem-fraction-static: 1.5\n"),
     "engines.sglang.flags.mem-fraction-static: expected a fraction above 0 and at most 1 (0.9 = 90 %), got 1.5"),
    ("sglang-dp-negative-in-an-axis",
     _block("      - {engine: sglang, models: [tiny], axes: {dp-size: [1, -2]}}\n"),
     "grids.g.blocks[1].axes.dp-size[1]: expected a whole number >= 1, got -2"),
    ("mock-gpus-a-float", _block("      - {engine: mock, models: [tiny], flags: {gpus: 1.5}}\n"),
     "grids.g.blocks[1].flags.gpus: expected a whole number >= 0, got 1.5"),
    ("underscore-spelling-typed-too", _engine_flag("vllm", "      tensor_parallel_size: true\n"),
     "engines.vllm.flags.tensor_parallel_size: expected a whole number >= 1, got true"),
]


@pytest.mark.parametrize("text,expected", [c[1:] for c in TYPED], ids=[c[0] for c in TYPED])
def test_an_engine_flag_of_the_wrong_type_or_range_is_one_line(tmp_path, text, expected):
    assert refused(tmp_path, DRY, {"s.yaml": text}) == f"s.yaml: {expected}"


@pytest.mark.parametrize("text", [
    _engine_flag("vllm", "      speculative-config: '{\"method\": \"mtp\", \"num_speculative_tokens\": 2}'\n"),
    _engine_flag("vllm", "      gpu-memory-utilization: 1\n      tensor-parallel-size: null\n"),
    _engine_flag("sglang", "      chunked-prefill-size: -1\n      disable-radix-cache: false\n"),
], ids=["json-text", "fraction-one-and-null", "sglang-minus-one-turns-off"])
def test_values_of_the_right_type_pass(tmp_path, text):
    result, _ = run_farm_here(tmp_path, DRY, {"s.yaml": text})
    assert result.exit_code == 0, result.output


FLAG_KEYS = [
    ("dashes-and-value", _engine_flag("mock", "      --x=1: 2\n"),
     "engines.mock.flags: '--x=1' is not a flag name: letters, digits, '-', '_' and '.' after the dashes "
     "(the value goes after the colon: `name: value`)"),
    ("bare-value", _block("      - {engine: mock, models: [tiny], axes: {'itl-ms=3': [1]}}\n"),
     "grids.g.blocks[1].axes: 'itl-ms=3' is not a flag name: letters, digits, '-', '_' and '.' after the dashes "
     "(the value goes after the colon: `name: value`)"),
    ("a-space", _engine_flag("vllm", "      max num seqs: 4\n"),
     "engines.vllm.flags: 'max num seqs' is not a flag name: letters, digits, '-', '_' and '.' after the dashes"),
    ("underscores-and-dashes-in-one-section", _engine_flag("vllm", "      max_num_seqs: 16\n"),
     "engines.vllm.flags: flag 'max_num_seqs' given twice (also as 'max-num-seqs')"),
    ("block-repeats-the-engine-section", _block("      - {engine: vllm, models: [tiny], axes: {--max_num_seqs: [4]}}\n"),
     "grids.g.blocks[1].axes.max_num_seqs: flag given twice (engine 'vllm' already sets it as 'max-num-seqs')"),
    ("flags-repeat-an-axis", _block("      - {engine: mock, models: [tiny], flags: {itl_ms: 3}, axes: {itl-ms: [1]}}\n"),
     "grids.g.blocks[1].flags.itl_ms: flag given twice (also the axis 'itl-ms')"),
]


@pytest.mark.parametrize("text,expected", [c[1:] for c in FLAG_KEYS], ids=[c[0] for c in FLAG_KEYS])
def test_a_flag_key_that_is_no_bare_name_or_repeats_a_flag_is_one_line(tmp_path, text, expected):
    assert refused(tmp_path, DRY, {"s.yaml": text}) == f"s.yaml: {expected}"


# -- class 4: rules that match nothing, grids of no trial --------------------------------------

STRUCTURE = [
    ("exclude-names-a-knob-the-block-lacks", _edit("          itl-ms: [1, 2]\n",
                                                   "          itl-ms: [1, 2]\n        exclude: [{tensor_parallel: 2}]\n"),
     "grids.g.blocks[0].exclude[0].tensor_parallel: 'tensor_parallel' is no axis, knob or flag of this block: "
     "the rule would match nothing"),
    ("exclude-a-value-the-axis-lacks", _edit("          itl-ms: [1, 2]\n",
                                             "          itl-ms: [1, 2]\n        exclude: [{itl-ms: 3}]\n"),
     "grids.g.blocks[0].exclude[0].itl-ms: 3 is not a value 'itl-ms' takes in this block (1, 2): the rule would "
     "match nothing"),
    ("exclude-true-for-one", _edit("          itl-ms: [1, 2]\n",
                                   "          itl-ms: [1, 2]\n        exclude: [{itl-ms: true}]\n"),
     "grids.g.blocks[0].exclude[0].itl-ms: true is not a value 'itl-ms' takes in this block (1, 2): the rule would "
     "match nothing"),
    ("exclude-an-empty-rule", _edit("          itl-ms: [1, 2]\n", "          itl-ms: [1, 2]\n        exclude: [{}]\n"),
     "grids.g.blocks[0].exclude[0]: an empty rule matches every trial of the block: name the axes or knobs whose "
     "combination it drops"),
    ("every-combination-excluded", _edit("          itl-ms: [1, 2]\n",
                                         "          itl-ms: [1, 2]\n        exclude: [{itl-ms: 1}, {itl-ms: 2}]\n"),
     "grids.g: the grid expands to no trials (every combination excluded or skipped)"),
    ("every-trial-skipped", _edit("          itl-ms: [1, 2]\n",
                                  "          itl-ms: [1, 2]\n        knob_axes: {prefix_caching: [true]}\n"
                                  "        skip_unsupported: true\n"),
     "grids.g: the grid expands to no trials (every combination excluded or skipped)"),
]


@pytest.mark.parametrize("text,expected", [c[1:] for c in STRUCTURE], ids=[c[0] for c in STRUCTURE])
def test_a_rule_or_grid_that_can_mean_nothing_is_one_line(tmp_path, text, expected):
    assert refused(tmp_path, DRY, {"s.yaml": text}) == f"s.yaml: {expected}"


# -- class 10: size before work --------------------------------------------------------------

def _axes(n: int, width: int) -> str:
    values = ", ".join(str(v) for v in range(1, width + 1))
    return "".join(f"          a{i}: [{values}]\n" for i in range(n))


SIZES = [
    ("eight-axes-of-ten", _edit("          itl-ms: [1, 2]\n", _axes(8, 10)),
     "the grid names 100,000,000 combinations of its axes before exclusions (blocks[0]: 100,000,000)"),
    ("twenty-axes-of-ten-excluded-or-not", _edit("          itl-ms: [1, 2]\n",
                                                 _axes(20, 10) + "        exclude: [{a0: 1}]\n"),
     "the grid names 100,000,000,000,000,000,000 combinations of its axes before exclusions"),
    ("many-blocks-add-up", STUDY + "".join(f"      - {{engine: mock, models: [tiny], axes: {{b{i}: {list(range(100))}, "
                                           f"c{i}: {list(range(30))}}}}}\n" for i in range(4)),
     "the grid names 12,002 combinations of its axes before exclusions (blocks[1]: 3,000)"),
]


@pytest.mark.parametrize("text,expected", [c[1:] for c in SIZES], ids=[c[0] for c in SIZES])
def test_a_grid_too_large_to_expand_is_counted_and_refused(tmp_path, text, expected):
    line = refused(tmp_path, DRY, {"s.yaml": text})
    assert line.startswith(f"s.yaml: grids.g: {expected}"), line
    assert "farm expands at most 10,000" in line


def test_a_grid_of_too_many_runs_a_pass_is_refused(tmp_path):
    profiles = "".join(f"  q{i}: {{data: {{kind: synthetic, prompt_tokens: 8, output_tokens: 4}}, requests: 4}}\n"
                       for i in range(60))
    text = _edit("profiles:\n", "profiles:\n" + profiles).replace("itl-ms: [1, 2]", f"itl-ms: {list(range(2000))}")
    line = refused(tmp_path, DRY, {"s.yaml": text})
    assert line == ("s.yaml: grids.g: the grid plans 122,000 runs a pass (2,000 combinations x 61 profiles); farm "
                    "plans at most 100,000: give the grid fewer `profiles`")
