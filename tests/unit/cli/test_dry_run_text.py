"""What `--dry-run` prints reads as the engine is given it, and says what it does not know."""

from __future__ import annotations

from conftest import REPO, run_farm


def test_flags_print_as_the_engine_renders_them():
    proc = run_farm("sweep", "--config", str(REPO / "configs/h200-dummy.yaml"), "--grid", "seed", "--dry-run")
    assert proc.returncode == 0, proc.stderr
    flags = [line.split("flags: ", 1)[1] for line in proc.stdout.splitlines() if "flags: " in line]
    assert "(engine defaults)" in flags and "--enable-prefix-caching --quantization=fp8" in flags
    assert any('--speculative-config={"method":"mtp","num_speculative_tokens":4}' in f for f in flags)
    assert not any("None" in f or "True" in f or "{'" in f for f in flags)


def test_a_trial_the_memory_fit_model_cannot_size_is_not_called_a_fit():
    proc = run_farm("sweep", "--grid", "smoke", "--strategy", "halving", "--dry-run")
    assert proc.returncode == 0, proc.stderr
    line = next(line for line in proc.stdout.splitlines() if line.startswith("strategy halving"))
    assert "0 trial(s) pruned: does not fit; 4 not predicted" in line


def test_compile_cache_option_names_where_caches_are_shared(tmp_path):
    proc = run_farm("sweep", "--config", str(REPO / "configs/h200-dummy.yaml"), "--grid", "starts", "--dry-run",
                    "--compile-cache", "packs", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert f"compile caches shared through directory {tmp_path / 'packs'}" in proc.stdout
    assert not (tmp_path / "packs").exists()  # a dry run writes nothing
