"""``--counts`` from the parent's side: check that counts can be taken (before anything is
measured), run the counting process once under callgrind after the timing, and turn its
dumps into each form's per-call figures (docs/format.md, "work.json").

The counting process (``python -m embedbench.counting``, given a share as JSON) measures
nothing in time; the run starts it after every timing worker has ended, never beside
one. It runs on the CPU (``COUNT_DEVICE``) whatever the run's device: on a CUDA run the
counts are those of the CPU copy of the same forms, and the run's metadata says so.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from embedbench.cases import CASE_LABELS, VARIANTS
from embedbench.errors import ConfigError, EmbedbenchError
from embedbench.harness import callgrind, vgrequest

__all__ = [
    "ADDR_NO_RANDOMIZE",
    "COUNT_DEVICE",
    "ENV_DROPPED",
    "ENV_KEPT",
    "HASH_SEED",
    "HASH_SEED_ENV",
    "SINGLE_THREAD_ENV",
    "CountError",
    "Counts",
    "check_counts",
    "count_share",
    "counting_environment",
    "randomized",
]

Log = Callable[[str], None]
# Where the forms are counted: callgrind sees the host's instructions, not a device's.
COUNT_DEVICE = "cpu"
# The counting process's string hashes are fixed, so that its dictionaries probe alike
# from run to run and the same code counts the same instructions.
HASH_SEED_ENV = "PYTHONHASHSEED"
HASH_SEED = "0"
# And its address space is laid out alike from run to run (Linux's personality flag),
# so that the same buffers land at the same alignments: a copy's instructions depend on
# them.
ADDR_NO_RANDOMIZE = 0x0040000
# One thread in its thread pools, which never spin: callgrind counts every thread while
# collecting, and a pool thread that spin-waited would count instructions for as long as
# the host's load kept it waiting.
# The counting process's environment: these variables of the caller's, and its EMBEDBENCH_
# ones (the families to load, the cache) but the host reference's and the lock's, which
# a test runner sets per test and the process never reads. How many instructions a call
# takes moves with where the process's buffers land, which moves with the size of its
# environment: the same code counted 213,588, 213,665 and 213,580 instructions a call
# with one variable of 1, 37 and 200 characters in it (a shell or a test runner sets such
# variables differently from one command to the next: PYTEST_CURRENT_TEST, OLDPWD).
ENV_KEPT = frozenset(
    {
        *("PATH", "PYTHONPATH", "HOME", "LANG", "LC_ALL", "LC_CTYPE", "TMPDIR"),
        *("VIRTUAL_ENV", "LD_LIBRARY_PATH", "XDG_CACHE_HOME"),
    }
)
ENV_DROPPED = frozenset({"EMBEDBENCH_HOST_REFERENCE", "EMBEDBENCH_LOCK_DIR"})
SINGLE_THREAD_ENV = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OMP_WAIT_POLICY": "PASSIVE"}
_TAIL_LINES = 20


class CountError(EmbedbenchError):
    """The counting process failed; the run keeps its timing and records why."""


Key = tuple[str, int, str]


@dataclass
class Counts:
    """Each counted form's per-call figures (its median call's,
    ``harness.callgrind.steady_call``; None where a call raised), by (case, tokens,
    variant), and how they were taken (metadata.json's ``counts``)."""

    figures: dict[Key, dict[str, int] | None] = field(default_factory=dict)
    metadata: dict[str, Any] = field(default_factory=dict)

    def row_fields(self, case: str, tokens: int, variant: str) -> dict[str, int | None]:
        """A work.json row's four figures (null where not counted)."""
        return dict(self.figures.get((case, tokens, variant)) or callgrind.NOT_COUNTED)


@dataclass
class _Tally:
    """The counted calls of one form so far: each one's per-call figures, any error."""

    calls: list[dict[str, int]] = field(default_factory=list)
    events: int = 0
    error: str | None = None

    def add(self, totals: dict[str, int] | None, calls: int, error: str | None) -> None:
        self.events += 1
        self.error = self.error or error
        if totals is not None:
            self.calls.append(callgrind.per_call(totals, calls))

    def figures(self) -> dict[str, int] | None:
        """The steady call's figures (``callgrind.steady_call``; None where a call raised or
        none was counted)."""
        if self.error or not self.calls:
            return None
        return callgrind.steady_call(self.calls)


def check_counts() -> str:
    """Before anything is measured: valgrind's path, or ``MissingDependencyError`` (how to
    install it); ``ConfigError`` where this torch cannot toggle callgrind's collection."""
    valgrind = callgrind.require_valgrind()
    import torch

    if not torch._C._valgrind_supported_platform():
        raise ConfigError(
            "this torch build cannot toggle callgrind's collection "
            "(torch._C._valgrind_supported_platform() is False); run without counts"
        )
    return valgrind


def _spec(share: dict[str, Any], instrument_at_start: bool) -> dict[str, Any]:
    return {
        "share": share,
        "calls": callgrind.CALLS_PER_COUNT,
        "warmup": callgrind.WARMUP_CALLS,
        "start_instrumentation": not instrument_at_start,
    }


def _metadata(valgrind: str, measured_device: str, instrument_at_start: bool) -> dict[str, Any]:
    on_cpu = measured_device == COUNT_DEVICE
    return {
        "tool": "callgrind",
        "valgrind": callgrind.valgrind_version(valgrind),
        "calls_per_count": callgrind.CALLS_PER_COUNT,
        "warmup_calls": callgrind.WARMUP_CALLS,
        "per_call": "fewest instructions",
        "device": COUNT_DEVICE,
        "measured_device": measured_device,
        "note": (
            "counted on the CPU, where the forms were timed"
            if on_cpu
            else f"counted on the CPU copy of the same forms (the timing ran on {measured_device})"
        ),
        "cache": {level: list(geometry) for level, geometry in callgrind.CACHE.items()},
        "weights": {
            "l1_miss_cycles": callgrind.L1_MISS_CYCLES,
            "ll_miss_cycles": callgrind.LL_MISS_CYCLES,
        },
        "python_hash_seed": int(HASH_SEED),
        "instrumentation": (
            "from the counting process's start"
            if instrument_at_start
            else "from when the counting process had loaded its table"
        ),
    }


def counting_environment(env: Mapping[str, str]) -> dict[str, str]:
    """The counting process's environment (see ``ENV_KEPT``): what it needs of ``env``, in
    name order, one thread per pool and the fixed hash seed."""
    kept = {
        name: env[name]
        for name in sorted(env)
        if name in ENV_KEPT or (name.startswith("EMBEDBENCH_") and name not in ENV_DROPPED)
    }
    return {**kept, **SINGLE_THREAD_ENV, HASH_SEED_ENV: HASH_SEED}


def count_share(
    share: dict[str, Any],
    *,
    measured_device: str,
    log: Log,
    env: dict[str, str],
) -> Counts:
    """Count every case and form of ``share`` (a ``measure.Share`` as JSON, on
    ``COUNT_DEVICE``) in one process under callgrind, started with ``env`` (the
    environment a worker gets); one line per case on ``log``. ``CountError`` where the
    process fails."""
    valgrind = check_counts()
    instrument_at_start = not vgrequest.available()
    counts = Counts(metadata=_metadata(valgrind, measured_device, instrument_at_start))
    per_case = len(callgrind.collected_calls(VARIANTS, callgrind.CALLS_PER_COUNT))
    tallies: dict[Key, _Tally] = {}
    log(
        f"counting instructions and simulated cache misses under valgrind (callgrind, "
        f"{callgrind.CALLS_PER_COUNT} calls per form, on the {COUNT_DEVICE}); this takes "
        "a minute or more"
    )
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="embedbench-counts-") as tmp:
        out = Path(tmp)
        spec = out / "spec.json"
        spec.write_text(json.dumps(_spec(share, instrument_at_start)), encoding="utf-8")
        argv = [sys.executable, "-m", "embedbench.counting", str(spec)]
        command = callgrind.valgrind_command(
            valgrind, argv, out, instrument_at_start=instrument_at_start
        )

        def counted(event: dict[str, Any], pid: int) -> None:
            case, tokens = event["case"], event["tokens"]
            tally = tallies.setdefault((case, tokens, event["variant"]), _Tally())
            tally.add(_totals(event, out, pid), int(event["calls"]), event.get("error"))
            forms = {v: tallies.get((case, tokens, v)) for v in VARIANTS}
            if sum(t.events for t in forms.values() if t) == per_case:
                for variant, form in forms.items():
                    counts.figures[(case, tokens, variant)] = form.figures() if form else None
                _log_case(counts, event, log)

        def ready(event: dict[str, Any]) -> None:
            counts.metadata["address_randomization"] = randomized(event.get("personality"))

        environment = counting_environment(env)
        _prepare(share, out, environment, log)
        _run(command, environment, counted, ready, log)
    counts.metadata["seconds"] = round(time.monotonic() - started, 1)
    counts.metadata["forms_counted"] = sum(1 for f in counts.figures.values() if f)
    log(f"counts done in {counts.metadata['seconds']:.0f} s")
    return counts


