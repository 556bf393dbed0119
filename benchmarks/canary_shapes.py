"""Which canary shape moves with the lookups when the host's memory system slows down?

    python benchmarks/canary_shapes.py --cpu-core 1            # 8 trials, ~2 min, ~1.7 GB
    python benchmarks/canary_shapes.py --cpu-core 1 --quick    # 2 trials, narrow (smoke)

One process, pinned, at the default geometry (a 152064 × 3584 bfloat16 table, 1172-token
lookups). Each trial times, interleaved, the measured operation and three candidate
canaries, the median of 14 calls each (the first dropped), six rounds:

- **lookup**: ``nn.Embedding`` of a new random 1172-token input (what the kit measures);
- **gather, table**: ``index_select`` of 1172 random rows of that table into a
  preallocated buffer (the canary as built, where the table is in host memory);
- **gather, own buffer**: the same from a buffer of twice the last-level cache (the
  canary's own source, where the table is on a device or too small);
- **copy**: one 8 MiB copy between two preallocated buffers (the first canary).

Trials alternate quiet with a memory neighbour (``neighbour.py``, twice the L3, always
on) on another core. The table gives each trial's times and, per shape, the ratio of its
slowest trial to its fastest: a canary that stays flat while the lookups move is blind to
what slows them. The host's own drift counts as much as the neighbour's effect; both are
what a canary is for.

``--quick`` (a smoke run): 2 trials on a table of ``QUICK_HIDDEN`` columns (the gathers
as narrow; the copy stays 8 MiB), the neighbour given 0.2 s to start and 0.1 s between
trials instead of 1.5 s and 1 s.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import _common as C

ROWS = 1172
SHAPES = ("lookup", "gather, table", "gather, own buffer", "copy")
ROUNDS = 6
CALLS = 15
QUICK_HIDDEN = 64


def _shapes(seed: int = 0, hidden: int = C.HIDDEN_7B) -> dict[str, object]:
    """The four operations, each a zero-argument callable (the table and the gathers
    ``hidden`` columns wide)."""
    import torch

    from embedbench.harness.canary import source_bytes
    from embedbench.harness.sysinfo import last_level_cache_bytes

    torch.set_num_threads(1)
    table = torch.randn(C.VOCAB_7B, hidden).to(torch.bfloat16)
    embedding = torch.nn.Embedding.from_pretrained(table)
    generator = torch.Generator().manual_seed(seed)
    inputs = [torch.randint(0, C.VOCAB_7B, (ROWS,), generator=generator) for _ in range(64)]
    own_rows = source_bytes(last_level_cache_bytes(0)) // (2 * hidden)
    own = torch.ones(own_rows, hidden, dtype=torch.bfloat16)
    own_inputs = [i % own_rows for i in inputs]
    out = torch.empty(ROWS, hidden, dtype=torch.bfloat16)
    src = torch.ones(ROWS * C.HIDDEN_7B, dtype=torch.bfloat16)
    dst = torch.zeros_like(src)
    turn = [0]

    def step() -> int:
        turn[0] = (turn[0] + 1) % len(inputs)
        return turn[0]

    return {
        "lookup": lambda: embedding(inputs[step()]),
        "gather, table": lambda: torch.index_select(table, 0, inputs[step()], out=out),
        "gather, own buffer": lambda: torch.index_select(own, 0, own_inputs[step()], out=out),
        "copy": lambda: dst.copy_(src),
    }


def _median_us(fn: object) -> float:
    clock = time.perf_counter_ns
    times = []
    for _ in range(CALLS):
        start = clock()
        fn()  # type: ignore[operator]
        times.append((clock() - start) / 1e3)
    return C.median(times[1:])


def trial(shapes: dict[str, object]) -> dict[str, float]:
    """Each shape's median over ``ROUNDS`` interleaved rounds, in µs."""
    seen: dict[str, list[float]] = {name: [] for name in SHAPES}
    for _ in range(ROUNDS):
        for name in SHAPES:
            seen[name].append(_median_us(shapes[name]))
    return {name: C.median(values) for name, values in seen.items()}


def main() -> None:
    p = C.parser(__doc__.splitlines()[0])
    p.add_argument("--trials", type=int, default=None, help="trials (default 8, --quick 2)")
    args = p.parse_args()
    session = C.Session("canary_shapes", args)
    allowed = sorted(os.sched_getaffinity(0))
    others = [c for c in allowed if c != session.core]
    if not others:
        p.error("needs two allowed cores: one to measure, one for the neighbour")
    neighbour_core = others[0]
    os.sched_setaffinity(0, {session.core})
    shapes = _shapes(hidden=QUICK_HIDDEN if args.quick else C.HIDDEN_7B)
    hog_start_s, pause_s = (0.2, 0.1) if args.quick else (1.5, 1.0)
    rows, results = [], []
    for i in range(args.trials or (2 if args.quick else 8)):
        condition = "quiet" if i % 2 == 0 else "memory neighbour"
        hog = None
        if condition != "quiet":
            hog = subprocess.Popen(
                [sys.executable, str(Path(__file__).with_name("neighbour.py")), "--core",
                 str(neighbour_core), "--on", "1", "--off", "0", "--seconds", "60"]
            )  # fmt: skip
            time.sleep(hog_start_s)
        try:
            found = trial(shapes)
        finally:
            if hog is not None:
                hog.terminate()
                hog.wait()
        results.append({"condition": condition, **found})
        rows.append([i + 1, condition, *(found[name] for name in SHAPES)])
        time.sleep(pause_s)
    narrow = f" --quick: a table of {C.VOCAB_7B} × {QUICK_HIDDEN}." if args.quick else ""
    spans = [max(r[n] for r in results) / min(r[n] for r in results) for n in SHAPES]
    headers = ["trial", "condition", *(f"{n} (µs)" for n in SHAPES)]
    rows.append(["", "slowest ÷ fastest trial", *spans])
    table = C.markdown_table(headers, rows, align="rl" + "r" * len(SHAPES))
    C.publish(
        session,
        [C.Section("Canary shapes", table, f"Neighbour on core {neighbour_core}." + narrow)],
        {"trials": results, "span": dict(zip(SHAPES, spans, strict=True))},
    )


if __name__ == "__main__":
    main()
