"""A trial whose actor's process died says why, in Ray's words: the reason keeps Ray's account of the
worker's end (exit type and detail), not only "The actor died unexpectedly before finishing this
task.", which is all a user saw of a sweep whose every trial was lost (no cause to act on)."""

from __future__ import annotations

import os
import signal

import pytest

from farm.analysis.outcome import LOST_DETAIL_CHARS, lost_actor_detail


@pytest.fixture(scope="module")
def local_ray(tmp_path_factory):
    import ray

    ray.init(address="local", num_cpus=1, include_dashboard=False, log_to_driver=False,
             _temp_dir=str(tmp_path_factory.mktemp("ray")))
    try:
        yield ray
    finally:
        ray.shutdown()


def _job(tmp_path):
    from actors.bench import TrialJob
    from farm.study.grid import expand
    from farm.study.load import load_study
    from tests.sweeptools import write_study

    study = load_study(write_study(tmp_path / "study.yaml", name="lost", grid="g",
                                   blocks=[{"engine": "mock", "models": ["tiny"]}]))
    return TrialJob(sweep_id="s", trial=expand(study, "g")[0], engine_spec=study.engines["mock"],
                    profiles=study.profiles, workdir=str(tmp_path / "runs"))


def test_a_killed_actor_process_is_lost_with_rays_account_of_its_end(local_ray, tmp_path):
    """A real Ray actor whose process is killed (as the kernel's OOM killer or a crash ends it)."""
    from farm.run.driver import _result_without_actor

    ray = local_ray

    @ray.remote(num_cpus=1, max_restarts=0)
    class Victim:
        def pid(self) -> int:
            return os.getpid()

        def wait(self) -> None:
            import time

            time.sleep(60)

    actor = Victim.remote()
    pid = ray.get(actor.pid.remote())
    pending = actor.wait.remote()
    os.kill(pid, signal.SIGKILL)
    with pytest.raises(ray.exceptions.RayActorError) as info:
        ray.get(pending, timeout=60)
    said = str(info.value)
    result = _result_without_actor(_job(tmp_path), info.value, None)
    assert result.status.value == "node_lost"
    assert result.reason.startswith("actor or node lost: ActorDiedError: The actor died unexpectedly")
    # Ray's own account of the end follows its first line, and the actor's id and pid fields do not
    assert "Worker exit type" in said and "Worker exit type" in result.reason, said
    assert f"pid: {pid}" in said and f"pid: {pid}" not in result.reason
    assert len(result.reason) <= len("actor or node lost: ") + len("ActorDiedError: ") + LOST_DETAIL_CHARS


def test_a_long_account_is_cut_with_an_ellipsis_and_the_fields_are_left_out():
    text = "The actor died.\n\tclass_name: X\n\tpid: 12\n" + "Worker exit detail: " + "x" * 2000
    detail = lost_actor_detail("ActorDiedError", text)
    assert detail.startswith("ActorDiedError: The actor died. Worker exit detail: xxx") and detail.endswith("...")
    assert "pid" not in detail and len(detail) == len("ActorDiedError: ") + LOST_DETAIL_CHARS
