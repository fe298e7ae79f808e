"""The machine a trial runs on: its fingerprint, and its GPUs' clocks, temperature and power over each
run's window, through NVML (`pynvml`, the `nvidia-ml-py` package).

Runs of one configuration differed by up to 17 % on the lent H100 (a fifth run after four within
0.7 %), and by 5 - 30 % between two lent H200 machines, with nothing recorded to say why. Each run
now records what its GPUs did while it ran (SM clock, temperature, power: min, mean, max of a few
samples a second), and each trial the machine it ran on (GPU model, driver, the CUDA version the
driver supports, kernel, CPU model, a hash of its host name and of its GPUs' UUIDs), so that a slow
run can be told from a throttled GPU and runs can be grouped by machine.

Where no GPU is sampled the record says why ("not measured": NVML absent, or the trial holds no
GPU), never zeros. NVML is imported only here, on the node (`make lint`: the pure packages never
import it). Tests hand a stand-in for the `pynvml` module (`nvml=`); on a GPU machine the real one
is read (tests/unit/actors/test_machine.py, marked `gpu`).
"""

from __future__ import annotations

import hashlib
import os
import platform
import socket
import statistics
import threading
import time
from pathlib import Path
from typing import Any

from farm.analysis.energy import integrate
from farm.analysis.results import GpuSamples, MachineFingerprint, Spread

# Samples a second per GPU: enough for a run of tens of seconds, cheap (one NVML read is ~0.1 ms);
# four a second is what the issue asks of the energy's integral (a few a second: ~83 over a 21 s run).
SAMPLE_INTERVAL_S = 0.25


def _hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def load_nvml(nvml: Any = None) -> tuple[Any | None, str | None]:
    """NVML initialised (the given stand-in, else `pynvml`), or None and why not."""
    if nvml is None:
        try:
            import pynvml as nvml  # node side only: the NVIDIA driver's library through nvidia-ml-py
        except ImportError:
            return None, "NVML absent: the nvidia-ml-py package (pynvml) is not installed"
    try:
        nvml.nvmlInit()
    except Exception as exc:  # noqa: BLE001 - pynvml raises its own NVMLError_* per cause (no driver, no library)
        return None, f"NVML absent: {type(exc).__name__}: {exc}"
    return nvml, None


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _handles(nvml: Any, gpu_ids: list[str]) -> list[Any]:
    """NVML handles of the GPUs a trial holds, named as CUDA_VISIBLE_DEVICES names them (indices or UUIDs)."""
    out = []
    for gid in gpu_ids:
        gid = gid.strip()
        if gid.isdigit():
            out.append(nvml.nvmlDeviceGetHandleByIndex(int(gid)))
        elif gid:
            out.append(nvml.nvmlDeviceGetHandleByUUID(gid))
    return out


def _cpu_model() -> str | None:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith(("model name", "hardware", "cpu model")):
                return line.split(":", 1)[1].strip() or None
    except OSError:
        pass
    return platform.processor() or None


NO_GPU = "no GPU: the trial holds none"


# The Ray node label that names a machine (`ray start --labels '{"farm.machine": "rack2-07"}'`): where
# a fingerprint cannot tell machines apart (several Ray nodes on one host, CPU nodes cloned from one image).
MACHINE_LABEL = "farm.machine"


def _node_gpus(lib: Any) -> str | None:
    """Every GPU of the machine (their UUIDs, hashed): what makes the machine's key, whichever GPUs a
    trial holds."""
    try:
        count = int(lib.nvmlDeviceGetCount())
        return _hash(",".join(sorted(_text(lib.nvmlDeviceGetUUID(lib.nvmlDeviceGetHandleByIndex(i)))
                                     for i in range(count))))
    except Exception:  # noqa: BLE001 - pynvml's NVMLError_*: the machine is then told by its host alone
        return None


def fingerprint(gpu_ids: list[str], nvml: Any = None, none_why: str = NO_GPU,
                label: str | None = None) -> MachineFingerprint:
    """The machine this process runs on, and the GPUs `gpu_ids` of it (none: the host alone, `none_why`);
    `label`: the node's `farm.machine` label, where it has one."""
    fp = MachineFingerprint(host=_hash(socket.gethostname()), kernel=platform.release() or None,
                            cpu_model=_cpu_model(), label=label or None)
    try:
        fp.cpu_count = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        pass
    lib, why = load_nvml(nvml)
    if lib is not None:
        # The machine's own (its key): a trial without GPUs on a GPU machine is on that machine all the same.
        fp.node_gpus = _node_gpus(lib)
        try:
            fp.gpu_driver = _text(lib.nvmlSystemGetDriverVersion())
        except Exception:  # noqa: BLE001 - pynvml's NVMLError_*
            pass
    if not gpu_ids or lib is None:
        fp.gpu_not_read = none_why if not gpu_ids else why
        if lib is not None:
            _shutdown(lib)
        return fp
    try:
        handles = _handles(lib, gpu_ids)
        fp.gpu_count = len(handles)
        names = sorted({_text(lib.nvmlDeviceGetName(h)) for h in handles})
        fp.gpu_name = ", ".join(names) or None
        try:
            cuda = int(lib.nvmlSystemGetCudaDriverVersion())
            fp.cuda_driver = f"{cuda // 1000}.{cuda % 1000 // 10}"
        except Exception:  # noqa: BLE001 - an older driver does not say
            pass
        fp.gpu_uuids = _hash(",".join(_text(lib.nvmlDeviceGetUUID(h)) for h in handles))
        fp.gpu_max_sm_clock_mhz = max(float(lib.nvmlDeviceGetMaxClockInfo(h, lib.NVML_CLOCK_SM)) for h in handles)
    except Exception as exc:  # noqa: BLE001 - a read NVML refuses leaves the rest of the fingerprint
        fp.gpu_not_read = f"NVML could not read the GPUs {','.join(gpu_ids)}: {type(exc).__name__}: {exc}"
    finally:
        _shutdown(lib)
    return fp


