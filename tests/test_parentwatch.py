"""The parent meter counts this process's own reads and writes exactly, and only over
the spans between resume and pause."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from embedbench.harness.parentwatch import PROC_SELF_IO, ParentMeter

pytestmark = pytest.mark.skipif(not PROC_SELF_IO.exists(), reason="needs /proc/self/io")


def _read(path: Path) -> int:
    with open(path, "rb", buffering=0) as f:
        return len(f.read())


def _write(path: Path, nbytes: int) -> None:
    with open(path, "wb", buffering=0) as f:
        f.write(b"x" * nbytes)


def test_reads_and_writes_inside_a_span_are_counted_to_the_byte(tmp_path):
    source = tmp_path / "source"
    source.write_bytes(b"y" * 12_345)
    meter = ParentMeter()
    meter.resume()
    got = _read(source)
    _write(tmp_path / "out", 4_321)
    reading = meter.reading()
    assert got == 12_345
    assert reading.read_bytes == 12_345
    assert reading.written_bytes == 4_321
    assert reading.pipe_bytes == 0 and reading.other_read_bytes == 12_345


def test_what_happens_between_spans_is_left_out(tmp_path):
    source = tmp_path / "source"
    source.write_bytes(b"y" * 1_000)
    meter = ParentMeter()
    meter.resume()
    _read(source)
    meter.pause()
    _read(source)  # the worker waits for its acknowledgement: not counted
    _write(tmp_path / "out", 5_000)
    meter.resume()
    _read(source)
    reading = meter.reading()
    assert reading.read_bytes == 2_000
    assert reading.written_bytes == 0


def test_pipe_bytes_are_told_apart_from_other_reads():
    meter = ParentMeter()
    read_end, write_end = os.pipe()
    try:
        os.write(write_end, b"z" * 777)
        meter.resume()
        meter.pipe(len(os.read(read_end, 4096)))
        reading = meter.reading()
    finally:
        os.close(read_end)
        os.close(write_end)
    assert reading.pipe_bytes == reading.read_bytes == 777
    assert reading.other_read_bytes == 0
    assert reading.measuring_s >= 0 and reading.cpu_s >= 0


def test_without_proc_io_the_bytes_are_unknown_not_zero(tmp_path):
    meter = ParentMeter(io_path=tmp_path / "missing")
    meter.resume()
    reading = meter.reading()
    assert reading.read_bytes is None and reading.written_bytes is None
    assert reading.other_read_bytes is None
    assert reading.to_json()["written_bytes"] is None
