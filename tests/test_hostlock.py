"""The host lock: a second concurrent run is refused with the holder's pid."""

import os
import subprocess
import sys

import pytest

from embedbench.errors import EmbedbenchError, HostLockError
from embedbench.harness.hostlock import LOCK_DIR_ENV, LOCK_NAME, host_lock, lock_path

TRY_LOCK = (
    "from embedbench.errors import HostLockError\n"
    "from embedbench.harness.hostlock import host_lock\n"
    "try:\n"
    "    with host_lock() as held:\n"
    "        print('ACQUIRED', held.pid)\n"
    "except HostLockError as exc:\n"
    "    print('REFUSED', exc)\n"
)


def _other_process() -> str:
    done = subprocess.run(
        [sys.executable, "-c", TRY_LOCK], capture_output=True, text=True, timeout=60, check=True
    )
    return done.stdout.strip()


@pytest.fixture
def lock_dir(tmp_path, monkeypatch):
    monkeypatch.setenv(LOCK_DIR_ENV, str(tmp_path / "locks"))
    return tmp_path / "locks"


def test_lock_file_location(lock_dir, monkeypatch):
    assert lock_path() == lock_dir / LOCK_NAME
    assert lock_path(lock_dir / "other") == lock_dir / "other" / LOCK_NAME
    monkeypatch.delenv(LOCK_DIR_ENV)
    assert lock_path().name == LOCK_NAME and lock_path().parent.is_dir()


def test_second_process_is_refused_with_the_holders_pid_then_succeeds(lock_dir):
    with host_lock() as held:
        assert held.pid == os.getpid()
        assert (lock_dir / LOCK_NAME).read_text().strip() == str(os.getpid())
        answer = _other_process()
        assert answer.startswith("REFUSED")
        assert f"pid {os.getpid()}" in answer
        assert "\n" not in answer
        assert "wait for it to finish" in answer
    after = _other_process()
    assert after.startswith("ACQUIRED")
    assert after != f"ACQUIRED {os.getpid()}"


def test_second_lock_in_the_same_process_is_refused_and_names_it(lock_dir):
    with host_lock(), pytest.raises(HostLockError, match="this process") as info, host_lock():
        pass
    assert isinstance(info.value, EmbedbenchError)
    with host_lock() as again:  # released on exit, also after the refusal
        assert again.to_json()["pid"] == os.getpid()


def test_unusable_lock_directory_is_a_one_line_error(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with pytest.raises(HostLockError, match=LOCK_DIR_ENV), host_lock(blocker / "sub"):
        pass
