"""exit_now: what a process printed is all there, its atexit handlers ran, and it ends
with the code it was given."""

from __future__ import annotations

import subprocess
import sys

import pytest

SCRIPT = """
import atexit
import sys
from embedbench.harness.exiting import exit_now
atexit.register(sys.stderr.write, " and an atexit handler's words")
sys.stdout.write("no newline on stdout")
sys.stderr.write("no newline on stderr")
exit_now(int(sys.argv[1]))
print("never reached")
"""


@pytest.mark.parametrize("code", [0, 2, 130])
def test_exit_now_runs_atexit_flushes_both_streams_and_keeps_the_code(code: int) -> None:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(code)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == code
    assert done.stdout == "no newline on stdout"
    assert done.stderr == "no newline on stderr and an atexit handler's words"


def test_the_command_and_the_module_end_through_exit_now() -> None:
    """`python -m embedbench` with a usage error: its one line and exit code 2 survive."""
    done = subprocess.run(
        [sys.executable, "-m", "embedbench", "run", "--blocks", "zero"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("embedbench: "), done.stderr
