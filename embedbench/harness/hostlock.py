"""An advisory host-wide lock so two embedbench runs on one machine cannot overlap.

``host_lock()`` takes an exclusive, non-blocking ``flock`` on ``embedbench.lock``
in ``$EMBEDBENCH_LOCK_DIR`` (default: the system temp directory) and writes the
holder's pid into it. A second run is refused at once with ``HostLockError``
naming the holder's pid. The kernel drops the lock when the holder exits, also
when it is killed, so a stale file never blocks a later run. The file itself is
left in place (deleting a flock file races with the next taker).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from embedbench.errors import HostLockError

__all__ = ["LOCK_DIR_ENV", "LOCK_NAME", "HostLock", "host_lock", "lock_path"]

LOCK_DIR_ENV = "EMBEDBENCH_LOCK_DIR"
LOCK_NAME = "embedbench.lock"


def lock_path(lock_dir: str | Path | None = None) -> Path:
    """The lock file: ``lock_dir``, else ``$EMBEDBENCH_LOCK_DIR``, else the temp dir."""
    base = lock_dir or os.environ.get(LOCK_DIR_ENV) or tempfile.gettempdir()
    return Path(base).expanduser() / LOCK_NAME


@dataclass(frozen=True)
class HostLock:
    """A held host lock (recorded in the run metadata)."""

    path: Path
    pid: int

    def to_json(self) -> dict[str, object]:
        """Plain JSON values."""
        return {"path": str(self.path), "pid": self.pid}


def _holder(fd: int) -> str:
    try:
        text = os.pread(fd, 64, 0).decode("ascii", "replace").strip()
    except OSError:
        return "pid unknown"
    return f"pid {text}" if text.isdigit() else "pid unknown"


def _open(path: Path) -> tuple[int, bool]:
    """Open (creating) the lock file; read-only when another user's file is not writable."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        return os.open(path, os.O_RDWR | os.O_CREAT, 0o666), True
    except PermissionError:
        try:
            return os.open(path, os.O_RDONLY), False
        except OSError as exc:
            raise _cannot(path, exc) from exc
    except OSError as exc:
        raise _cannot(path, exc) from exc


def _cannot(path: Path, exc: OSError) -> HostLockError:
    reason = exc.strerror or type(exc).__name__
    return HostLockError(
        f"cannot open the host lock file {path} ({reason}); "
        f"set {LOCK_DIR_ENV} to a writable directory shared by all embedbench runs on this host"
    )


@contextlib.contextmanager
def host_lock(lock_dir: str | Path | None = None) -> Iterator[HostLock]:
    """Hold the host lock for the body; refuse with ``HostLockError`` if another run holds it."""
    path = lock_path(lock_dir)
    fd, writable = _open(path)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise _cannot(path, exc) from exc
            holder = _holder(fd)
            mine = " (this process)" if holder == f"pid {os.getpid()}" else ""
            raise HostLockError(
                f"another embedbench run ({holder}{mine}) holds the host lock {path}; wait for it "
                f"to finish or stop it; runs on one machine must not overlap"
            ) from None
        pid = os.getpid()
        if writable:
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{pid}\n".encode(), 0)
        try:
            yield HostLock(path, pid)
        finally:
            if writable:
                with contextlib.suppress(OSError):
                    os.ftruncate(fd, 0)
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
