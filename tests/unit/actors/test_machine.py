"""A run's GPU samples and a trial's machine fingerprint (actors/machine.py).

On this machine for real: nvidia-ml-py is installed and NVML's library is not (no driver), so a
trial that holds GPUs records "not measured" and why, never zeros. A CPU engine's trial holds none.
The aggregation is tested through a stand-in for the `pynvml` module (the hook a GPU fixture would
use); on a machine with a GPU, the `gpu` test reads the real one."""

from __future__ import annotations

import shutil
import time

import pytest

from actors import machine
from farm.analysis.energy import RunEnergy, run_energy
from farm.analysis.results import GpuSamples


def test_without_nvmls_library_a_gpu_trial_records_why_it_was_not_measured():
    pynvml = pytest.importorskip("pynvml")  # the package is a dependency: installed everywhere farm is
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:
        pass
    else:
        pynvml.nvmlShutdown()
        pytest.skip("NVML works here: the gpu test below covers it")
    sampler = machine.GpuSampler(["0"], interval_s=0.01).start()
    samples = sampler.stop()
    assert samples == GpuSamples(measured=False, reason=samples.reason)
    assert samples.reason.startswith("NVML absent: NVMLError_LibraryNotFound")
    # no joules, no watts, no tokens per joule: "not measured" and why, never zeros
    energy = run_energy(samples, duration_s=20.0, input_tokens=1000.0, output_tokens=500.0)
    assert energy == RunEnergy(measured=False, reason=samples.reason)
    fp = machine.fingerprint(["0"])
    assert fp.gpu_not_read.startswith("NVML absent: ") and fp.gpu_name is None and fp.gpu_driver is None
    # the host is read all the same
    assert fp.kernel and fp.cpu_count and len(fp.host) == 12 and len(fp.key) == 12


def test_a_trial_without_gpus_says_so():
    assert machine.GpuSampler([]).start().stop() == GpuSamples(measured=False, reason="no GPU: the trial holds none")
    energy = run_energy(machine.GpuSampler([]).start().stop(), duration_s=20.0, input_tokens=1.0, output_tokens=1.0)
    assert not energy.measured and energy.reason == "no GPU: the trial holds none" and energy.joules is None
    fp = machine.fingerprint([])
    assert fp.gpu_not_read == "no GPU: the trial holds none" and fp.gpu_count is None
    # the same machine twice is one key; another host another
    assert machine.fingerprint([]).key == fp.key
    assert fp.model_copy(update={"host": "0" * 12}).key != fp.key


class FakeNvml:
    """Stand-in for `pynvml`: two GPUs whose SM clock falls from 1980 MHz by 15 MHz a read (throttling),
    temperatures 60 + reads, power 500 W (NVML answers in milliwatts); GPU 1 reports no power."""

    NVML_CLOCK_SM = 1
    NVML_TEMPERATURE_GPU = 0

    class NVMLError_NotSupported(Exception):
        pass

    def __init__(self):
        self.reads, self.inits, self.shutdowns = 0, 0, 0

    def nvmlInit(self):
        self.inits += 1

    def nvmlShutdown(self):
        self.shutdowns += 1

    def nvmlDeviceGetHandleByIndex(self, i):
        return i

    def nvmlDeviceGetHandleByUUID(self, uuid):
        return int(uuid.rsplit("-", 1)[1])

    def nvmlDeviceGetClockInfo(self, h, kind):
        assert kind == self.NVML_CLOCK_SM
        self.reads += 1
        return 1980 - 15 * (self.reads - 1)

    def nvmlDeviceGetTemperature(self, h, kind):
        return 60 + self.reads

    def nvmlDeviceGetPowerUsage(self, h):
        if h == 1:
            raise self.NVMLError_NotSupported("Not Supported")
        return 500_000

    def nvmlDeviceGetName(self, h):
        return b"NVIDIA H100 80GB HBM3"

    def nvmlSystemGetDriverVersion(self):
        return "580.159.04"

    def nvmlSystemGetCudaDriverVersion(self):
        return 13000

    def nvmlDeviceGetUUID(self, h):
        return f"GPU-aaaa-{h}"

    def nvmlDeviceGetMaxClockInfo(self, h, kind):
        return 1980

    def nvmlDeviceGetCount(self):
        return 4


def test_samples_over_a_runs_window_are_min_mean_max_of_every_gpu():
    nvml = FakeNvml()
    sampler = machine.GpuSampler(["0", "GPU-aaaa-1"], interval_s=0.01, nvml=nvml).start()
    time.sleep(0.1)
    samples = sampler.stop()
    assert samples.measured and samples.reason is None and samples.gpus == ["0", "GPU-aaaa-1"]
    assert samples.samples >= 2 and nvml.inits == nvml.shutdowns == 1
    clock = samples.sm_clock_mhz
    assert clock.max == 1980 and clock.min == 1980 - 15 * (nvml.reads - 1) and clock.min < clock.mean < clock.max
    assert samples.power_w.min == samples.power_w.max == 500.0  # GPU 1's missing power is left out, not a zero
    assert samples.temperature_c.min == 61


