"""The clock and power samples a benchmark records beside its times (bench/machine_info.py): pure Python, no GPU."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))

import machine_info  # noqa: E402


def test_a_sample_at_the_power_cap_is_power_limited():
    assert machine_info.parse_sample("692.50, 1875, 0x0000000000000004", 3.0) == (3.0, 692.5, 1875.0, True)


def test_the_hardware_power_brake_counts_too_and_idle_does_not():
    assert machine_info.parse_sample("650.00, 1590, 0x0000000000000080", 1.0)[3] is True
    assert machine_info.parse_sample("80.96, 345, 0x0000000000000001", 1.0)[3] is False
    assert machine_info.parse_sample("120.00, 1980, 0x0000000000000000", 1.0)[3] is False


def test_lines_that_are_not_samples_are_dropped():
    assert machine_info.parse_sample("power.draw [W], clocks.current.sm [MHz], clocks_event_reasons.active", 0) is None
    assert machine_info.parse_sample("[N/A], 1980, 0x0000000000000000", 0) is None
    assert machine_info.parse_sample("Failed to initialize NVML: Unknown Error", 0) is None


def test_summary_of_samples():
    samples = [(0.0, 700.0, 1845.0, True), (0.1, 690.0, 1875.0, True), (0.2, 400.0, 1980.0, False)]
    assert machine_info.summarize(samples) == {"sm_clock_mhz": 1875.0, "sm_clock_min_mhz": 1845.0,
                                               "power_w": 690.0, "power_limited_share": 2 / 3, "samples": 3}


def test_summary_without_samples_is_null():
    out = machine_info.summarize([])
    assert out["samples"] == 0 and out["sm_clock_mhz"] is None and out["power_limited_share"] is None


def test_a_timing_sees_only_the_samples_inside_its_spans():
    sampler = machine_info.ClockSampler.__new__(machine_info.ClockSampler)  # no nvidia-smi behind it
    sampler.samples = [(1.0, 700.0, 1800.0, True), (2.0, 300.0, 1980.0, False), (3.0, 690.0, 1860.0, True),
                       (5.0, 100.0, 345.0, False)]
    out = sampler.during([(0.5, 1.5), (2.5, 3.5)])
    assert out["samples"] == 2 and out["sm_clock_mhz"] == 1830.0 and out["power_limited_share"] == 1.0
    assert sampler.during([(6.0, 7.0)])["samples"] == 0


def test_without_nvidia_smi_nothing_is_sampled(monkeypatch):
    def missing(*args, **kwargs):
        raise OSError("nvidia-smi: not found")
    monkeypatch.setattr(machine_info.subprocess, "Popen", missing)
    sampler = machine_info.ClockSampler()
    assert sampler.during([(0.0, 1e12)])["samples"] == 0
    sampler.close()


def test_a_timing_is_power_limited_only_in_most_of_its_samples():
    assert machine_info.mostly_power_limited({"power_limited_share": 0.6}) is True
    assert machine_info.mostly_power_limited({"power_limited_share": 0.5}) is False
    assert machine_info.mostly_power_limited({"power_limited_share": None}) is False
    assert machine_info.mostly_power_limited({}) is False
