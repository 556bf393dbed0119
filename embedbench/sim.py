"""A simulated host: the kit's own measuring code, run against a seeded model of a machine.

``simulate_run(config, host, seed)`` runs ``runner.measure_prepared`` (the lock, the
guards, every worker's share through ``measure.measure_share``, the collector, the
statistics and the host-stability verdict) in this process, with every clock and
``/proc`` read answered by a ``SimulatedHost`` instead of the machine, and returns the
``RunResult`` that ``run`` returns (nothing is written to disk). The same seed gives the
same result, bit for bit; a default-design run takes well under a second.
``simulate_pair`` does the same for ``runner.paired_benchmark``, and
``simulate_selftest`` for the kit's self-test (``selftest.run_selftest``), its carriers'
work spent on the simulated host.

What the model holds (``SimulatedHost``; docs/development.md, "The simulated host"):

- each variant's work per call and case, split into compute and memory time (µs), and
  the canary's and the pace's;
- per-call cost = work × the host's speed at that moment × lognormal noise, with rare
  slow outliers;
- slow drift of the speed (a sine of the run's clock, random phase);
- speed regimes that change between worker processes and between runs (lognormal);
- a neighbour on another core (off, toggled on and off, or always on) that slows
  memory-bound work more than compute and keeps that core busy;
- bursts of off-CPU time on the measuring core (Poisson), which the wall clock sees and
  the thread's CPU clock does not;
- the cost and resolution of the clock reads (the timer floor);
- the memory system's ceiling, a streaming copy's bytes per second (read + written),
  reported as measured before the first worker, at no simulated time;
- the kit's own interference, as found on real hosts: slow calls at the start of each
  worker's first timed block, and a first worker slowed while the parent still works.

What it leaves out: torch (no table, no validation: every case validates; each form's
per-call ledger is the one its lookups imply, ``sim_ledger``), the device, the I/O guard
(always quiet) and the parent's own files.
"""

from __future__ import annotations

import contextlib
import math
import tempfile
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from embedbench.cases import CASES, VARIANTS, expected_lookups
from embedbench.config import RunConfig
from embedbench.errors import ConfigError
from embedbench.harness import bandwidth, clock
from embedbench.harness.carriers import Call, Carriers, sleep_us
from embedbench.harness.interrupts import StopFlag
from embedbench.harness.ioguard import IoReading
from embedbench.harness.isolation import ContentionReading, check_contention
from embedbench.harness.parentcore import ParentAffinity
from embedbench.harness.timing import BlockProbes, no_sync
from embedbench.measure import (
    Backend,
    Calls,
    Emit,
    Loaded,
    Share,
    backend_for,
    case_order,
    measure_share,
)
from embedbench.omni import checkpoint, families
from embedbench.report.results import RunResult

if TYPE_CHECKING:
    from embedbench.selftest import SelfTestResult

__all__ = [
    "DEFAULT_WORK",
    "Neighbour",
    "SimulatedHost",
    "Simulation",
    "Work",
    "sim_carriers",
    "simulate_pair",
    "simulate_run",
    "simulate_selftest",
    "simulation",
    "spender",
]

# The simulated machine: two cores, the clock's tick rate for /proc/stat.
SIM_CORES = (0, 1)
HZ = 100
FORMS = VARIANTS
EPOCH_S = 1.8e9  # where the simulated wall clock starts (epoch seconds)


@dataclass(frozen=True)
class Work:
    """One call's work on a quiet host at nominal speed: compute and memory time (µs)."""

    compute_us: float
    memory_us: float

    @classmethod
    def of(cls, total_us: float, memory_share: float = 0.85) -> Work:
        """``total_us`` split into memory (``memory_share``) and compute time."""
        return cls(total_us * (1 - memory_share), total_us * memory_share)


def _pair(baseline_us: float, fixed_us: float) -> dict[str, Work]:
    return {"baseline": Work.of(baseline_us), "fixed": Work.of(fixed_us)}