def _shutdown(lib: Any) -> None:
    try:
        lib.nvmlShutdown()
    except Exception:  # noqa: BLE001 - nothing to keep
        pass


def _spread(values: list[float]) -> Spread | None:
    return Spread(min=min(values), mean=statistics.fmean(values), max=max(values)) if values else None


class GpuSampler:
    """Samples the trial's GPUs every `interval_s` from `start()` to `stop()`, in a thread of its own.

    `stop(window=(t0, t1))` summarises the samples within the run's own window (the benchmark's
    start and end, epoch seconds) where it has some, else all of them."""

    def __init__(self, gpu_ids: list[str], interval_s: float = SAMPLE_INTERVAL_S, nvml: Any = None,
                 none_why: str = NO_GPU) -> None:
        self.gpu_ids = [g for g in gpu_ids if g.strip()]
        self.none_why = none_why
        self.interval_s = interval_s
        self._nvml = nvml
        self._lib: Any = None
        self._handles: list[Any] = []
        self._why: str | None = None
        self._samples: list[tuple[float, float | None, float | None, float | None]] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> GpuSampler:
        if not self.gpu_ids:
            self._why = self.none_why
            return self
        self._lib, self._why = load_nvml(self._nvml)
        if self._lib is None:
            return self
        try:
            self._handles = _handles(self._lib, self.gpu_ids)
        except Exception as exc:  # noqa: BLE001 - pynvml's NVMLError_* (an id NVML does not know)
            self._why = f"NVML could not open the GPUs {','.join(self.gpu_ids)}: {type(exc).__name__}: {exc}"
            _shutdown(self._lib)
            self._lib = None
            return self
        self._thread = threading.Thread(target=self._loop, name="farm-gpu-sampler", daemon=True)
        self._thread.start()
        return self

    def _read(self, call, *args) -> float | None:
        try:
            return float(call(*args))
        except Exception:  # noqa: BLE001 - a quantity this GPU does not report (NVMLError_NotSupported)
            return None

    def _sample(self) -> None:
        lib, now = self._lib, time.time()
        for h in self._handles:
            power = self._read(lib.nvmlDeviceGetPowerUsage, h)
            self._samples.append((now, self._read(lib.nvmlDeviceGetClockInfo, h, lib.NVML_CLOCK_SM),
                                  self._read(lib.nvmlDeviceGetTemperature, h, lib.NVML_TEMPERATURE_GPU),
                                  power / 1000.0 if power is not None else None))  # NVML gives milliwatts

    def _loop(self) -> None:
        self._sample()
        while not self._stop.wait(self.interval_s):
            self._sample()

    def stop(self, window: tuple[float, float] | None = None) -> GpuSamples:
        if self._thread is not None:
            self._stop.set()
            self._thread.join(timeout=5)
            self._thread = None
            self._sample()  # the run's end
            _shutdown(self._lib)
        if self._why is not None:
            return GpuSamples(measured=False, reason=self._why)
        samples = self._samples
        if window is not None:
            inside = [s for s in samples if window[0] <= s[0] <= window[1]]
            samples = inside or samples
        if not samples:
            return GpuSamples(measured=False, reason="no sample was taken in the run's window")
        clock, temp, power = ([s[i] for s in samples if s[i] is not None] for i in (1, 2, 3))
        # The GPUs together at each instant (one read of every GPU per tick), where each answered its power:
        # the run's joules integrate them over exactly its window, the samples just outside it giving the edges.
        ticks: dict[float, list[float | None]] = {}
        for s in self._samples:
            ticks.setdefault(s[0], []).append(s[3])
        total = sorted((t, sum(p)) for t, p in ticks.items() if len(p) == len(self._handles) and None not in p)
        span = window or ((total[0][0], total[-1][0]) if total else None)
        inside = [w for t, w in total if span is not None and span[0] <= t <= span[1]] or [w for _, w in total]
        return GpuSamples(measured=True, gpus=list(self.gpu_ids), samples=len(samples) // max(len(self._handles), 1),
                          sm_clock_mhz=_spread(clock), temperature_c=_spread(temp), power_w=_spread(power),
                          power_total_w=_spread(inside), window_s=span[1] - span[0] if span else None,
                          energy_j=integrate(total, span) if total and span else None,
                          reason=None if clock or temp or power else "NVML answered no clock, temperature or power")
