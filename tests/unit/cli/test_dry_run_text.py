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


def test_a_dry_run_of_a_resume_shows_what_the_resume_would_run(tmp_path):
    import tarfile

    with tarfile.open(REPO / "bench/h200/store.tgz") as tar:
        tar.extractall(tmp_path, filter="data")
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    config = str(REPO / "configs/h200-dummy.yaml")
    proc = run_farm("sweep", "--config", config, "--grid", "sglang", "--resume", "dd5bd9360b9b425f90e4ac5ed298874b",
                    "--tracking-uri", uri, "--dry-run", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "1 trial(s) finished, not run again (engine_sglang_default); 7 to run" in proc.stdout
    listed = [line.split()[1] for line in proc.stdout.splitlines() if line.startswith("sglang-") and len(line.split()) > 1]
    assert len(listed) == 7 and "engine_sglang_default" not in listed
    done = run_farm("sweep", "--config", config, "--grid", "seed", "--resume", "aa0e8ed837734ac3bb3a11f5178e8f9e",
                    "--tracking-uri", uri, "--dry-run", cwd=tmp_path)
    assert done.returncode == 0 and "nothing is left to run" in done.stdout
    missing = run_farm("sweep", "--config", config, "--grid", "seed", "--resume", "a" * 32,
                       "--tracking-uri", f"sqlite:///{tmp_path / 'none.db'}", "--dry-run", cwd=tmp_path)
    assert missing.returncode == 2 and not (tmp_path / "none.db").exists()