# Each case's two forms at the default geometry on a 2-vCPU KVM guest (the replica, CPU,
# 1172 tokens; README, "Results on this project's CI machine"): the lookups are copies.
DEFAULT_WORK: Mapping[str, Mapping[str, Work]] = {
    "text": _pair(820.0, 820.0),
    "audio": _pair(1975.0, 1100.0),
    "image": _pair(1890.0, 950.0),
    "video": _pair(2010.0, 1185.0),
    "mixed": _pair(2735.0, 1900.0),
    "interleaved": _pair(2790.0, 1970.0),
}


@dataclass(frozen=True)
class Neighbour:
    """A process on the other core: ``off``, ``toggled`` (on for the first half of every
    ``period_s``) or ``always``. While on it slows memory time by ``memory_slowdown``
    and compute time by ``compute_slowdown`` (relative), and keeps its core busy."""

    mode: str = "off"
    memory_slowdown: float = 0.15
    compute_slowdown: float = 0.01
    period_s: float = 6.0

    def __post_init__(self) -> None:
        if self.mode not in ("off", "toggled", "always"):
            raise ValueError(f"neighbour mode must be off, toggled or always, got {self.mode!r}")

    def on(self, t_s: float) -> bool:
        """Whether it runs at simulated time ``t_s``."""
        if self.mode == "always":
            return True
        if self.mode == "toggled":
            return (t_s % self.period_s) < self.period_s / 2
        return False

    def on_time(self, t_s: float) -> float:
        """Seconds it has run from 0 to ``t_s``."""
        if self.mode == "always":
            return t_s
        if self.mode == "toggled":
            full, rest = divmod(t_s, self.period_s)
            return full * self.period_s / 2 + min(rest, self.period_s / 2)
        return 0.0


@dataclass(frozen=True)
class SimulatedHost:
    """A seeded model of a host (see the module doc); every knob has a quiet default."""

    work: Mapping[str, Mapping[str, Work]] = field(default_factory=lambda: dict(DEFAULT_WORK))
    canary_work: Work = Work(30.0, 600.0)
    pace_work: Work = Work(12.0, 0.0)
    noise: float = 0.03  # lognormal sigma of each call's cost
    outlier_rate: float = 0.002  # share of calls that are slow outliers
    outlier_factor: float = 3.0
    drift: float = 0.02  # relative amplitude of the slow drift
    drift_period_s: float = 120.0
    fluctuation: float = 0.04  # sigma of the log speed's short-term part
    fluctuation_ms: float = 20.0  # its correlation time
    worker_regime: float = 0.04  # lognormal sigma of the speed between worker processes
    run_regime: float = 0.06  # lognormal sigma of the speed between runs
    worker_form_regime: float = 0.02  # sigma of each form's own speed per worker process
    run_form_regime: float = 0.0  # sigma of each form's own speed per run
    neighbour: Neighbour = Neighbour()
    burst_rate_hz: float = 0.0  # off-CPU bursts on the measuring core, per second
    burst_us: float = 3000.0
    idle_busy_share: float = 0.02  # the other core's busy share with no neighbour
    perf_read_ns: int = 50  # cost of one wall-clock read
    thread_read_ns: int = 600  # cost of one thread-CPU clock read
    resolution_ns: int = 1
    call_overhead_ns: int = 250  # the Python call around the timed function
    start_stall_calls: int = 0  # slow calls at the start of each worker's first timed block
    start_stall_us: float = 20_000.0
    first_worker_slowdown: float = 0.0  # worker 0 slower while the parent still works
    worker_start_s: float = 2.5  # a worker's start and table load, before it measures
    # The streaming-copy ceiling (read + written, bytes/s): what Text's lookup moves per
    # call (sim_ledger, 16.8 MB) over the memory time DEFAULT_WORK gives it (697 µs).
    memory_bytes_per_s: float = 24e9

    def forms(self, case: str) -> Mapping[str, Work]:
        """The two forms' work on ``case``."""
        if case not in self.work:
            raise ValueError(f"the simulated host has no work for case {case!r}")
        return self.work[case]


