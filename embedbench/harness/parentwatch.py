"""What the parent process does while one of its workers measures.

A worker measures from the acknowledgement of its ``ready`` event to its ``done`` event,
pausing only while it waits for the parent to acknowledge an event (when the parent
writes result files). Over the measuring spans, ``ParentMeter`` adds up this process's
CPU time and the bytes it read and wrote (``/proc/self/io``: ``rchar`` and ``wchar``,
every read and write system call, pipes included) and how many of the bytes read came
from the worker's event pipe. A parent that does nothing else while a worker times reads
exactly the pipe's bytes and writes nothing; metadata.json keeps the reading per worker
so that a reader can check it (docs/format.md).
"""

from __future__ import annotations

import resource
import time
from dataclasses import dataclass
from pathlib import Path

__all__ = ["PROC_SELF_IO", "ParentActivity", "ParentMeter", "read_usage"]

PROC_SELF_IO = Path("/proc/self/io")


@dataclass(frozen=True)
class _Usage:
    """One reading of this process: CPU seconds, and bytes read and written (None where
    ``/proc/self/io`` is unreadable), with the size of that file as read (the meter's own
    read, which the next reading counts)."""

    cpu_s: float
    read: int | None
    written: int | None
    own_read: int


def read_usage(io_path: Path = PROC_SELF_IO) -> _Usage:
    """This process's CPU time (user + system, its threads, not its children) and I/O."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    try:
        text = io_path.read_text()
    except OSError:
        return _Usage(usage.ru_utime + usage.ru_stime, None, None, 0)
    fields = dict(line.split(":", 1) for line in text.splitlines() if ":" in line)
    try:
        read, written = int(fields["rchar"]), int(fields["wchar"])
    except (KeyError, ValueError):
        return _Usage(usage.ru_utime + usage.ru_stime, None, None, len(text.encode()))
    return _Usage(usage.ru_utime + usage.ru_stime, read, written, len(text.encode()))


@dataclass(frozen=True)
class ParentActivity:
    """The parent's CPU time and I/O over a worker's measuring spans.

    ``read_bytes`` and ``written_bytes`` leave out the meter's own reads of
    ``/proc/self/io``; ``other_read_bytes`` is what was read besides the event pipe
    (None where ``/proc/self/io`` is unreadable).
    """

    measuring_s: float
    cpu_s: float
    pipe_bytes: int
    read_bytes: int | None
    written_bytes: int | None

    @property
    def other_read_bytes(self) -> int | None:
        """Bytes read from anything but the worker's pipe."""
        return None if self.read_bytes is None else self.read_bytes - self.pipe_bytes

    def to_json(self) -> dict[str, float | int | None]:
        """Plain JSON, as metadata.json keeps it under each worker."""
        return {
            "measuring_s": round(self.measuring_s, 6),
            "cpu_s": round(self.cpu_s, 6),
            "pipe_bytes": self.pipe_bytes,
            "read_bytes": self.read_bytes,
            "other_read_bytes": self.other_read_bytes,
            "written_bytes": self.written_bytes,
        }


class ParentMeter:
    """Adds up the parent's activity over the spans between ``resume`` and ``pause``."""

    def __init__(self, io_path: Path = PROC_SELF_IO) -> None:
        self._io_path = io_path
        self._start: _Usage | None = None
        self._started_at = 0.0
        self._measuring_s = 0.0
        self._cpu_s = 0.0
        self._read: int | None = 0
        self._written: int | None = 0
        self._pipe = 0

    @property
    def running(self) -> bool:
        """True between ``resume`` and ``pause``."""
        return self._start is not None

    def resume(self) -> None:
        """The worker measures again (after an acknowledgement)."""
        if self._start is None:
            self._start = read_usage(self._io_path)
            self._started_at = time.monotonic()

    def pipe(self, nbytes: int) -> None:
        """``nbytes`` were read from the worker's event pipe."""
        if self._start is not None:
            self._pipe += nbytes

    def pause(self) -> None:
        """The worker waits for the parent (or is done): the span ends here."""
        start = self._start
        if start is None:
            return
        end = read_usage(self._io_path)
        self._start = None
        self._measuring_s += time.monotonic() - self._started_at
        self._cpu_s += end.cpu_s - start.cpu_s
        if self._read is None or start.read is None or end.read is None:
            self._read = None
        else:  # the start reading's own read of /proc/self/io is counted in end.read
            self._read += end.read - start.read - start.own_read
        if self._written is None or start.written is None or end.written is None:
            self._written = None
        else:
            self._written += end.written - start.written

    def reading(self) -> ParentActivity:
        """What was added up so far (a running span is closed first)."""
        self.pause()
        return ParentActivity(
            measuring_s=self._measuring_s,
            cpu_s=self._cpu_s,
            pipe_bytes=self._pipe,
            read_bytes=self._read,
            written_bytes=self._written,
        )
