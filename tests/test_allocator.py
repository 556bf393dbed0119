"""The steady allocator: big buffers stop page-faulting once the warm-up has touched them."""

import subprocess
import sys

import pytest

from embedbench.harness.isolation import allowed_cores, isolated
from embedbench.harness.timing import measure_pair

FAULTS_AFTER_WARMUP = """
import resource, sys, torch
from embedbench.harness.allocator import steady_allocator
if sys.argv[1] == "steady":
    assert steady_allocator()["applied"]
def faults():
    return resource.getrusage(resource.RUSAGE_THREAD).ru_minflt
def call():  # like the baseline: two 8.4 MB buffers alive at once, then freed
    a = torch.empty(1172 * 3584, dtype=torch.bfloat16).fill_(1)
    b = torch.empty(1172 * 3584, dtype=torch.bfloat16).fill_(2)
    return float(a[0] + b[-1])
for _ in range(5):
    call()
start = faults()
for _ in range(20):
    call()
print((faults() - start) / 20)
"""


def _faults_per_call(mode: str) -> float:
    proc = subprocess.run(
        [sys.executable, "-c", FAULTS_AFTER_WARMUP, mode],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return float(proc.stdout.strip())


@pytest.mark.e2e  # seconds: see TIERS in conftest.py
def test_steady_allocator_removes_page_faults_from_repeated_big_buffers():
    # Two 8.4 MB buffers are 4,100 pages of 4 kB: a call on fresh pages faults thousands of
    # times. A few stray faults may remain (the host's memory reclaim can take cold pages).
    assert _faults_per_call("steady") < 410


FAULTS_IN_TIMED_BLOCKS = """
import sys, torch
from embedbench.harness.isolation import isolated
from embedbench.harness.timing import measure_pair
table = torch.ones(4096, 3584, dtype=torch.bfloat16)
ids = torch.randint(0, 4096, (1172,))
def lookup():  # one 8.4 MB output a call, as a text lookup at the default geometry
    return torch.nn.functional.embedding(ids, table)
with isolated(int(sys.argv[1])):
    records = measure_pair(
        {"baseline": lookup, "fixed": lookup}, case="x", tokens=1172, warmup=30,
        blocks=4, iterations=10, seed=0, device="cpu",
    )
print(sum(r.minor_faults for r in records))
"""


@pytest.mark.e2e  # seconds: see TIERS in conftest.py
def test_no_timed_call_faults_after_the_warm_up():
    # What the blocks keep alive (their schedule, the records) is allocated before the
    # warm-up: allocated after it, it split the heap's free 8 MB chunks, and the first
    # block's calls each grew the heap by a fresh buffer (2,051 faults, ~20 ms a call).
    proc = subprocess.run(
        [sys.executable, "-c", FAULTS_IN_TIMED_BLOCKS, str(allowed_cores()[0])],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert int(proc.stdout.strip()) < 100  # one call's fresh buffer would be 2,051


def test_isolation_applies_it_and_blocks_record_their_faults():
    with isolated(allowed_cores()[0]) as state:
        assert state.allocator["applied"] is True
        records = measure_pair(
            {"baseline": lambda: None, "fixed": lambda: None},
            case="x",
            tokens=0,
            warmup=1,
            blocks=2,
            iterations=3,
            seed=0,
            device="cpu",
        )
    assert all(isinstance(r.minor_faults, int) and r.minor_faults >= 0 for r in records)