class SimClock:
    """The simulated machine's time: the ``harness.clock.Clock`` the kit reads, and the
    cost model that moves it. Time is kept in float ns from the start of a simulation."""

    def __init__(self, host: SimulatedHost, rng: np.random.Generator) -> None:
        self.host = host
        self.rng = rng
        self.t_ns = 0.0  # wall time
        self.cpu_ns = 0.0  # the measuring thread's CPU time
        self.busy_ns = 0.0  # the measuring core's time taken by bursts (off the thread)
        self.run_speed = 1.0
        self.worker_speed = 1.0
        self.drift_phase = 0.0
        self.stall_left = 0
        self.stall_after = 0
        self.measuring_core = SIM_CORES[0]
        self.fluctuation = 0.0  # log speed's short-term part (Ornstein-Uhlenbeck)
        self.run_forms: dict[str, float] = {}
        self.worker_forms: dict[str, float] = {}

    # -- the Clock protocol ---------------------------------------------------------------

    def _on_cpu(self, ns: float) -> None:
        self.t_ns += ns
        self.cpu_ns += ns

    # The two clock reads are the simulation's hottest code (four per timed call): each
    # spends its read on the CPU (``_on_cpu``, written out) and returns its clock rounded
    # down to the host's resolution.
    def perf_ns(self) -> int:
        host = self.host
        read = host.perf_read_ns
        self.t_ns += read
        self.cpu_ns += read
        resolution = host.resolution_ns
        return int(self.t_ns // resolution * resolution)

    def thread_ns(self) -> int:
        host = self.host
        read = host.thread_read_ns
        self.t_ns += read
        self.cpu_ns += read
        resolution = host.resolution_ns
        return int(self.cpu_ns // resolution * resolution)

    def wall(self) -> float:
        return EPOCH_S + self.t_ns / 1e9

    def monotonic(self) -> float:
        return self.t_ns / 1e9

    def sleep(self, seconds: float) -> None:
        self.t_ns += seconds * 1e9

    def minor_faults(self) -> int | None:
        return 0

    def spin(self, duration_us: float) -> None:
        """A deadline spin of ``duration_us`` (``carriers.spin_us``), its reads' outcome
        without their count: the read that sets the deadline, the wait on the CPU, and
        the read that ends it, the first past the deadline (by a uniform share of one
        read). No noise or burst lands on it."""
        deadline = self.perf_ns() + duration_us * 1e3
        read = self.host.perf_read_ns
        self._on_cpu(max(0.0, deadline - self.t_ns - read * self.rng.random()))
        self.perf_ns()

    # -- the cost model -------------------------------------------------------------------

    def speed(self) -> float:
        """The host's slowness factor now (1 = nominal): regimes and drift."""
        host = self.host
        drift = 1.0 + host.drift * math.sin(
            2 * math.pi * self.t_ns / 1e9 / host.drift_period_s + self.drift_phase
        )
        return self.run_speed * self.worker_speed * drift

    def _fluctuate(self) -> float:
        """The short-term speed factor now (an Ornstein-Uhlenbeck step since the last)."""
        host = self.host
        if not host.fluctuation:
            return 1.0
        dt_ms = (self.t_ns - self._last_ns) / 1e6
        self._last_ns = self.t_ns
        keep = math.exp(-dt_ms / host.fluctuation_ms) if dt_ms > 0 else 1.0
        self.fluctuation = (
            self.fluctuation * keep
            + host.fluctuation * math.sqrt(1 - keep * keep) * self.rng.normal()
        )
        return math.exp(self.fluctuation)

    _last_ns = 0.0

    def spend(self, work: Work, *, timed: bool = False, form: str | None = None) -> None:
        """Advance by one call of ``work`` (of ``form``, a variant's name): its cost at
        this moment, with noise, on the measuring thread, plus any off-CPU burst that
        lands inside it."""
        host = self.host
        on = host.neighbour.on(self.t_ns / 1e9)
        memory = work.memory_us * (1 + host.neighbour.memory_slowdown if on else 1.0)
        compute = work.compute_us * (1 + host.neighbour.compute_slowdown if on else 1.0)
        factor = self.speed() * self._fluctuate() * math.exp(host.noise * self.rng.normal())
        if form is not None:
            factor *= self.run_forms.get(form, 1.0) * self.worker_forms.get(form, 1.0)
        cost_us = (compute + memory) * factor
        if self.rng.random() < host.outlier_rate:
            cost_us *= host.outlier_factor
        if timed and self.stall_after <= 0 < self.stall_left:
            cost_us += host.start_stall_us
            self.stall_left -= 1
        elif timed:
            self.stall_after -= 1
        cost_ns = cost_us * 1e3 + host.call_overhead_ns
        bursts = self.rng.poisson(host.burst_rate_hz * cost_ns / 1e9) if host.burst_rate_hz else 0
        self._on_cpu(cost_ns)
        if bursts:
            off = bursts * host.burst_us * 1e3
            self.t_ns += off
            self.busy_ns += off

    def jiffies(self) -> dict[int, tuple[int, int]]:
        """/proc/stat's (busy, idle) ticks of each simulated core now."""
        t_s = self.t_ns / 1e9
        host = self.host
        on_s = host.neighbour.on_time(t_s)
        other_busy = on_s + (t_s - on_s) * host.idle_busy_share
        # Bursts take the measuring core whether or not the kit runs there: their share of
        # the time the kit leaves it idle, beside the time they took from its calls.
        load = host.burst_rate_hz * host.burst_us / 1e6
        duty = load / (1 + load)
        own = (self.cpu_ns + self.busy_ns) / 1e9
        measuring_busy = own + duty * max(t_s - own, 0.0)
        ticks = {c: measuring_busy if c == self.measuring_core else other_busy for c in SIM_CORES}
        return {c: (int(busy * HZ), int(max(t_s - busy, 0.0) * HZ)) for c, busy in ticks.items()}

    def start_worker(self, worker: int, warmup: int) -> None:
        """A fresh worker process: a new speed regime, and the kit's own start stall."""
        host = self.host
        self.t_ns += host.worker_start_s * 1e9  # off the measuring thread: a new process
        self.worker_speed = math.exp(host.worker_regime * self.rng.normal())
        self.worker_forms = {
            form: math.exp(host.worker_form_regime * self.rng.normal()) for form in FORMS
        }
        if worker == 0:
            self.worker_speed *= 1 + host.first_worker_slowdown
        self.stall_left = host.start_stall_calls
        self.stall_after = 2 * warmup  # the first case's warm-up of both forms comes first


class SimCanary:
    """The canary on the simulated host: a memory-bound read and a compute-bound pace."""

    def __init__(self, sim: SimClock) -> None:
        self.sim = sim

    def read_us(self) -> float:
        start = self.sim.perf_ns()
        self.sim.spend(self.sim.host.canary_work)
        return (self.sim.perf_ns() - start) / 1e3

    def device_us(self) -> float | None:
        return None

    def timed_probe(self, copies: int = 17) -> tuple[list[float], list[float]]:
        reads, off_cpu = [], []
        for _ in range(copies):
            wall, cpu = self.sim.perf_ns(), self.sim.thread_ns()
            reads.append(self.read_us())
            cpu, wall = self.sim.thread_ns() - cpu, self.sim.perf_ns() - wall
            off_cpu.append(max(0, wall - cpu) / 1e3)
        return reads, off_cpu

    def pace_probe(self, copies: int = 17) -> list[float]:
        reads = []
        for _ in range(copies):
            start = self.sim.perf_ns()
            self.sim.spend(self.sim.host.pace_work)
            reads.append((self.sim.perf_ns() - start) / 1e3)
        return reads

    def describe(self) -> dict[str, object]:
        return {"kind": "simulated memory gather", "rows": 0, "bytes": 0, "source": "simulated"}


@dataclass(frozen=True)
class _SimIsolation:
    cpu_core: int

    def to_json(self) -> dict[str, Any]:
        return {"cpu_core": self.cpu_core, "simulated": True}


class SimBackend:
    """``measure.Backend`` on the simulated host: each case's two forms spend its work,
    or, with ``work`` (a ``measure.PairBackend``), a pair of callables that spend it
    themselves (``simulate_pair``); the canary, the probes and the isolation are the
    simulated host's either way."""

    def __init__(self, sim: SimClock, work: Backend | None = None) -> None:
        self.sim = sim
        self.work = work

    def load(self, share: Share) -> Loaded:
        self.sim.start_worker(share.worker, share.config.warmup)
        if self.work is not None:
            return self.work.load(share)
        ready = {
            "target": "simulated",
            "target_metadata": {"simulated": True},
            "code": {"baseline": "simulated baseline", "fixed": "simulated fixed"},
            "code_fresh": {"seconds": 0.0, "checked": 0, "stale": []},
            "table": {"cuda_start_s": None, "load_s": 0.0},
        }
        return Loaded(ready, no_sync)

    def cases(self, share: Share) -> list[tuple[int, str]]:
        return self.work.cases(share) if self.work is not None else case_order(share)

    def case_calls(
        self, share: Share, loaded: Loaded, case: str, tokens: int
    ) -> tuple[Calls, dict[str, Any] | None]:
        if self.work is not None:
            return self.work.case_calls(share, loaded, case, tokens)
        forms = self.sim.host.forms(case)
        spend = self.sim.spend
        calls = {name: _spender(spend, work, name) for name, work in forms.items()}
        family, lookups = _lookups(share, case)
        row = {
            "case": case,
            "tokens": tokens,
            "device": "cpu",
            "calls": lookups,
            "expected_calls": lookups,
            "torch_equal": True,
            "ok": True,
            "mismatch": None,
            "family": family,
            "simulated": True,
        }
        return calls, row

    def ledger(
        self, share: Share, case: str, tokens: int, calls: Calls
    ) -> dict[str, dict[str, Any]] | None:
        if self.work is not None:
            # A pair's own count, as on a real host: one untimed call of each callable before
            # the warm-up (simulated work dispatches no operator: empty ledgers).
            return self.work.ledger(share, case, tokens, calls)
        family, lookups = _lookups(share, case)
        hidden = families.get(family).hidden_size
        return {name: sim_ledger(count, tokens, hidden) for name, count in lookups.items()}

    def canary(self, share: Share, loaded: Loaded) -> SimCanary:
        return SimCanary(self.sim)

    def probes(self, share: Share, canary: Any, on: bool) -> tuple[str, BlockProbes]:
        others = [c for c in SIM_CORES if c != share.cpu_core]

        def other_cores() -> dict[int, tuple[int, int]]:
            ticks = self.sim.jiffies()
            return {c: ticks[c] for c in others}

        extra = {"canary": canary.read_us} if on else {}
        return "simulated", BlockProbes(other_cores=other_cores, **extra)

    def isolated(self, core: int) -> contextlib.AbstractContextManager[Any]:
        return contextlib.nullcontext(_SimIsolation(core))

    def after_case(self, share: Share) -> None:
        """Nothing: no tensors are made (a real collection would take 0.1 s a case)."""


def _lookups(share: Share, case: str) -> tuple[str, dict[str, int]]:
    """The share's family and the text lookups each form makes on ``case``."""
    family = share.config.family if share.config.family != "auto" else families.default().name
    lookups = expected_lookups(family, case) if case in CASES else {"baseline": 1, "fixed": 1}
    return family, lookups


def sim_ledger(lookups: int, tokens: int, hidden: int) -> dict[str, Any]:
    """The per-call ledger (docs/format.md, "work.json") of ``lookups`` text lookups of
    ``tokens`` ids into a bf16 table ``hidden`` wide, and nothing else: each widens its
    int32 ids to int64, then gathers its rows."""
    rows, wide = tokens * hidden * 2, tokens * 8
    embedding = {"read": lookups * (wide + rows), "written": lookups * rows}
    widen = {"read": lookups * tokens * 4, "written": lookups * wide}
    written = embedding["written"] + widen["written"]
    return {
        "ops": {"aten.embedding": lookups, "aten.to": lookups},
        "op_bytes": {"aten.embedding": embedding, "aten.to": widen},
        "bytes_read": embedding["read"] + widen["read"],
        "bytes_written": written,
        "bytes_allocated": written,
        "syncs": 0,
        "kernels": None,
    }


def _spender(spend: Callable[..., None], work: Work, form: str) -> Callable[[], None]:
    def call() -> None:
        spend(work, timed=True, form=form)

    return call


@dataclass
class _SimLock:
    def to_json(self) -> dict[str, object]:
        return {"path": "simulated", "pid": 0}


class SimRunHost:
    """``runhost.RunHost`` on the simulated host: every share in this process."""

    def __init__(self, sim: SimClock, reference: Path) -> None:
        self.sim = sim
        self.reference = reference

    def lock(self) -> contextlib.AbstractContextManager[Any]:
        return contextlib.nullcontext(_SimLock())

    def allowed_cores(self) -> list[int]:
        return list(SIM_CORES)

    def quiet_io(self, *, allow_busy: bool, log: Any, window_s: float | None = None) -> IoReading:
        return IoReading(
            dirty_bytes=0,
            writeback_bytes=0,
            iowait_share=0.0,
            dirty_threshold_bytes=64 * 2**20,
            iowait_threshold=0.2,
            iowait_window_s=window_s or 0.1,
            max_wait_s=0.0,
            waited_s=0.0,
            busy=False,
            allowed=True,
            allow_busy=allow_busy,
            source="simulated",
        )

    def contention(
        self,
        core: int,
        *,
        allow_busy: bool,
        candidates: list[int],
        window_s: float | None = None,
    ) -> ContentionReading:
        return check_contention(
            core,
            allow_busy=allow_busy,
            candidates=candidates,
            window_s=window_s or 0.1,
            sleep=self.sim.sleep,
            read=self.sim.jiffies,
        )

    def pinned_away(
        self, core: int, allowed: list[int]
    ) -> contextlib.AbstractContextManager[ParentAffinity]:
        return contextlib.nullcontext(ParentAffinity([c for c in allowed if c != core]))

    def reference_path(self) -> Path:
        return self.reference

    def memory_ceiling(self, core: int) -> bandwidth.MemoryCeiling:
        """The host's ``memory_bytes_per_s``, as ``bandwidth.measure_ceiling`` reports a
        reading (the simulated clock does not move: the seeded runs stay as they were)."""
        rate = self.sim.host.memory_bytes_per_s
        size = bandwidth.MAX_BUFFER_BYTES
        return bandwidth.MemoryCeiling(
            rate,
            buffer_bytes=size,
            repetitions=bandwidth.REPETITIONS,
            core=core,
            best_s=2 * size / rate,
            method="simulated: SimulatedHost.memory_bytes_per_s",
        )

    def measure_here(
        self,
        share: Share,
        emit: Emit,
        *,
        check_stop: Callable[[], None],
        before_case: Callable[[str, int], None],
        backend: Backend | None = None,
    ) -> None:
        measure_share(
            share,
            emit,
            check_stop=check_stop,
            before_case=before_case,
            backend=SimBackend(self.sim, backend),
        )

    def run_worker(
        self,
        share: Share,
        collector: Any,
        stop: StopFlag,
        log: Any,
        *,
        spawning: Any,
        env: dict[str, str] | None = None,
    ) -> None:
        work = backend_for(share) if share.factory is not None else None
        backend = SimBackend(self.sim, work)
        measure_share(share, collector.handle, check_stop=stop.check, backend=backend)
        collector.worker_finished(share.worker, 0)

    def count_calls(
        self,
        share: Share,
        *,
        measured_device: str,
        log: Any,
        env: dict[str, str] | None = None,
    ) -> Any:
        """The simulated host runs no valgrind: a run with counts is refused."""
        raise ConfigError("the simulated host counts no instructions; simulate without counts")


class Simulation:
    """One simulated host, seeded, over any number of runs: the clock goes on from run to
    run (each run draws a new speed regime), and the host's stored quiet reference is
    kept between them, as on a real machine."""

    def __init__(self, host: SimulatedHost, seed: int, workdir: Path | None = None) -> None:
        self.host = host
        self.rng = np.random.default_rng(seed)
        self.clock = SimClock(host, self.rng)
        self._tmp = None if workdir else tempfile.TemporaryDirectory(prefix="embedbench-sim-")
        self.workdir = Path(workdir) if workdir else Path(self._tmp.name)  # type: ignore[union-attr]
        self.runs = 0

    def run(self, config: RunConfig, host: SimulatedHost | None = None) -> RunResult:
        """One run of ``config`` on this host (``host``: the same machine with other knobs
        for this run, e.g. a neighbour that has started)."""
        from embedbench.runner import measure_prepared

        sim = self.clock
        sim.host = host or self.host
        sim.run_speed = math.exp(sim.host.run_regime * self.rng.normal())
        sim.drift_phase = float(self.rng.uniform(0, 2 * math.pi))
        sim.run_forms = {
            form: math.exp(sim.host.run_form_regime * self.rng.normal()) for form in FORMS
        }
        sim.t_ns += 60e9  # a minute between runs
        self.runs += 1
        prepared = _prepared(config, sim)
        sim.measuring_core = prepared.cpu_core
        host = SimRunHost(sim, self.workdir / "host-reference.json")
        with clock.using(sim):
            return measure_prepared(prepared, host, log=lambda _line: None, progress=False)

    def close(self) -> None:
        """Remove the host's working files (its stored reference)."""
        if self._tmp is not None:
            self._tmp.cleanup()


def _prepared(config: RunConfig, sim: SimClock) -> Any:
    """A ``runner.PreparedRun`` of the simulated machine (no checkpoint is read)."""
    from embedbench.runner import HostFacts, PreparedRun

    if config.cpu_core is None:
        config = replace(config, cpu_core=0)
    family = families.default()
    model_dir = Path("simulated")
    facts = checkpoint.ThinkerFacts(
        hidden_size=3584,
        vocab_size=152064,
        audio_token_id=0,
        image_token_id=0,
        video_token_id=0,
        audio_start_token_id=None,
        audio_end_token_id=None,
        dtype="bfloat16",
        thinker_config={},
        family=family.name,
    )
    location = checkpoint.EmbeddingLocation(
        model_dir, model_dir / "simulated.safetensors", False, (152064, 3584), "bfloat16"
    )
    device = {"type": "cpu", "name": "simulated host", "gpu": None}
    host = HostFacts(
        device=device,
        provenance={"cpu": {"model": "simulated", "affinity": list(SIM_CORES)}, "device": device},
        versions={},
    )
    started = datetime.fromtimestamp(sim.wall(), timezone.utc)
    import torch

    return PreparedRun(
        config=config,
        device=torch.device("cpu"),
        cpu_core=int(config.cpu_core or 0),
        model_dir=model_dir,
        synthetic=True,
        facts=facts,
        location=location,
        output_dir=None,  # type: ignore[arg-type]
        host=host,
        started=started,
    )


def simulate_run(config: RunConfig, host: SimulatedHost, seed: int) -> RunResult:
    """``run(config)`` on a fresh simulated ``host`` seeded with ``seed``."""
    simulation = Simulation(host, seed)
    try:
        return simulation.run(config)
    finally:
        simulation.close()


def spender(work: Work, form: str | None = None) -> Callable[[], None]:
    """A zero-argument callable that spends ``work`` on the simulated host in force (for
    a pair of ``simulate_pair``, or a factory's callables in a simulated worker)."""

    def call() -> None:
        active = clock.now()
        if not isinstance(active, SimClock):
            raise RuntimeError("a simulated callable runs only on a simulated host")
        active.spend(work, timed=True, form=form)

    return call


def simulate_pair(
    variants: dict[str, Callable[[], Any]] | str,
    host: SimulatedHost,
    seed: int,
    **design: Any,
) -> Any:
    """``runner.paired_benchmark(variants, **design)`` on a fresh simulated ``host``: a dict
    of callables (``spender``) in this process, or a factory ``"package.module:function"``
    whose callables spend simulated work, spread over simulated worker processes."""
    from embedbench.runner import paired_benchmark

    sim = Simulation(host, seed)
    try:
        sim.clock.run_speed = math.exp(host.run_regime * sim.rng.normal())
        run_host = SimRunHost(sim.clock, sim.workdir / "host-reference.json")
        design.setdefault("cpu_core", 0)
        with clock.using(sim.clock):
            return paired_benchmark(variants, host=run_host, **design)
    finally:
        sim.close()


# The self-test's hash work on the simulated host: BLAKE2b's cost per byte, and the share
# of it that is memory time (the hash is compute-bound: a neighbour barely slows it).
HASH_NS_PER_BYTE = 1.0
HASH_MEMORY_SHARE = 0.1


def sim_carriers(sim: SimClock) -> Carriers:
    """The self-test's carriers on ``sim``: hash work that spends ``HASH_NS_PER_BYTE`` a
    byte of simulated ``Work`` (noise, fluctuation, drift, outliers, bursts and the
    neighbour land on it as on the measured forms), spins on the simulated clock
    (``SimClock.spin``), sleeps on whichever clock is in force, and no pinning."""

    def spinner(duration_us: float) -> Call:
        def call() -> None:
            sim.spin(duration_us)

        return call

    def hash_work(nbytes: int) -> Call:
        work = Work.of(nbytes * HASH_NS_PER_BYTE / 1e3, HASH_MEMORY_SHARE)

        def call() -> None:
            sim.spend(work, timed=True)

        return call

    return Carriers(
        spinner=spinner,
        hash_work=hash_work,
        sleep_us=sleep_us,
        pinned=lambda _core: contextlib.nullcontext(),
    )


def simulate_selftest(
    host: SimulatedHost, seed: int, delay_us: float = 20.0, **design: Any
) -> SelfTestResult:
    """``selftest.run_selftest(delay_us, **design)`` on a fresh simulated ``host``, in this
    process: every pair, calibration loop and probe on its clock (``sim_carriers``).
    ``seed`` seeds the host and the self-test's block schedules; the same seed gives the
    same result, bit for bit."""
    from embedbench.selftest import run_selftest

    sim = Simulation(host, seed)
    try:
        sim.clock.run_speed = math.exp(host.run_regime * sim.rng.normal())
        sim.clock.drift_phase = float(sim.rng.uniform(0, 2 * math.pi))
        run_host = SimRunHost(sim.clock, sim.workdir / "host-reference.json")
        design.setdefault("cpu_core", 0)
        with clock.using(sim.clock):
            return run_selftest(
                delay_us, seed=seed, carriers=sim_carriers(sim.clock), host=run_host, **design
            )
    finally:
        sim.close()


@contextlib.contextmanager
def simulation(host: SimulatedHost, seed: int) -> Iterator[Simulation]:
    """A ``Simulation`` for the body, its files removed after."""
    sim = Simulation(host, seed)
    try:
        yield sim
    finally:
        sim.close()
