"""Shared helpers for the benchmark scripts: machine facts, load, core choice, tables, JSON.

Not part of the package: these scripts measure the package from the outside and are run
by hand (``python benchmarks/<name>.py [--quick] [--json OUT]``).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, NamedTuple

REPO_ROOT = Path(__file__).resolve().parent.parent
HIDDEN_7B = 3584
VOCAB_7B = 152064


# --------------------------------------------------------------------------- arguments


def parser(description: str) -> argparse.ArgumentParser:
    """An argument parser with the options every script shares."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--quick", action="store_true", help="a short run (smoke test, not evidence)")
    p.add_argument("--json", metavar="OUT", help="also write the numbers as JSON to OUT")
    p.add_argument(
        "--cpu-core",
        type=int,
        default=None,
        help="core to pin (default: the least busy allowed core, sampled at start)",
    )
    return p


# --------------------------------------------------------------------------- machine


def _read(path: str) -> str | None:
    try:
        return Path(path).read_text()
    except OSError:
        return None


def cpu_model() -> str:
    """``model name`` from /proc/cpuinfo."""
    text = _read("/proc/cpuinfo") or ""
    for line in text.splitlines():
        if line.lower().startswith("model name"):
            return line.partition(":")[2].strip()
    return platform.processor() or "unknown"


def mem_total_gib() -> float | None:
    """MemTotal in GiB."""
    for line in (_read("/proc/meminfo") or "").splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) / 2**20
    return None


def has_cpufreq() -> bool:
    """Whether the kernel exposes cpufreq (absent in most VMs)."""
    return Path("/sys/devices/system/cpu/cpu0/cpufreq").exists()


def busy_shares(window_s: float = 0.5) -> dict[int, float | None]:
    """Busy share of every core over one window (from /proc/stat)."""
    from embedbench.harness.isolation import read_cpu_jiffies

    before = read_cpu_jiffies()
    time.sleep(window_s)
    after = read_cpu_jiffies()
    out: dict[int, float | None] = {}
    for core in sorted(before.keys() & after.keys()):
        busy = after[core][0] - before[core][0]
        total = busy + after[core][1] - before[core][1]
        out[core] = busy / total if total > 0 else None
    return out


# Busy shares this close to the least busy core's are a tie: one clock tick in a 0.5 s
# window is already 2 % (HZ 100), so an idle box's cores differ by noise alone.
TIE_SHARE = 0.05
# The core the PR pinned (`taskset -c 2`): where it is allowed and tied, it is the pick.
PR_CORE = 2
# The reduced designs of the scripts' --quick runs (smoke runs, not evidence), as
# paired_benchmark's keywords and as `embedbench run` flags. QUICK_DESIGN: two workers, the
# fewest that still give a between-process interval (worker_position compares workers with
# one process), two blocks each, one warm-up call. QUICK_ONE_DESIGN: one process (a run
# measures in its own process, no worker starts: each start imports torch and scipy), two
# blocks: for every other script, whose smoke run needs only a run's summary and metadata.
QUICK_DESIGN = {"warmup": 1, "blocks": 4, "iterations": 3, "processes": 2}
QUICK_ONE_DESIGN = {"warmup": 1, "blocks": 2, "iterations": 3, "processes": 1}


def run_flags(design: dict[str, int]) -> list[str]:
    """``design`` as `embedbench run` flags."""
    return [part for key, value in design.items() for part in (f"--{key}", str(value))]


QUICK_RUN_FLAGS = run_flags(QUICK_DESIGN)
QUICK_ONE_RUN_FLAGS = run_flags(QUICK_ONE_DESIGN)
# The load snapshots' window (busy shares per core): 0.5 s, or 0.1 s for a --quick run,
# which takes one at start and one at end of every script.
LOAD_WINDOW_S = 0.5
QUICK_LOAD_WINDOW_S = 0.1