def _prepare(share: dict[str, Any], out: Path, env: dict[str, str], log: Log) -> None:
    """Run the counting process once natively (``prepare``: load, build and call each form
    once) so that every module it imports has its bytecode cached before it is counted.
    Where a module was compiled in the counted process and read from its cache in another,
    their heaps differ, and so did their counts: 213,878 and 214,022 instructions a Text
    call at 4,096 tokens, the first after the package's caches were removed."""
    spec = out / "prepare.json"
    spec.write_text(json.dumps({**_spec(share, False), "prepare": True}), encoding="utf-8")
    argv = [sys.executable, "-m", "embedbench.counting", str(spec)]
    _run(argv, env, lambda _event, _pid: None, lambda _event: None, log)


def _totals(event: dict[str, Any], out: Path, pid: int) -> dict[str, int] | None:
    """One ``counted`` event's event totals, from its dump (written before the event);
    None where nothing was collected."""
    if event.get("part") is None:
        return None
    path = out / f"{callgrind.OUT_PREFIX}.{pid}.{event['part']}"
    try:
        dump = callgrind.parse_dump(path.read_text(encoding="utf-8", errors="replace"))
    except (OSError, ValueError) as exc:
        raise CountError(
            f"callgrind's dump {event['part']} ({_label(event)}, {event['variant']}) cannot "
            f"be read ({exc}); rerun with counts"
        ) from exc
    if dump.part not in (0, event["part"]):
        raise CountError(
            f"callgrind's dump {path.name} says it is part {dump.part}, not {event['part']}; "
            "rerun with counts"
        )
    return dump.totals


