"""`TrialJob`: everything an actor needs to run one trial, sent by the driver as one object
(`actors.bench` re-exports it, where the driver and the tests import it)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from farm.analysis.quality_runs import QualityJob
from farm.analysis.twins import Twin
from farm.study.spec import EngineSpec, ProfileSpec
from farm.study.trial import Trial


class TrialJob(BaseModel):
    """Everything an actor needs to run one trial; travels from the driver as one object."""

    model_config = ConfigDict(extra="forbid")

    sweep_id: str
    trial: Trial
    engine_spec: EngineSpec
    profiles: dict[str, ProfileSpec]
    repeats: int = 1
    min_success_rate: float = 0.99
    workdir: str = Field(description="Root for this node's artifacts; the trial gets a subdirectory.")
    attempt: int = 1
    first_pass: bool = Field(default=True, description="False for a later pass of --repeats auto.")
    search_capacity: bool | None = Field(
        default=None, description="Whether the job runs its capacity profiles' searches; None: on the first pass "
                                  "only. A halving rung or a local search's final comparison that brings a trial's "
                                  "capacity profile for the first time says True.")
    order_seed: int = 0
    tracking_uri: str | None = None
    experiment_id: str | None = None
    parent_run_id: str | None = None
    previous_attempts: list[str] = Field(default_factory=list, description="Earlier attempts that failed transiently.")
    compile_cache: str | None = Field(default=None, description="Where compile caches are shared: `ray:NAME` (the "
                                      "sweep's registry actor) or a directory every node sees; None: the node's alone.")
    twins: list[Twin] = Field(default_factory=list, description="Finished trials of the sweep this one could turn "
                                    "out to run the same server as (farm/analysis/twins.py): compared once it is ready.")
    client_hosts: str | None = Field(default=None, description="The Ray namespace where the driver started a guidellm "
                                     "client host on each node (actors/client_host.py); None: each trial starts its "
                                     "own client.")
    quality: QualityJob | None = Field(default=None, description="The quality gate's items this trial answers through "
                                       "its own server after its throughput runs (farm/analysis/quality_verdicts.py); "
                                       "None: it answers none (not gated, a later pass, no quality section).")
