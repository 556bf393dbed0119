"""Pairs of callables whose answer is known, as importable factories.

Each factory returns ``{"baseline": f, "fixed": g}``, the shape
``embedbench.paired_benchmark("known_pairs:NAME", ...)`` takes, and the pyperf side of
``benchmarks/side_by_side.py`` calls the same factory in every pyperf worker, so both
tools time the very same calls.

- ``blake2b``: 21 BLAKE2b hashes of a fixed 64 KiB buffer against 20 (the fixed side
  does 4.76 % less work): compute-bound, the right verdict is "faster";
- ``same``: 20 hashes against 20 (an A/A pair of two distinct but identical callables):
  the right verdict is "no detectable difference";
- ``audio``: the built-in replica's Audio case at 1172 tokens on the embedded default
  checkpoint, both wrapper forms (two table lookups against one): memory-bound, the
  right verdict is "faster".
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["PAIRS", "KnownPair", "audio", "blake2b", "same"]

HASH_BYTES = 64 * 1024
HASHES = 20
AUDIO_TOKENS = 1172


def _hashes(count: int) -> Callable[[], None]:
    from embedbench.harness.carriers import hash_work

    one = hash_work(HASH_BYTES)

    def call() -> None:
        for _ in range(count):
            one()

    return call


def blake2b() -> dict[str, Callable[[], Any]]:
    """21 hashes (baseline) against 20 (fixed)."""
    return {"baseline": _hashes(HASHES + 1), "fixed": _hashes(HASHES)}


def same() -> dict[str, Callable[[], Any]]:
    """20 hashes against 20: two callables that do the same work."""
    return {"baseline": _hashes(HASHES), "fixed": _hashes(HASHES)}


def audio() -> dict[str, Callable[[], Any]]:
    """Both wrapper forms of the built-in replica on the Audio case (one torch thread)."""
    import _common as C
    import torch

    torch.set_num_threads(1)
    target, facts = C.reference_setup(C.HIDDEN_7B, log=lambda _m: None)
    return {
        v: C.scenario_call(target, facts, "audio", AUDIO_TOKENS, v) for v in ("baseline", "fixed")
    }


@dataclass(frozen=True)
class KnownPair:
    """A factory and what a right answer about it is."""

    name: str
    factory: Callable[[], dict[str, Callable[[], Any]]]
    right_verdict: str
    truth: str


PAIRS: dict[str, KnownPair] = {
    p.name: p
    for p in (
        KnownPair("blake2b", blake2b, "faster", "4.76 % less work (21 against 20 hashes)"),
        KnownPair("same", same, "no detectable difference", "A/A: the same work"),
        KnownPair("audio", audio, "faster", "one table lookup fewer (two against one)"),
    )
}
