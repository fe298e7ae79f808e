"""A local model farm cannot size is "not predicted: <why>" in the dry run, never a traceback
(issue 29): a config.json of an architecture the memory-fit model does not know, or one that is
not what a config.json is. Its trials still run (a prediction prunes only what it can size), and
the file is read through farm's boundary (farm/inputs.py), as every file a user hands farm."""

from __future__ import annotations

import json

import pytest

from refusals import run_farm_here

STUDY = """\
name: unsized
primary_profile: p
accelerator_type: H200
models:
  local: {name: ./model, tokenizer: "farm:tiny"}
engines:
  vllm: {}
  sglang: {}
profiles:
  p:
    data: {kind: synthetic, prompt_tokens: 8, output_tokens: 4}
    requests: 4
grids:
  g:
    blocks:
      - {engine: vllm, models: [local]}
      - {engine: sglang, models: [local]}
"""
SHAPE = {"num_hidden_layers": 4, "hidden_size": 64, "num_attention_heads": 4, "vocab_size": 100}

CASES = [
    ("latent-attention", {"architectures": ["DeepseekV3ForCausalLM"], **SHAPE, "kv_lora_rank": 16},
     "architecture DeepseekV3ForCausalLM is multi-head latent attention (kv_lora_rank), which farm's memory model "
     "does not size"),
    ("encoder-decoder", {"architectures": ["T5ForConditionalGeneration"], **SHAPE, "is_encoder_decoder": True},
     "architecture T5ForConditionalGeneration is an encoder-decoder, which farm's memory model does not size"),
    ("a-state-space-model", {"architectures": ["MambaForCausalLM"], "hidden_size": 64, "state_size": 16},
     "architecture MambaForCausalLM is not one farm's memory model knows (its config.json has no num_hidden_layers, "
     "num_attention_heads, vocab_size)"),
    ("zero-heads", {**SHAPE, "model_type": "odd", "num_attention_heads": 0},
     "config.json: num_attention_heads is '0', not a whole number >= 1 (architecture odd)"),
    ("layers-as-text", {**SHAPE, "num_hidden_layers": "4"},
     "config.json: num_hidden_layers is '4', not a whole number >= 1 (architecture unnamed)"),
    ("a-list", [1, 2], "{tmp}/model/config.json: is not a JSON object"),
    ("text-config-a-string", {"text_config": "qwen"}, "config.json's text_config is not a JSON object"),
    ("nan", b'{"num_hidden_layers": NaN}',
     "{tmp}/model/config.json: num_hidden_layers: expected a finite number, got NaN"),
    ("latin-1", '{"model_type": "café"}'.encode("latin-1"), "{tmp}/model/config.json: is not UTF-8 text"),
]


@pytest.mark.parametrize("config,reason", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_a_model_farm_cannot_size_is_not_predicted_with_why(tmp_path, config, reason):
    data = config if isinstance(config, bytes) else json.dumps(config).encode()
    result, _ = run_farm_here(tmp_path, ["sweep", "--config", "s.yaml", "--grid", "g", "--dry-run"],
                              {"s.yaml": STUDY, "model/config.json": data})
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert result.exit_code == 0, result.output
    lines = [line.strip() for line in result.stdout.splitlines() if line.strip().startswith("memory:")]
    assert len(lines) == 2, result.stdout  # one per engine's trial
    for line in lines:
        assert line.startswith("memory: not predicted: " + reason.format(tmp=tmp_path.resolve())), line


def test_a_model_it_knows_is_still_predicted(tmp_path):
    result, _ = run_farm_here(tmp_path, ["sweep", "--config", "s.yaml", "--grid", "g", "--dry-run"],
                              {"s.yaml": STUDY, "model/config.json": json.dumps(SHAPE)})
    assert result.exit_code == 0, result.output
    assert result.stdout.count("memory: fits") == 2, result.stdout