def least_busy_core(shares: dict[int, float | None], allowed: Iterable[int] | None = None) -> int:
    """The allowed core (default: this process's affinity) with the smallest busy share,
    unknown counting as busy. Ties (within ``TIE_SHARE``) go to the PR's core 2 when it is
    one of them, else to the lowest core but 0, which takes the interrupts and
    housekeeping on most boxes: core 0 only when nothing else ties."""
    cores = sorted(os.sched_getaffinity(0) if allowed is None else allowed)
    known = {c: shares[c] for c in cores if shares.get(c) is not None}
    if known:
        least = min(known.values())
        tied = [c for c, share in known.items() if share <= least + TIE_SHARE]
    else:
        tied = cores  # nothing measured: every allowed core is as good as the next
    if PR_CORE in tied:
        return PR_CORE
    return min(tied, key=lambda c: (c == 0, c))


def load_snapshot(window_s: float = LOAD_WINDOW_S) -> dict[str, Any]:
    """Load average and per-core busy shares now."""
    shares = busy_shares(window_s)
    return {
        "time": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "loadavg": [float(x) for x in (_read("/proc/loadavg") or "0 0 0").split()[:3]],
        "busy_share": {str(k): v for k, v in shares.items()},
    }


def machine_facts(*, import_torch: bool = True) -> dict[str, Any]:
    """What the numbers were measured on. Without ``import_torch`` (a --quick run), a
    process that has not imported torch yet reads torch's version from its installed
    metadata and leaves its default thread count unknown (None): importing torch takes
    about 1.5 s of CPU, most of a smoke run's own time where only its runs need torch."""
    if import_torch or "torch" in sys.modules:
        import torch

        torch_version, threads = torch.__version__, torch.get_num_threads()
    else:
        from importlib.metadata import version

        torch_version, threads = version("torch"), None
    return {
        "cpu_model": cpu_model(),
        "logical_cpus": os.cpu_count(),
        "nproc": len(os.sched_getaffinity(0)),
        "mem_total_gib": mem_total_gib(),
        "cpufreq": has_cpufreq(),
        "kernel": platform.release(),
        "python": platform.python_version(),
        "torch": torch_version,
        "torch_threads_default": threads,
    }


class Session:
    """Machine facts and the load before and after a script's measurements."""

    def __init__(self, name: str, args: argparse.Namespace) -> None:
        self.name = name
        self.args = args
        self.started = datetime.now(timezone.utc)
        self.machine = machine_facts(import_torch=not args.quick)
        self.window_s = QUICK_LOAD_WINDOW_S if args.quick else LOAD_WINDOW_S
        self.load_start = load_snapshot(self.window_s)
        shares = {int(k): v for k, v in self.load_start["busy_share"].items()}
        self.core = args.cpu_core if args.cpu_core is not None else least_busy_core(shares)
        self.load_end: dict[str, Any] | None = None
        self.sections: list[str] = []
        self.data: dict[str, Any] = {}

    def busy(self) -> bool:
        """Whether any snapshot saw another core (or ours) more than 20 % busy."""
        for snap in (self.load_start, self.load_end):
            if snap is None:
                continue
            if any(v is not None and v > 0.2 for v in snap["busy_share"].values()):
                return True
        return False

    def header(self) -> str:
        """Markdown lines: command, date, machine, load."""
        m = self.machine
        argv = list(sys.argv[1:])
        for flag in ("--json", "--keep"):  # where output went is not part of the measurement
            if flag in argv:
                i = argv.index(flag)
                del argv[i : i + 2]
        cmd = "python " + " ".join([f"benchmarks/{self.name}.py", *argv])
        mem = m["mem_total_gib"]
        lines = [
            f"### `{cmd}`",
            "",
            f"- date: {self.started.isoformat(timespec='seconds')}",
            f"- machine: {m['cpu_model']}, {m['logical_cpus']} logical CPUs (nproc "
            f"{m['nproc']}), {mem:.1f} GiB RAM, cpufreq "
            f"{'present' if m['cpufreq'] else 'absent (VM: frequency not observable)'}; "
            f"Python {m['python']}, torch {m['torch']}",
            f"- pinned core: {self.core}"
            + (" (--quick: smoke run, not evidence)" if self.args.quick else ""),
            f"- load at start: {_fmt_load(self.load_start, self.window_s)}",
        ]
        if self.load_end is not None:
            lines.append(f"- load at end: {_fmt_load(self.load_end, self.window_s)}")
            lines.append(
                "- **taken while the machine was busy** (another core or ours > 20 % busy)"
                if self.busy()
                else "- machine quiet at start and end (every core ≤ 20 % busy)"
            )
        return "\n".join(lines)

    def finish(self) -> None:
        """Take the closing load snapshot, print everything, write JSON if asked."""
        self.load_end = load_snapshot(self.window_s)
        print(self.header())
        print()
        for section in self.sections:
            print(section)
            print()
        if self.args.json:
            out = {
                "script": self.name,
                "argv": sys.argv[1:],
                "started": self.started.isoformat(),
                "machine": self.machine,
                "core": self.core,
                "load_start": self.load_start,
                "load_end": self.load_end,
                "busy": self.busy(),
                **self.data,
            }
            Path(self.args.json).write_text(json.dumps(out, indent=2, default=_json_default))
            print(f"(JSON written to {self.args.json})", file=sys.stderr)

    def add(self, title: str, table: str, note: str | None = None) -> None:
        """A titled markdown table (and an optional note under it)."""
        text = f"#### {title}\n\n{table}"
        if note:
            text += f"\n\n{note}"
        self.sections.append(text)


