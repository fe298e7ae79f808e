"""The machine a trial ran on and what its GPUs did over a run (pure models, read from
farm/analysis/results.py, where every name here is importable): `MachineFingerprint` (its key
tells one lent machine from another), `GpuSamples` (SM clock, temperature, power and energy over
a run's window, sampled on the node by actors/machine.py) and `Spread`."""

from __future__ import annotations

import hashlib

from pydantic import BaseModel, ConfigDict, Field


class Spread(BaseModel):
    """Min, mean and max of a quantity sampled over a run's window."""

    model_config = ConfigDict(extra="forbid")

    min: float
    mean: float
    max: float


class GpuSamples(BaseModel):
    """What the trial's GPUs did over one run's window (actors/machine.py samples NVML a few times a
    second); `measured: false` with the reason where nothing was sampled (no NVML, no GPU): never zeros."""

    model_config = ConfigDict(extra="forbid")

    measured: bool
    reason: str | None = Field(default=None, description="Why not measured (NVML absent, the trial holds no GPU).")
    gpus: list[str] = Field(default_factory=list, description="The GPU ids sampled (CUDA_VISIBLE_DEVICES).")
    samples: int = Field(default=0, description="Samples per GPU within the window.")
    sm_clock_mhz: Spread | None = Field(default=None, description="SM clock (MHz) over the window, all GPUs.")
    temperature_c: Spread | None = Field(default=None, description="GPU temperature (degrees C) over the window.")
    power_w: Spread | None = Field(default=None, description="Power draw (W) per GPU over the window.")
    power_total_w: Spread | None = Field(default=None, description="Power of the trial's GPUs together (W), summed "
                                         "at each sampling instant; none: not recorded (results from before).")
    window_s: float | None = Field(default=None, description="The run's window the samples cover (s): the "
                                   "benchmark's start to its end.")
    energy_j: float | None = Field(default=None, description="Joules of the trial's GPUs over exactly that window: "
                                   "the trapezoid rule over the samples (farm/analysis/energy.py); none: not "
                                   "recorded (results from before), or no power read.")


class MachineFingerprint(BaseModel):
    """The machine a trial ran on: what tells one lent GPU machine from another (all are named 'vm')."""

    model_config = ConfigDict(extra="forbid")

    host: str = Field(description="The host name's sha256, first 12 hex digits.")
    kernel: str | None = None
    cpu_model: str | None = None
    cpu_count: int | None = Field(default=None, description="CPUs this process may run on.")
    gpu_name: str | None = None
    gpu_count: int | None = None
    gpu_driver: str | None = None
    cuda_driver: str | None = Field(default=None, description="The CUDA version the driver supports (NVML).")
    gpu_uuids: str | None = Field(default=None, description="The trial's GPUs' UUIDs, hashed: the physical GPUs.")
    gpu_max_sm_clock_mhz: float | None = None
    gpu_not_read: str | None = Field(default=None, description="Why the GPU fields are empty (no GPU, NVML absent).")
    node_gpus: str | None = Field(default=None, description="Every GPU the machine has (their UUIDs, hashed), "
                                  "whichever the trial held; none where NVML could not list them.")
    label: str | None = Field(default=None, description="The machine's name where its Ray node was started with "
                              "the label farm.machine=NAME (`ray start --labels`).")
    # A short microbenchmark (actors/microbench.py), before the engine starts: machines alike by name
    # can differ in speed, and a slow one is told by these, not by its name.
    host_sha256_mib_s: float | None = Field(default=None, description="Single-core SHA-256 over 32 MiB, MiB/s.")
    host_copy_gib_s: float | None = Field(default=None, description="A 128 MiB memory copy, GiB/s (read + write).")
    gpu_matmul_bf16_tflops: float | None = Field(default=None, description="bf16 8192 x 8192 matmul on the trial's "
                                                 "first GPU, TFLOPS (torch of the engine's environment).")
    gpu_copy_gib_s: float | None = Field(default=None, description="A 1 GiB device-to-device copy, GiB/s (read + write).")
    gpu_bench_not_measured: str | None = Field(default=None, description="Why the GPU microbenchmark has no figures.")

    @property
    def key(self) -> str:
        """A short id of the machine: runs with one key ran on one machine (the block a comparison is made
        within, farm/analysis/stats/blocks.py).

        The machine is the host with all of its GPUs (host, kernel, CPU, driver, every GPU's UUID),
        not the GPUs one trial held: trials on GPU 0 and GPU 1 of one node ran on one machine, and a
        key per GPU set would make every comparison of a parallel sweep one across machines. Lent
        machines share a host name ('vm'); their GPUs' UUIDs tell them apart. A `farm.machine` node
        label names the machine where nothing else can (Ray nodes on one host, CPU only)."""
        parts = (self.host, self.kernel, self.cpu_model, self.gpu_driver, self.node_gpus, self.label)
        return hashlib.sha256("|".join(p or "" for p in parts).encode()).hexdigest()[:12]
