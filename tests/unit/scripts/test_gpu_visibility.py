"""scripts/h200/gpu_visibility.py: the check a machine of several GPUs gets (issue "Several GPUs").

No multi-GPU machine has run it yet: the inputs here are written in the formats the sampler in
scripts/h200/sweep-job.sh writes (`time,pid,pgid,gpu_uuid,used_MiB` from `nvidia-smi
--query-compute-apps ... --format=csv,noheader,nounits`) and `nvidia-smi -L` prints."""

import importlib.util
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
spec = importlib.util.spec_from_file_location("gpu_visibility", REPO / "scripts/h200/gpu_visibility.py")
gv = importlib.util.module_from_spec(spec)
sys.modules["gpu_visibility"] = gv  # dataclasses look their module up
spec.loader.exec_module(gv)

GPUS = """GPU 0: NVIDIA H200 (UUID: GPU-aaaaaaaa-0000-0000-0000-000000000000)
GPU 1: NVIDIA H200 (UUID: GPU-bbbbbbbb-0000-0000-0000-000000000000)
"""
A, B = "GPU-aaaaaaaa-0000-0000-0000-000000000000", "GPU-bbbbbbbb-0000-0000-0000-000000000000"


def samples(*rows):
    return gv.parse_samples("\n".join(f"{t},{pid},{pgid},{uuid},70000" for t, pid, pgid, uuid in rows))


def test_two_tp1_trials_on_their_own_gpus_at_the_same_time():
    trials = [gv.TrialHold("tp1-bf16", 100, ("0",), 0, 300), gv.TrialHold("tp1-fp8", 200, ("1",), 10, 320)]
    # the engines' workers have their own pids; their process group is the engine's
    s = samples((50, 101, 100, A), (55, 201, 200, B), (250, 101, 100, A), (300, 201, 200, B))
    lines, pairs, ok = gv.check(trials, s, gv.parse_gpu_list(GPUS))
    assert ok and all(line.endswith(": ok") for line in lines), lines
    assert pairs == ["tp1-bf16 and tp1-fp8: 290 s at the same time on different GPUs"]


def test_an_engine_on_a_gpu_it_was_not_given_fails_the_check():
    trials = [gv.TrialHold("tp1", 100, ("1",), 0, 100)]
    lines, _, ok = gv.check(trials, samples((50, 105, 100, A)), gv.parse_gpu_list(GPUS))
    assert not ok and "held GPUs that are not its own" in lines[0] and A in lines[0]


def test_a_tp2_trial_holds_both_and_other_groups_samples_do_not_count():
    trials = [gv.TrialHold("tp2", 100, ("0", "1"), 0, 100)]
    s = samples((10, 101, 100, A), (10, 102, 100, B), (10, 999, 998, A), (500, 101, 100, B))
    lines, _, ok = gv.check(trials, s, gv.parse_gpu_list(GPUS))
    assert ok and "its engine held 2: ok" in lines[0]


def test_nvidia_smi_lines_that_are_not_samples_are_skipped():
    text = "No running processes found\n1700000000,4242,,GPU-x,10\n1700000005,4242,4240,GPU-x,10\n"
    assert [s.pgid for s in gv.parse_samples(text)] == [None, 4240]