def _fmt_load(snap: dict[str, Any], window_s: float = LOAD_WINDOW_S) -> str:
    shares = ", ".join(
        f"cpu{k} {'?' if v is None else f'{100 * v:.0f} %'}" for k, v in snap["busy_share"].items()
    )
    la = " ".join(f"{x:.2f}" for x in snap["loadavg"])
    return f"loadavg {la}; busy share over {window_s:g} s: {shares}"


def _json_default(value: Any) -> Any:
    if isinstance(value, Path):
        return str(value)
    if hasattr(value, "tolist"):
        return value.tolist()
    return str(value)


# --------------------------------------------------------------------------- tables


class Section(NamedTuple):
    """One titled markdown table of a report, with an optional note under it."""

    title: str
    table: str
    note: str | None = None


def publish(session: Session, sections: Iterable[Section], data: dict[str, Any]) -> None:
    """Add the sections and the JSON fields to ``session``, then print (and write) it all."""
    for section in sections:
        session.add(*section)
    session.data.update(data)
    session.finish()


def fmt(value: Any, digits: int = 2) -> str:
    """A table cell: floats with ``digits`` decimals, None as a dash, bools as yes/no."""
    if value is None:
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        return f"{value:.{digits}f}"
    return str(value)


def markdown_table(
    headers: Sequence[str], rows: Iterable[Sequence[Any]], *, align: str | None = None
) -> str:
    """``embedbench.report.markdown.markdown_table`` with non-string cells through ``fmt``."""
    from embedbench.report.markdown import markdown_table as write

    cells = ([c if isinstance(c, str) else fmt(c) for c in row] for row in rows)
    return write(headers, cells, align=align)


# --------------------------------------------------------------------------- numbers


def median(values: Sequence[float]) -> float:
    """Median of a non-empty sequence."""
    return float(statistics.median(values))


def sd(values: Sequence[float]) -> float:
    """Sample standard deviation (0 for fewer than 2 values)."""
    return float(statistics.stdev(values)) if len(values) > 1 else 0.0


def percentile(values: Sequence[float], q: float) -> float:
    """Linear-interpolation percentile, q in [0, 100]."""
    import numpy as np

    return float(np.percentile(np.asarray(values, dtype=float), q))