def _run(
    command: list[str],
    env: dict[str, str],
    counted: Callable[[dict[str, Any], int], None],
    ready: Callable[[dict[str, Any]], None],
    log: Log,
) -> None:
    """Run the counting process to its end, handing its ``ready`` event to ``ready`` and
    each ``counted`` event to ``counted`` with the process's pid, as they arrive."""
    pid, failure = None, None
    with tempfile.TemporaryFile() as errors:
        proc = subprocess.Popen(
            command,
            stdout=subprocess.PIPE,
            stderr=errors,
            env=env,
            preexec_fn=_fixed_layout if sys.platform.startswith("linux") else None,
        )
        try:
            assert proc.stdout is not None
            for raw in proc.stdout:
                if not raw.strip():
                    continue
                event = json.loads(raw)
                kind = event["event"]
                if kind == "ready":
                    pid = int(event["pid"])
                    ready(event)
                elif kind == "counted" and pid is not None:
                    counted(event, pid)
                elif kind == "skipped":
                    log(f"counts: {_label(event)}: failed validation, not counted")
                elif kind == "error":
                    failure = event
            code = proc.wait()
        finally:
            if proc.poll() is None:  # interrupted, or an error here: stop it now
                proc.kill()
                proc.wait()
        errors.seek(0)
        tail = [line for line in errors.read().decode(errors="replace").splitlines() if line]
    if code != 0 or pid is None:
        message = (failure or {}).get("message") or (tail[-1] if tail else f"exit code {code}")
        if (failure or {}).get("kind") != "usage":
            for line in tail[-_TAIL_LINES:]:
                log(f"counting: {line}")
        raise CountError(f"the counting process failed (exit code {code}): {message}")


def _fixed_layout() -> None:
    """In the counting process, before valgrind starts: no address randomisation (where the
    kernel refuses, the process runs as it would have)."""
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        current = libc.personality(0xFFFFFFFF)
        if current != -1:
            libc.personality(current | ADDR_NO_RANDOMIZE)
    except (OSError, AttributeError):
        pass


def randomized(personality: int | None) -> bool | None:
    """Whether a process of ``personality`` (``/proc/self/personality``) has its address
    space randomised (None where it could not say)."""
    return None if personality is None else not personality & ADDR_NO_RANDOMIZE


def _label(event: dict[str, Any]) -> str:
    return f"{CASE_LABELS.get(event['case'], event['case'])} @ {event['tokens']} tokens"


def _log_case(counts: Counts, event: dict[str, Any], log: Log) -> None:
    """One line for a counted case: each form's instructions per call."""
    case, tokens = event["case"], event["tokens"]
    before, after = (counts.figures.get((case, tokens, v)) for v in ("baseline", "fixed"))
    if before is None or after is None:
        log(f"counts: {_label(event)}: a call raised, so a form is not counted")
        return
    log(
        f"counts: {_label(event)}: {before['instructions']:,} → {after['instructions']:,} "
        "instructions per call"
    )
