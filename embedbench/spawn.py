"""Worker processes, from the parent's side: start one, feed its events to a collector.

A worker (``python -m embedbench.worker``) gets its share as the first line of its stdin
and writes ``measure.measure_share``'s events to stdout. ``run_worker`` hands each event
to the collector and acknowledges each one of ``measure.HANDSHAKE_EVENTS`` once the
collector has handled it, so the parent writes while the worker waits and only reads the
pipe while it measures (``ParentMeter`` records that per worker; docs/method.md).
"""

from __future__ import annotations

import json
import os
import selectors
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, nullcontext, suppress
from pathlib import Path
from typing import Protocol

import embedbench
from embedbench.errors import EmbedbenchError
from embedbench.harness.interrupts import RunInterrupted, StopFlag
from embedbench.harness.parentwatch import ParentActivity, ParentMeter
from embedbench.measure import ACK, HANDSHAKE_EVENTS, Event, Share

__all__ = ["PROGRESS_HOLD_S", "EventSink", "WorkerError", "run_worker", "worker_environment"]

Log = Callable[[str], None]
# A worker's progress is shown when it waits for an acknowledgement (after each case),
# or after this long without one, so the parent draws nothing while a worker times.
PROGRESS_HOLD_S = 2.0


class WorkerError(EmbedbenchError):
    """A worker process failed or reported something the run cannot accept."""


def worker_environment(extra: Sequence[str] = ()) -> dict[str, str]:
    """This environment, with the imported embedbench first on the path (a worker runs
    exactly the package this process runs), then ``extra`` (where a factory is found)."""
    root = str(Path(embedbench.__file__).resolve().parent.parent)
    env = dict(os.environ)
    paths = (root, *extra, env.get("PYTHONPATH"))
    env["PYTHONPATH"] = os.pathsep.join(p for p in paths if p)
    return env


def _send_line(proc: subprocess.Popen, line: str) -> None:
    """One line to the worker's stdin; a worker that has ended tells by its exit code."""
    assert proc.stdin is not None
    try:
        proc.stdin.write(line.encode() + b"\n")
        proc.stdin.flush()
    except BrokenPipeError:
        pass


class EventSink(Protocol):
    """What ``run_worker`` feeds: ``_Collector`` or ``_PairedCollector``."""

    def handle(self, event: Event) -> None: ...

    def worker_finished(
        self, worker: int, exit_code: int, parent: ParentActivity | None = None
    ) -> None: ...


def run_worker(
    share: Share,
    collector: EventSink,
    stop: StopFlag,
    log: Log,
    *,
    spawning: Callable[[], AbstractContextManager[None]] = nullcontext,
    env: dict[str, str] | None = None,
) -> int:
    """Run one worker process to its end, feeding its events to ``collector``.

    The share goes as the first line of the worker's stdin; after each event of
    ``HANDSHAKE_EVENTS`` the worker waits until the collector has handled it (written
    what it changes) and one ``ACK`` line follows. ``spawning`` is where the process is
    started (the cores it inherits); ``env`` its environment (``worker_environment()``).
    """
    with tempfile.TemporaryFile() as errors:
        with spawning():
            proc = subprocess.Popen(
                [sys.executable, "-m", "embedbench.worker"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=errors,
                env=worker_environment() if env is None else env,
            )
        failure: Event | None = None
        meter = ParentMeter()
        measuring = False
        progress = _DeferredProgress(collector)
        try:
            _send_line(proc, json.dumps(share.to_json()))
            for event in _events(proc, stop, on_bytes=meter.pipe):
                kind = event["event"]
                if kind == "progress":  # shown while the worker waits, not while it times
                    progress.add(int(event["calls"]))
                    continue
                if kind in HANDSHAKE_EVENTS or kind in ("done", "error", "stopped"):
                    meter.pause()  # the worker waits for the acknowledgement, or has ended
                    progress.flush()
                if kind in ("error", "stopped"):
                    failure = event
                    continue
                collector.handle(event)
                if kind in HANDSHAKE_EVENTS:
                    _send_line(proc, ACK)
                    measuring = measuring or kind == "ready"
                    if measuring:  # from the acknowledged ready on, the worker measures
                        meter.resume()
            code = proc.wait()
        finally:
            if proc.poll() is None:  # a second Ctrl-C, or an error here: stop it now
                proc.kill()
                proc.wait()
            if proc.stdin is not None:
                with suppress(OSError):  # the worker has ended: its pipe may be broken
                    proc.stdin.close()
            progress.flush()
            collector.worker_finished(share.worker, proc.returncode, meter.reading())
        if code == 0:
            return code
        errors.seek(0)
        tail = [line for line in errors.read().decode(errors="replace").splitlines() if line]
    if code == 130 or (failure or {}).get("event") == "stopped":
        raise RunInterrupted(f"worker {share.worker} stopped")
    if (failure or {}).get("kind") == "usage":  # bad input found by the worker: its one line
        raise WorkerError(failure["message"])
    for line in tail[-20:]:
        log(f"worker {share.worker}: {line}")
    message = (failure or {}).get("message") or (tail[-1] if tail else f"exit code {code}")
    raise WorkerError(f"worker {share.worker} failed (exit code {code}): {message}")


class _DeferredProgress:
    """A worker's progress events, handed to the collector when the worker waits for an
    acknowledgement (so that the parent does not draw while it times), or after
    ``PROGRESS_HOLD_S`` of a long stretch without one."""

    def __init__(self, collector: EventSink) -> None:
        self.collector = collector
        self.pending = 0
        self.since = time.monotonic()

    def add(self, calls: int) -> None:
        self.pending += calls
        if time.monotonic() - self.since >= PROGRESS_HOLD_S:
            self.flush()

    def flush(self) -> None:
        if self.pending:
            self.collector.handle({"event": "progress", "calls": self.pending})
        self.pending = 0
        self.since = time.monotonic()


def _events(
    proc: subprocess.Popen, stop: StopFlag, on_bytes: Callable[[int], None] = lambda n: None
) -> Iterator[Event]:
    """The worker's events as they arrive (``on_bytes`` is told how many bytes each read
    took from the pipe); a stop request is passed on to the worker."""
    assert proc.stdout is not None
    fd = proc.stdout.fileno()
    buffer = b""
    forwarded = False
    with selectors.DefaultSelector() as selector:
        selector.register(fd, selectors.EVENT_READ)
        while True:
            if stop and not forwarded:
                forwarded = True
                proc.send_signal(signal.SIGTERM)
            if not selector.select(timeout=0.2):
                continue
            chunk = os.read(fd, 1 << 20)
            on_bytes(len(chunk))
            if not chunk:
                break
            buffer += chunk
            *lines, buffer = buffer.split(b"\n")
            for line in lines:
                if line.strip():
                    yield json.loads(line)