def test_a_window_keeps_the_samples_within_it():
    # samples (time, SM clock, temperature, power) as the thread records them: the run's own window
    # (the benchmark's start and end, from its report) leaves out the client's start and end
    sampler = machine.GpuSampler(["0"], nvml=FakeNvml())
    sampler._handles = [0]
    sampler._samples = [(10.0, 1980.0, 50.0, 120.0), (11.0, 1800.0, 70.0, 650.0), (12.0, 1700.0, 75.0, 690.0),
                        (13.0, 1980.0, 52.0, 130.0)]
    windowed = sampler.stop(window=(10.5, 12.5))
    assert (windowed.sm_clock_mhz.min, windowed.sm_clock_mhz.max, windowed.power_w.mean) == (1700.0, 1800.0, 670.0)
    assert windowed.samples == 2
    # a run shorter than the sampling interval: the samples around it rather than none
    assert sampler.stop(window=(12.2, 12.4)).samples == 4


def test_a_runs_joules_are_its_power_integrated_over_exactly_its_window():
    # power ramps 100 -> 700 W over 10..13 s (200 W a second): over the window 10.5..12.5 the curve is linear,
    # so the trapezoid is exact: 2 s x the mean of 200 and 600 W (the samples just outside give the edges)
    sampler = machine.GpuSampler(["0"], nvml=FakeNvml())
    sampler._handles = [0]
    sampler._samples = [(10.0, 1980.0, 50.0, 100.0), (11.0, 1980.0, 50.0, 300.0), (12.0, 1980.0, 50.0, 500.0),
                        (13.0, 1980.0, 50.0, 700.0)]
    samples = sampler.stop(window=(10.5, 12.5))
    assert samples.window_s == 2.0 and samples.energy_j == pytest.approx(800.0)
    assert (samples.power_total_w.min, samples.power_total_w.max) == (300.0, 500.0)
    energy = run_energy(samples, duration_s=2.0, input_tokens=1000.0, output_tokens=600.0)
    assert energy.measured and energy.method == "trapezoid" and energy.mean_w == pytest.approx(400.0)
    assert energy.output_tokens_per_j == pytest.approx(0.75) and energy.total_tokens_per_j == pytest.approx(2.0)


def test_a_trials_gpus_together_make_its_power_and_a_gpu_without_power_makes_no_joules():
    sampler = machine.GpuSampler(["0", "1"], nvml=FakeNvml())
    sampler._handles = [0, 1]
    sampler._samples = [(10.0, 1980.0, 50.0, 400.0), (10.0, 1980.0, 50.0, 600.0),
                        (11.0, 1980.0, 50.0, 400.0), (11.0, 1980.0, 50.0, 600.0)]
    both = sampler.stop(window=(10.0, 11.0))
    assert both.power_total_w.max == 1000.0 and both.energy_j == pytest.approx(1000.0)
    assert both.power_w.max == 600.0  # each GPU's own, as before
    # FakeNvml's GPU 1 answers no power: a sum without it would be a GPU short, so no joules at all
    real = machine.GpuSampler(["0", "1"], interval_s=0.01, nvml=FakeNvml()).start()
    time.sleep(0.05)
    partial = real.stop()
    assert partial.measured and partial.power_w.mean == 500.0
    assert partial.energy_j is None and partial.power_total_w is None


def test_the_samplers_rate_gives_a_few_samples_a_second_over_a_runs_window():
    nvml = FakeNvml()
    sampler = machine.GpuSampler(["0"], nvml=nvml).start()  # the rate every run samples at
    started = time.time()
    time.sleep(1.2)
    samples = sampler.stop(window=(started, time.time()))
    assert machine.SAMPLE_INTERVAL_S <= 0.25 and samples.samples >= 4
    # constant 500 W: the joules are 500 W x the window, whatever the samples' timing
    assert samples.energy_j == pytest.approx(500.0 * samples.window_s)


def test_the_fingerprint_names_the_gpus_and_driver():
    fp = machine.fingerprint(["0", "1"], nvml=FakeNvml())
    assert (fp.gpu_name, fp.gpu_count, fp.gpu_driver, fp.cuda_driver) == ("NVIDIA H100 80GB HBM3", 2, "580.159.04", "13.0")
    assert fp.gpu_max_sm_clock_mhz == 1980 and fp.gpu_not_read is None and len(fp.gpu_uuids) == 12
    # other GPUs of the same host: the same machine (its key names all four), other GPUs of the trial
    other = machine.fingerprint(["2", "3"], nvml=FakeNvml())
    assert other.key == fp.key and other.gpu_uuids != fp.gpu_uuids and len(fp.node_gpus) == 12
    # a trial without GPUs on that host is on that machine too
    assert machine.fingerprint([], nvml=FakeNvml()).key == fp.key
    # a host whose GPUs are others (a lent machine, every one named 'vm'), or a node labelled as another machine
    assert fp.model_copy(update={"node_gpus": "0" * 12}).key != fp.key
    assert machine.fingerprint(["0", "1"], nvml=FakeNvml(), label="rack2-07").key != fp.key


@pytest.mark.gpu
@pytest.mark.skipif(shutil.which("nvidia-smi") is None, reason="needs an NVIDIA GPU")
def test_a_real_gpu_is_sampled():
    sampler = machine.GpuSampler(["0"], interval_s=0.05).start()
    time.sleep(0.5)
    samples = sampler.stop()
    assert samples.measured and samples.samples >= 5, samples.reason
    assert samples.sm_clock_mhz.max > 0 and 0 < samples.temperature_c.mean < 110
    fp = machine.fingerprint(["0"])
    assert fp.gpu_name and fp.gpu_driver and fp.gpu_not_read is None
