"""GPU facts and the SM clock through NVML (docs/gpu.md), and the clock in every block record.

No GPU here: a stand-in library answers the NVML calls the way the driver's does (status
0 and values written through the pointers); the real library's absence is the other path.
"""

from __future__ import annotations

import ctypes

import torch

from embedbench.harness import devices, nvml, timing


class FakeNvml:
    """The NVML calls embedbench makes, with a settable SM clock and failure points."""

    def __init__(self, *, clock: int = 1980, known_uuid: bool = True, fail: str = "") -> None:
        self.clock = clock
        self.known_uuid = known_uuid
        self.fail = fail
        self.looked_up: list[bytes] = []

    def _status(self, name: str) -> int:
        return 999 if name == self.fail else 0

    def nvmlInit_v2(self) -> int:
        return self._status("nvmlInit_v2")

    def nvmlDeviceGetHandleByUUID(self, uuid: bytes, handle) -> int:
        self.looked_up.append(uuid)
        if not self.known_uuid:
            return 13  # NVML_ERROR_NOT_FOUND
        handle.contents.value = 7
        return 0

    def nvmlDeviceGetHandleByIndex_v2(self, index, handle) -> int:
        handle.contents.value = 100 + index.value
        return self._status("nvmlDeviceGetHandleByIndex_v2")

    def nvmlSystemGetDriverVersion(self, buffer, size) -> int:
        buffer.value = b"580.65.06"
        return self._status("nvmlSystemGetDriverVersion")

    def nvmlDeviceGetUUID(self, handle, buffer, size) -> int:
        buffer.value = b"GPU-1234"
        return 0

    def nvmlDeviceGetClockInfo(self, handle, clock, value) -> int:
        assert clock == nvml.NVML_CLOCK_SM
        value.contents.value = self.clock
        return self._status("nvmlDeviceGetClockInfo")

    def nvmlDeviceGetMaxClockInfo(self, handle, clock, value) -> int:
        value.contents.value = 1980
        return 0


def test_gpu_facts_name_the_driver_uuid_and_sm_clocks():
    lib = FakeNvml(clock=345)
    facts = nvml.gpu_facts("1234", 0, lib=lib)
    assert facts == {
        "source": "nvml",
        "driver_version": "580.65.06",
        "uuid": "GPU-1234",
        "sm_clock_mhz": 345,
        "sm_clock_max_mhz": 1980,
    }
    assert lib.looked_up == [b"GPU-1234"]  # by UUID, as torch names the device


def test_an_unknown_uuid_falls_back_to_the_index():
    lib = FakeNvml(known_uuid=False)
    assert nvml.gpu_facts("abcd", 2, lib=lib)["source"] == "nvml"


def test_a_failing_call_or_no_library_reads_as_unavailable(monkeypatch):
    failed = nvml.gpu_facts(None, 0, lib=FakeNvml(fail="nvmlSystemGetDriverVersion"))
    assert failed == {
        "source": "unavailable",
        "error": "nvmlSystemGetDriverVersion returned 999",
    }

    def missing(name):
        raise OSError(f"{name}: cannot open shared object file")

    monkeypatch.setattr(ctypes, "CDLL", missing)
    absent = nvml.gpu_facts(None, 0)
    assert absent["source"] == "unavailable" and "not loadable" in absent["error"]
    assert nvml.sm_clock_reader(None, 0)() is None


def test_the_clock_reader_follows_the_device_and_says_none_when_a_read_fails():
    lib = FakeNvml(clock=1410)
    read = nvml.sm_clock_reader("1234", 0, lib=lib)
    assert read() == 1410.0
    lib.clock = 345  # idle clocks after a gap
    assert read() == 345.0
    lib.fail = "nvmlDeviceGetClockInfo"
    assert read() is None


def test_off_cuda_the_gpu_clock_is_none():
    assert devices.gpu_clock_reader(torch.device("cpu"))() is None
    assert "nvml" not in devices.describe(torch.device("cpu"))


def test_every_block_record_carries_the_gpu_clock_at_its_start_and_end():
    readings = iter(range(1000, 2000, 10))
    records = timing.measure_pair(
        {"baseline": lambda: None, "fixed": lambda: None},
        case="audio",
        tokens=300,
        warmup=1,
        blocks=2,
        iterations=3,
        seed=1,
        device="cuda",
        probes=timing.BlockProbes(read_gpu_mhz=lambda: float(next(readings))),
    )
    starts = [r.gpu_mhz_start for r in records]
    ends = [r.gpu_mhz_end for r in records]
    assert starts == [1000.0, 1020.0, 1040.0, 1060.0] and ends == [1010.0, 1030.0, 1050.0, 1070.0]
    floor = timing.measure_timer_floor(device="cpu")
    assert {(r.gpu_mhz_start, r.gpu_mhz_end) for r in floor} == {(None, None)}