def launch_embedbench(
    out: Path,
    flags: Sequence[str],
    *,
    core: int,
    python: str = sys.executable,
    env: dict[str, str] | None = None,
) -> tuple[float, subprocess.CompletedProcess]:
    """``python -m embedbench run`` of this checkout into ``out``, pinned to ``core``, with
    its output captured: (wall seconds, the finished process), whatever its exit code.
    ``env``: variables set for the run on top of this process's. The runs of one set
    (``out``'s parent) share a stored host reference of their own beside them, built by
    their stable runs and never by another period's or the user's own."""
    cmd = [python, "-m", "embedbench", "run", "--no-progress", "--output-dir", str(out)]
    cmd += ["--cpu-core", str(core), *flags]
    reference = {"EMBEDBENCH_HOST_REFERENCE": str(out.parent / "host-reference.json")}
    env = {**os.environ, **reference, **(env or {}), "PYTHONPATH": str(REPO_ROOT)}
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=REPO_ROOT, capture_output=True, text=True, env=env)
    return time.perf_counter() - t0, proc


def embedbench_run(
    out: Path,
    flags: Sequence[str],
    *,
    core: int,
    label: str,
    python: str = sys.executable,
    env: dict[str, str] | None = None,
) -> tuple[float, dict[str, Any], list[dict[str, Any]]]:
    """``launch_embedbench``, which must succeed: (wall seconds, metadata.json,
    summary.json). Exits with the run's last stderr line, prefixed by ``label``, when it
    fails."""
    seconds, proc = launch_embedbench(out, flags, core=core, python=python, env=env)
    if proc.returncode != 0:
        tail = proc.stderr.strip().splitlines()[-1:] or ["(no stderr)"]
        raise SystemExit(f"{label} exited {proc.returncode}: {tail[0]}")
    metadata = json.loads((out / "metadata.json").read_text())
    return seconds, metadata, json.loads((out / "summary.json").read_text())


def wall(fn: Callable[[], Any]) -> tuple[Any, float]:
    """(result, seconds) of one call."""
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


# --------------------------------------------------------------------------- the reference target


def reference_setup(hidden: int, *, log: Callable[[str], None] | None = None) -> tuple[Any, Any]:
    """(target, facts) of the built-in replica around a full-vocabulary table.

    ``hidden == 3584``: the embedded default (the cached synthetic 7B checkpoint, built
    once if missing), loaded exactly as ``embedbench run`` loads it. Any other width: a
    seeded in-memory table of 152064 × ``hidden`` bf16 (for smoke runs).
    """
    import torch

    from embedbench.omni import checkpoint, families, synthetic
    from embedbench.omni.targets.reference import build_reference_target

    log = log or (lambda m: print(m, file=sys.stderr, flush=True))
    if hidden == HIDDEN_7B:
        model_dir = synthetic.default_synthetic_checkpoint(progress=log)
        facts = checkpoint.read_thinker_facts(model_dir)
        table = checkpoint.load_embedding_table(checkpoint.locate_embedding(model_dir, facts))
    else:
        ids = families.default().token_ids
        facts = checkpoint.ThinkerFacts(
            hidden_size=hidden,
            vocab_size=VOCAB_7B,
            audio_token_id=ids["audio_token_index"],
            image_token_id=ids["image_token_index"],
            video_token_id=ids["video_token_index"],
            audio_start_token_id=ids["audio_start_token_id"],
            audio_end_token_id=ids["audio_end_token_id"],
            dtype="bfloat16",
            thinker_config={},
        )
        gen = torch.Generator().manual_seed(7451)
        table = (torch.randn((VOCAB_7B, hidden), generator=gen) * 0.02).to(torch.bfloat16)
    return build_reference_target(table, facts), facts


def scenario_call(
    target: Any, facts: Any, case: str, tokens: int, variant: str
) -> Callable[[], Any]:
    """A zero-argument call of one wrapper variant on one case (as the runner builds it)."""
    import functools

    from embedbench.omni.scenarios import build_scenario, call_variant

    scenario = build_scenario(
        case,
        tokens,
        token_ids=facts,
        hidden_size=facts.hidden_size,
        device="cpu",
        tag=target.tag,
    )
    return functools.partial(call_variant, target.variants[variant], scenario)
