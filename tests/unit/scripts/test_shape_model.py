"""scripts/make-shape-model.py: the weight-free Qwen3.5-35B-A3B that engines serve with dummy weights.

The script runs as a user runs it (a subprocess of this interpreter) into temporary directories;
what it writes is read back the way vLLM and SGLang read it: transformers' AutoConfig,
AutoTokenizer and GenerationConfig. No GPU, no torch model, no hub.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
SCRIPT = REPO / "scripts" / "make-shape-model.py"
FILES = {"config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json", "farm-model.json",
         "preprocessor_config.json", "video_preprocessor_config.json"}

ENGLISH = (
    "Large language models are served on clusters of GPUs. The benchmark sends thousands of requests, "
    "measures the time to first token and the latency between tokens, and reports how throughput "
    "changes as more requests arrive at once. When the cache for shared prefixes is enabled, the "
    "server avoids recomputing the same prompt, although it needs more memory to keep it warm. "
    "Researchers reported in 2024 that careful scheduling raised throughput by about 35 percent."
)


def make(directory: Path, *args: str) -> subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, str(SCRIPT), str(directory), *args],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> Path:
    directory = tmp_path_factory.mktemp("shape") / "qwen3.5-35b-a3b"
    proc = make(directory)
    assert "wrote" in proc.stdout
    return directory


@pytest.fixture(scope="module")
def config(model_dir):
    from transformers import AutoConfig

    return AutoConfig.from_pretrained(str(model_dir))


@pytest.fixture(scope="module")
def tokenizer(model_dir):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(model_dir))


def test_only_config_generation_config_tokenizer_and_marker(model_dir):
    assert {p.name for p in model_dir.iterdir()} == FILES
    assert not model_dir.with_name(model_dir.name + ".tmp").exists()
    size = sum(p.stat().st_size for p in model_dir.iterdir())
    assert size < 16e6, f"{size / 1e6:.1f} MB: the directory travels to the GPU machine in a 64 MiB budget"


def test_the_vision_processor_files_sglang_loads_at_start(model_dir):
    # SGLang 0.5.16 stopped on the H200 with "Can't load image processor" without them.
    image = json.loads((model_dir / "preprocessor_config.json").read_text())
    video = json.loads((model_dir / "video_preprocessor_config.json").read_text())
    assert image["processor_class"] == video["processor_class"] == "Qwen3VLProcessor"
    assert image["image_processor_type"].startswith("Qwen2VLImageProcessor")
    assert video["video_processor_type"] == "Qwen3VLVideoProcessor"
    assert (image["patch_size"], image["merge_size"], image["temporal_patch_size"]) == (16, 2, 2)


def test_config_is_qwen3_5_moe_of_the_real_shape(config):
    assert config.model_type == "qwen3_5_moe"
    assert config.architectures == ["Qwen3_5MoeForConditionalGeneration"]
    t = config.text_config
    assert t.model_type == "qwen3_5_moe_text"
    layers = list(t.layer_types)
    assert len(layers) == t.num_hidden_layers == 40
    assert layers.count("linear_attention") == 30 and layers.count("full_attention") == 10
    assert [i for i, kind in enumerate(layers) if kind == "full_attention"] == list(range(3, 40, 4))
    assert t.full_attention_interval == 4
    assert (t.hidden_size, t.num_attention_heads, t.num_key_value_heads, t.head_dim) == (2048, 16, 2, 256)
    assert (t.linear_num_key_heads, t.linear_num_value_heads, t.linear_key_head_dim,
            t.linear_value_head_dim, t.linear_conv_kernel_dim) == (16, 32, 128, 128, 4)
    assert (t.num_experts, t.num_experts_per_tok) == (256, 8)
    assert (t.moe_intermediate_size, t.shared_expert_intermediate_size) == (512, 512)
    assert t.vocab_size == 248320
    assert t.max_position_embeddings >= 32768
    assert t.rope_parameters["rope_theta"] == 10_000_000
    assert t.rope_parameters["partial_rotary_factor"] == 0.25
    assert str(t.dtype).endswith("bfloat16") and str(config.dtype).endswith("bfloat16")
    assert not config.tie_word_embeddings
    assert config.vision_config.out_hidden_size == t.hidden_size


def test_tokenizer_fills_exactly_the_vocabulary(config, tokenizer):
    vocab_size = config.text_config.vocab_size
    assert len(tokenizer) == vocab_size
    assert sorted(tokenizer.get_vocab().values()) == list(range(vocab_size))
    tokens = tokenizer.convert_ids_to_tokens(list(range(vocab_size)))
    assert None not in tokens and len(set(tokens)) == vocab_size
    top = tokenizer.decode([vocab_size - 1])
    assert isinstance(top, str) and top
    # every id decodes (the random model generates any of them)
    texts = tokenizer.batch_decode([[i] for i in range(0, vocab_size, 97)] + [[vocab_size - 1]])
    assert all(isinstance(s, str) for s in texts)


def test_special_tokens_are_single_tokens_at_qwen3_5_ids(config, tokenizer):
    ids = {s: tokenizer.convert_tokens_to_ids(s) for s in
           ("<|endoftext|>", "<|im_start|>", "<|im_end|>", "<think>", "</think>", "<|vision_start|>",
            "<|image_pad|>")}
    assert ids["<|endoftext|>"] == 248044 and ids["<|im_end|>"] == 248046
    assert (ids["<think>"], ids["</think>"]) == (248068, 248069)
    assert ids["<|vision_start|>"] == config.vision_start_token_id
    assert ids["<|image_pad|>"] == config.image_token_id
    for s in ("<think>", "</think>", "<|im_end|>", "<|im_start|>"):
        assert tokenizer.encode(s) == [ids[s]]
        assert ids[s] in tokenizer.encode(f"some words{s}more words")
    # think tags stay in decoded text (vLLM's qwen3 reasoning parser reads them); ChatML ones do not
    out = tokenizer.decode([ids["<think>"], ids["<|im_end|>"]], skip_special_tokens=True)
    assert out == "<think>"


def test_generation_config_stops_at_im_end(model_dir, tokenizer):
    from transformers import GenerationConfig

    gen = GenerationConfig.from_pretrained(str(model_dir))
    im_end = tokenizer.convert_tokens_to_ids("<|im_end|>")
    eos = gen.eos_token_id if isinstance(gen.eos_token_id, list) else [gen.eos_token_id]
    assert eos[0] == im_end == tokenizer.eos_token_id
    assert gen.pad_token_id == tokenizer.pad_token_id == tokenizer.convert_tokens_to_ids("<|endoftext|>")
    text_config = json.loads((model_dir / "config.json").read_text())["text_config"]
    assert text_config["eos_token_id"] == im_end


def test_chat_template_renders_chatml_with_a_think_block(tokenizer):
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hello"}]
    text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    assert text == ("<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHello<|im_end|>\n"
                    "<|im_start|>assistant\n<think>\n")
    parts = [{"role": "user", "content": [{"type": "text", "text": "Hello"}]}]
    text = tokenizer.apply_chat_template(parts, tokenize=False, add_generation_prompt=True, enable_thinking=False)
    assert text.endswith("<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n")
    ids = tokenizer.apply_chat_template(messages, tokenize=True, add_generation_prompt=True)
    ids = ids["input_ids"] if isinstance(ids, dict) or hasattr(ids, "keys") else ids
    assert ids[0] == tokenizer.convert_tokens_to_ids("<|im_start|>")


def test_english_takes_a_plausible_number_of_tokens(tokenizer):
    ids = tokenizer.encode(ENGLISH)
    chars_per_token = len(ENGLISH) / len(ids)
    assert 3.0 <= chars_per_token <= 6.0, chars_per_token
    assert tokenizer.decode(ids) == ENGLISH
    words = tokenizer.convert_ids_to_tokens(tokenizer.encode(" the model serves requests"))
    assert words == ["Ġthe", "Ġmodel", "Ġserves", "Ġrequests"]


def test_marker_records_what_was_generated(model_dir):
    marker = json.loads((model_dir / "farm-model.json").read_text())
    assert marker["weights"].startswith("none") and "--load-format dummy" in marker["weights"]
    assert marker["architecture"] == "Qwen3_5MoeForConditionalGeneration"
    assert isinstance(marker["generator_version"], int)
    assert marker["text_config"]["num_hidden_layers"] == 40
    assert marker["tokenizer"]["vocab_size"] == 248320


def test_second_run_does_nothing_and_says_so(model_dir):
    before = {p.name: (p.stat().st_mtime_ns, p.read_bytes()) for p in model_dir.iterdir()}
    proc = make(model_dir)
    assert "already holds" in proc.stdout and "--force" in proc.stdout
    assert {p.name: (p.stat().st_mtime_ns, p.read_bytes()) for p in model_dir.iterdir()} == before


def test_two_runs_give_byte_identical_files(model_dir, tmp_path):
    other = tmp_path / "again"
    make(other, "--force")
    assert {p.name for p in other.iterdir()} == FILES
    for name in sorted(FILES):
        assert (other / name).read_bytes() == (model_dir / name).read_bytes(), name
