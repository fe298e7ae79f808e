"""`add_job_metadata` that cannot add the sweep to its job's metadata says why in one line on
stderr and lets the sweep go on (its failure used to vanish). Through a real sweep:
tests/e2e/test_job_metadata.py."""

from __future__ import annotations


def test_outside_ray_it_is_one_warning_line_and_no_traceback(capsys):
    import ray

    from farm.run.jobs import add_job_metadata

    assert not ray.is_initialized()  # as in a driver whose Ray connection is gone
    assert add_job_metadata("farm-20261202-000000-abcdef", {"farm.sweep_id": "0" * 32}) is False
    err = capsys.readouterr().err
    assert err.splitlines() == ["warning: job farm-20261202-000000-abcdef's metadata does not name the sweep "
                                "(this process is not connected to Ray); its log does"]
