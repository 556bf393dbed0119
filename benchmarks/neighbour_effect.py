"""How much does a busy other core slow the canary and the lookups, busy halves against idle?

    python benchmarks/neighbour_effect.py --cpu-core 1              # 4 conditions × 45 s, ~3.5 min
    python benchmarks/neighbour_effect.py --cpu-core 1 --quick      # 4 × 0.5 s (smoke)

The calibration of the host-stability rule that sees a neighbour by its effect
(``stability.neighbour_contrast``). One process, pinned, at the default geometry (a
152064 × 3584 bfloat16 table). It repeats a step like a block half of the kit: 20 lookups
of one 1172-token input, then one read of the canary as built (half a lookup's rows) and
one of a canary of a whole lookup's rows, then the other cores' busy time since the last
step (``/proc/stat``, as every block half records it). Conditions, one after the other,
each with the neighbour (``neighbour.py``) on another core:

- **quiet**: no neighbour;
- **memory hog on/off 3 s**: a copy loop over twice the L3;
- **memory hog always on**: the same, never pausing (no idle steps: no contrast);
- **spinning on/off 3 s**: a busy core that touches no memory.

Per condition: the steps with the other cores busy (≥ 0.75 cores) and idle (≤ 0.25), and
for the lookup and both canaries the median of each side and their ratio minus 1. The
table also gives each one's step-to-step noise (the SD of successive log differences
over √2), which sets how large a contrast a run of 240 block halves can resolve.

``--quick`` (a smoke run): 0.5 s per condition on a table of ``QUICK_HIDDEN`` columns, the
neighbour given 0.2 s to start instead of 1 s.
"""

from __future__ import annotations

import functools
import os
import subprocess
import sys
import time
from pathlib import Path

import _common as C
import numpy as np

ROWS = 1172
CALLS = 20
BUSY, IDLE = 0.75, 0.25
CONDITIONS = {
    "quiet": None,
    "memory hog on/off 3 s": ["--on", "3", "--off", "3"],
    "memory hog always on": ["--on", "1", "--off", "0"],
    "spinning on/off 3 s": ["--spin", "--on", "3", "--off", "3"],
}
MEASURES = ("lookup", "canary, half a lookup", "canary, a whole lookup")
QUICK_HIDDEN = 64


def _steps(
    core: int,
    other: int | None,
    seconds: float,
    hog_args: list[str] | None,
    *,
    hidden: int = C.HIDDEN_7B,
    hog_start_s: float = 1.0,
) -> dict:
    """Run one condition: every step's three times (µs) and the other cores' busy time,
    on a table of ``hidden`` columns; the neighbour is given ``hog_start_s`` to start."""
    import torch

    from embedbench.harness.canary import ROWS_SHARE, Canary
    from embedbench.harness.isolation import isolated, other_cores_reader
    from embedbench.harness.timing import busy_cores

    read_ticks = other_cores_reader(core)
    hog = None
    if hog_args is not None and other is not None:
        cmd = [sys.executable, str(Path(__file__).with_name("neighbour.py")), *hog_args]
        cmd += ["--core", str(other), "--seconds", str(seconds + 30)]
        hog = subprocess.Popen(cmd)
        time.sleep(hog_start_s)
    try:
        with isolated(core):
            table = _table(hidden)
            ids = torch.randint(0, table.shape[0], (ROWS,))
            half = Canary(ROWS, table=table, core=core)
            whole = Canary(round(ROWS / ROWS_SHARE), table=table, core=core)  # ROWS rows
            rows: list[tuple[float, float, float, float | None]] = []
            clock = time.perf_counter_ns
            end = time.monotonic() + seconds
            before = read_ticks()
            while time.monotonic() < end:
                start = clock()
                for _ in range(CALLS):
                    torch.index_select(table, 0, ids)
                lookup = (clock() - start) / CALLS / 1e3
                half_us, whole_us = half.read_us(), whole.read_us()
                after = read_ticks()
                rows.append((lookup, half_us, whole_us, busy_cores(before, after)))
                before = after
    finally:
        if hog is not None:
            hog.terminate()
            hog.wait(timeout=30)
    return {"rows": rows, "half_rows": half.rows, "whole_rows": whole.rows}


@functools.lru_cache(maxsize=1)
def _table(hidden: int = C.HIDDEN_7B):
    """The table (the default geometry's by default), built once per process."""
    import torch

    torch.manual_seed(0)
    return torch.randn(C.VOCAB_7B, hidden).to(torch.bfloat16)


def summarise(name: str, rows: list[tuple[float, float, float, float | None]]) -> list:
    """One table row per measure: busy and idle steps, medians, ratio − 1, noise."""
    known = [r for r in rows if r[3] is not None]
    busy = [r for r in known if r[3] >= BUSY]
    idle = [r for r in known if r[3] <= IDLE]
    out = []
    for i, measure in enumerate(MEASURES):
        values = np.log([r[i] for r in rows])
        noise = float(np.std(np.diff(values)) / np.sqrt(2)) if len(values) > 2 else float("nan")
        b = float(np.median([r[i] for r in busy])) if busy else None
        d = float(np.median([r[i] for r in idle])) if idle else None
        ratio = f"{100 * (b / d - 1):+.1f} %" if b and d else "–"
        out.append([name, measure, len(busy), len(idle), C.fmt(b), C.fmt(d), ratio, 100 * noise])
    return out


def main() -> None:
    p = C.parser(__doc__.splitlines()[0])
    p.add_argument(
        "--seconds", type=float, default=None, help="per condition (default 45; --quick: 0.5)"
    )
    args = p.parse_args()
    session = C.Session("neighbour_effect", args)
    seconds = args.seconds or (0.5 if args.quick else 45.0)
    shape = {"hidden": QUICK_HIDDEN, "hog_start_s": 0.2} if args.quick else {}
    others = [c for c in sorted(os.sched_getaffinity(0)) if c != session.core]
    other = others[-1] if others else None
    table_rows, data = [], {}
    for name, hog_args in CONDITIONS.items():
        print(f"{name} ({seconds:g} s) ...", file=sys.stderr, flush=True)
        result = _steps(session.core, other, seconds, hog_args, **shape)
        table_rows += summarise(name, result["rows"])
        data[name] = result
    headers = [
        "condition",
        "measure",
        "busy steps",
        "idle steps",
        "busy median (µs)",
        "idle median (µs)",
        "busy ÷ idle − 1",
        "step noise (%)",
    ]
    note = (
        f"Neighbour on core {other}; a step is {CALLS} lookups of {ROWS} rows, then the "
        f"canary as built ({data['quiet']['half_rows']} rows) and one of "
        f"{data['quiet']['whole_rows']} rows."
        if other is not None
        else "No other allowed core: every condition ran without its neighbour."
    )
    if args.quick:
        note += f" --quick: a table of {C.VOCAB_7B} × {QUICK_HIDDEN}."
    session.add("Busy against idle steps", C.markdown_table(headers, table_rows), note)
    session.data.update({"conditions": data, "seconds": seconds})
    session.finish()


if __name__ == "__main__":
    main()
