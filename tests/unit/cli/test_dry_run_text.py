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
    # all eight trials of the SGLang grid are stored (2026-12-04: 256 with the radix cache off measured;
    # 256 and 512 with it on ended as the default's server, same_server): a resume starts none
    finished = ("engine_sglang_default", "sglang_quant_fp8", "sglang_fp8_radix_off", "sglang_fp8_kv_cache_fp8",
                "sglang_running_256", "sglang_running_512", "sglang_running_256_radix_off",
                "sglang_running_512_radix_off")
    assert f"8 trial(s) finished, not run again ({', '.join(finished)}); nothing is left to run" in proc.stdout
    listed = [line.split()[1] for line in proc.stdout.splitlines() if line.startswith("sglang-") and len(line.split()) > 1]
    assert not set(finished) & set(listed)
    done = run_farm("sweep", "--config", config, "--grid", "seed", "--resume", "aa0e8ed837734ac3bb3a11f5178e8f9e",
                    "--tracking-uri", uri, "--dry-run", cwd=tmp_path)
    assert done.returncode == 0 and "nothing is left to run" in done.stdout
    missing = run_farm("sweep", "--config", config, "--grid", "seed", "--resume", "a" * 32,
                       "--tracking-uri", f"sqlite:///{tmp_path / 'none.db'}", "--dry-run", cwd=tmp_path)
    assert missing.returncode == 2 and not (tmp_path / "none.db").exists()


def test_an_auto_resume_finishes_the_pass_a_lost_machine_stopped_before_the_next(tmp_path):
    """The committed H200 sweep's pass 2 (2 more runs on the primary profile for all five trials)
    lost its machine after three of them, and again after the fourth (the baseline, resumed on
    2026-12-03); step4's runs came last. Before them, a resume ran the one left, not a pass 3 over
    the four that had their runs; with pass 2 complete it plans pass 3 over those still close."""
    import tarfile

    from farm.analysis import plan
    from farm.store.tracking import load_results
    from farm.study.load import load_study

    with tarfile.open(REPO / "bench/h200/store.tgz") as tar:
        tar.extractall(tmp_path, filter="data")
    uri, sweep = f"sqlite:///{tmp_path / 'mlflow.db'}", "aa0e8ed837734ac3bb3a11f5178e8f9e"
    study = load_study(REPO / "configs/h200-dummy.yaml").model_copy(update={"repeats": "auto"})
    stored = load_results(uri, sweep)
    ran = {r.trial.label for r in stored if any(x.pass_index == 2 for x in r.runs)}
    planned = plan.pass_from_stored(stored, study, "seed", sweep, before=2, rule="pooled")
    names = {r.trial.id: r.trial.label for r in stored}
    # pass 2's plan, recomputed from the runs before it by the rule of its day (every trial against
    # the leader, machines pooled), is the one that ran: its first trials are those with pass-2
    # runs, leader first
    assert [names[t] for t in planned.trials[:3]] == ["step2_prefix_cache", "step3_performance_mode", "step1_quant_fp8"]
    assert ran == {"step2_prefix_cache", "step3_performance_mode", "step1_quant_fp8", "engine_vllm_default",
                   "step4_kv_cache_fp8"}
    assert set(names[t] for t in planned.trials) == ran
    assert plan.unfinished_pass(stored, study, "seed", sweep) is None
    # the store as it was before step4's pass-2 runs: the pass is finished before any other
    before_step4 = [r.model_copy(update={"runs": [x for x in r.runs if x.pass_index == 1]})
                    if r.trial.label == "step4_kv_cache_fp8" else r for r in stored]
    rest = plan.unfinished_pass(before_step4, study, "seed", sweep)
    assert rest is not None and rest.pass_index == 2 and rest.repeats == 2
    assert [names[t] for t in rest.trials] == ["step4_kv_cache_fp8"]
    # a pass whose plan was recorded as it started (farm/store/searches.py) is finished from that plan,
    # whatever budget the resume plans with (here a smaller one than the sweep had)
    planned_ids = [t for t in planned.trials]
    poor = study.model_copy(update={"max_runs": 31})
    recorded = plan.unfinished_pass(before_step4, poor, "seed", sweep, {2: planned_ids})
    assert recorded is not None and recorded.pass_index == 2 and [names[t] for t in recorded.trials] == ["step4_kv_cache_fp8"]
    assert plan.unfinished_pass(stored, poor, "seed", sweep, {2: planned_ids}) is None

    config = str(REPO / "configs/h200-dummy.yaml")
    proc = run_farm("sweep", "--config", config, "--grid", "seed", "--resume", sweep, "--tracking-uri", uri,
                    "--repeats", "auto", "--dry-run", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert ("--repeats auto: pass 3 runs the primary profile 2 more times on 5 trial(s), 10 runs"
            in proc.stdout), proc.stdout
    # pass 3 by today's rule: the seed's steps are the decisions (each against the step before,
    # within a machine or through a control), and the four still open rerun both their trials
    assert "4 step(s) open" in proc.stdout and "step2_prefix_cache vs step1_quant_fp8 (" in proc.stdout, proc.stdout
    assert ("2 more repeats for step1_quant_fp8, engine_vllm_default, step2_prefix_cache, step3_performance_mode, "
            "step4_kv_cache_fp8") in proc.stdout
    spent = sum(len(r.runs) for r in stored)
    short = run_farm("sweep", "--config", config, "--grid", "seed", "--resume", sweep, "--tracking-uri", uri,
                     "--repeats", "auto", "--run-budget", str(spent + 1), "--dry-run", cwd=tmp_path)
    assert short.returncode == 0, short.stderr
    assert "--repeats auto: no further pass (run budget spent" in short.stdout, short.stdout


def test_a_local_search_is_priced_at_the_runs_earlier_sweeps_measured(tmp_path):
    """The committed H200 store's newest sweeps (the warm-start check, grid `starts`) ran only the
    short `quick` profile: the search's estimate takes the primary profile's runs from the earlier
    sweeps that ran them (100-140 s each), not from the study's max_seconds (900 s, which once
    priced a raced trial at 0.5 GPU-hours and had the search stop before its first step)."""
    import re
    import tarfile

    with tarfile.open(REPO / "bench/h200/store.tgz") as tar:
        tar.extractall(tmp_path, filter="data")
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    seed_command = (REPO / "bench/h200/engine-logs/vllm-0.20.2-fp8-prefix-throughput-dummy-pass2-fresh-machine-start"
                    ".command.txt").read_text().strip()
    proc = run_farm("sweep", "--config", str(REPO / "configs/h200-dummy.yaml"), "--grid", "full", "--strategy", "local",
                    "--from", seed_command, "--budget", "1", "--tracking-uri", uri, "--dry-run", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    durations = next(line for line in proc.stdout.splitlines() if line.startswith("durations from sweeps "))
    assert "for what it did not measure" in durations and "sharegpt_synthetic" in durations  # earlier sweeps fill in
    step = float(re.search(r"~([0-9.]+) GPU-hours a raced trial", proc.stdout).group(1))
    assert step < 0.25, proc.stdout[:2000]
    assert re.search(r"step 1 races .+ against [1-9]\d* neighbour", proc.stdout), proc.stdout[:3000]
