"""The measuring harness: how to time two callables fairly, with no model knowledge.

Timing windows and raw records (``timing``, ``windows``), the quiet-machine guards
(``isolation``, ``allocator``, ``hostlock``, ``interrupts``, ``ioguard``, ``devices``),
machine facts (``sysinfo``), the check that timed code is the code on disk
(``freshness``), one call's counted work outside any timed window (``ledger``), the
paired design's blocks and worker processes (``design``), and the torch-free analysis of
raw records (``blocks``, ``stats``, ``diagnostics``). Nothing here imports
:mod:`embedbench.omni` (``tests/test_layout.py``).
"""

__all__ = []
