"""What one run asks of guidellm: the scenario spec farm writes (actors/bench_client.scenario_spec)."""

from __future__ import annotations

from pathlib import Path

import pytest

from actors.bench_client import GUIDELLM_PREFETCH, scenario_spec
from farm.study.spec import DataSpec, ProfileSpec


def _spec(requests: int, *, warmup: int | None = None) -> dict:
    profile = ProfileSpec(data=DataSpec(kind="synthetic", prompt_tokens=16, output_tokens=8), requests=requests,
                          max_concurrency=8, rate=1000, max_seconds=60)
    return scenario_spec(profile, target="http://127.0.0.1:1", model="m", tokenizer="t", output=Path("/tmp/x.json"),
                         requests=warmup)


@pytest.mark.parametrize("requests, warmup, made_ahead", [
    (48, None, 48),                      # a small run: its own prompts, not guidellm's 4,096
    (48, 4, 4),                          # a warm-up run draws its own count
    (100_000, None, GUIDELLM_PREFETCH),  # a large run: guidellm's own buffer, never more
])
def test_the_data_loader_makes_at_most_the_runs_requests_ahead(requests, warmup, made_ahead):
    spec = _spec(requests, warmup=warmup)
    assert spec["data_loader"] == {"kind": "pytorch", "prefetch_factor": made_ahead}
    assert {"kind": "max_requests", "count": warmup or requests} in spec["constraints"]


def test_guidellm_takes_the_spec_as_written():
    from guidellm.schemas.benchmark.entrypoints import BenchmarkScenario

    args = BenchmarkScenario.create(scenario=None, spec=_spec(48))
    loader = args.spec.data_loader
    assert loader.prefetch_factor == 48 and loader.num_workers == 1
