"""One process's share of a run: load the table, build the target, validate and time.

``measure_share`` is what every worker process runs (and what ``run`` runs in its own
process when ``processes=1``): it loads the embedding table itself, builds the
target, pins and isolates, measures the timer floor, then for every case and length
validates both variants, warms them up and times its blocks. A share with a ``factory``
(``paired_benchmark``) instead imports the factory's two callables and times them as
case ``paired`` (no checkpoint, target or validation). It reports through an
``emit`` callback of plain-JSON events and computes no statistics:

- ``ready``: the target, the fingerprint of the code of each variant, the freshness
  check's report, the frequency source, the isolation state, where the table landed
  in memory and what the canary is (a factory's share: the factory instead of the
  target, no freshness report and no table);
- ``host_wait``: a probe of the canary was not quiet, so the share waits (one line);
- ``host_probe``: the probe before the timer floor or a case, once it was quiet or the
  wait ran out (with ``--allow-busy``; without it the share stops with a usage error);
- ``records``: raw block records of one case, length and scope (timer floor: case
  ``timer``), each carrying ``worker``;
- ``validation``: one case's validation row;
- ``work``: one case's per-call ledger of each variant (``harness.ledger``: operators,
  bytes, syncs, kernels), counted from one more call of each after a passed validation,
  before the warm-up, outside any timed window (``error`` instead where that call
  raised; nothing where the backend counts nothing);
- ``case_error``: a wrapper crashed while timing (the case is recorded invalid);
- ``progress``: how many calls finished;
- ``done``: the share is complete.

A worker process waits after each event of ``HANDSHAKE_EVENTS`` until its parent
acknowledges it (one ``ACK`` line on stdin, sent once the parent has written what the
event changes), so the parent never writes a result file while the worker times.
"""

from __future__ import annotations

import functools
import gc
import hashlib
import importlib
import marshal
import os
import site
import sys
import sysconfig
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

import torch

from embedbench.cases import SYNC_LABEL
from embedbench.config import RunConfig
from embedbench.errors import ConfigError, HostNoisyError, one_line
from embedbench.harness import devices, freshness, stability, sysinfo
from embedbench.harness.canary import Canary
from embedbench.harness.clock import now
from embedbench.harness.devices import count_device_syncs, sync_for
from embedbench.harness.isolation import isolated, other_cores_reader
from embedbench.harness.ledger import count_pair
from embedbench.harness.timing import (
    AA_SCOPE,
    MICRO_SCOPE,
    TIMER_CASE,
    TIMER_SCOPE,
    BlockProbes,
    BlockRecord,
    derive_seed,
    measure_pair,
    measure_timer_floor,
)
from embedbench.omni import checkpoint
from embedbench.omni.scenarios import (
    Scenario,
    build_scenario,
    call_variant,
    placement_problems,
    placements,
)
from embedbench.omni.targets import VARIANTS, Target, lookup_chain
from embedbench.omni.targets.reference import build_reference_target
from embedbench.omni.validation import validate_scenario

__all__ = [
    "ACK",
    "CANARY_ENV",
    "FACTORY_CASE",
    "FACTORY_FORM",
    "FACTORY_TOKENS",
    "HANDSHAKE_EVENTS",
    "HARNESS_MODULES",
    "HOST_WAIT_ENV",
    "Backend",
    "Calls",
    "CanaryLike",
    "Emit",
    "Event",
    "HostWatch",
    "Loaded",
    "LoadedFactory",
    "PairBackend",
    "Share",
    "TargetBackend",
    "backend_for",
    "build_target",
    "calls_per_share",
    "canary_enabled",
    "case_order",
    "check_fresh",
    "code_fingerprint",
    "host_wait_s",
    "load_factory",
    "measure_share",
    "parse_factory",
    "probe_row",
    "schedule_seed",
    "target_modules",
    "worker_paths",
]

Event = dict[str, Any]
Emit = Callable[[Event], None]

# The events after which a worker process waits for its parent's acknowledgement.
HANDSHAKE_EVENTS = frozenset({"ready", "validation", "work", "records", "case_error"})
ACK = "ack"

# embedbench's own modules on the measured path: the share, the scenarios, the timed
# call and the validation (checked for freshness with the target's modules).
HARNESS_MODULES = (
    "embedbench.measure",
    "embedbench.omni.scenarios",
    "embedbench.harness.timing",
    "embedbench.harness.windows",
    "embedbench.omni.validation",
    "embedbench.harness.isolation",
    "embedbench.harness.devices",
    "embedbench.harness.canary",
    "embedbench.harness.ledger",
)


@dataclass(frozen=True)
class Share:
    """What one process measures: every case and length of ``config``, blocks ``first..``;
    with a ``factory`` (``"package.module:function"``), that factory's two callables as
    case ``paired`` instead (``model_dir`` and the cases of ``config`` are then unused).

    Plain JSON (``to_json``/``from_json``), so a worker process receives it on stdin.
    """

    config: RunConfig
    worker: int
    first_block: int
    block_count: int
    cpu_core: int
    device: str
    model_dir: str
    factory: str | None = None

    def to_json(self) -> dict[str, Any]:
        """Plain JSON values (no ``factory`` key for a share of ``run``)."""
        data = {**asdict(self), "config": self.config.to_json()}
        if self.factory is None:
            del data["factory"]
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Share:
        """The inverse of ``to_json``."""
        return cls(**{**data, "config": RunConfig.from_mapping(data["config"])})


# -- a factory's variants (``paired_benchmark``) ---------------------------------------------
# ``"package.module:function"``: the function takes no arguments and returns
# ``{"baseline": f, "fixed": g}``. The parent imports and calls it once to check it
# (``load_factory``: a bad one is refused in one line before any worker starts); every
# worker then imports and calls it again and times its share of the blocks.

# The one case a factory's blocks are recorded under (tokens 0), as the in-process path.
FACTORY_CASE = "paired"
FACTORY_TOKENS = 0
FACTORY_FORM = '"package.module:function"'


@dataclass(frozen=True)
class LoadedFactory:
    """A checked factory: its variants and the directory its module was imported from."""

    spec: str
    variants: dict[str, Callable[[], Any]]
    import_root: str | None


def parse_factory(spec: str) -> tuple[str, str]:
    """The module and function names of ``spec``; ``ConfigError`` unless it has the form
    ``"package.module:function"``."""
    module, sep, function = spec.strip().partition(":")
    names = module.split(".")
    if not sep or not function.isidentifier() or not all(n.isidentifier() for n in names):
        raise ConfigError(
            f"a factory must be {FACTORY_FORM} (a dotted module name, a colon, a function name), "
            f"got {spec!r}"
        )
    if module == "__main__":
        raise ConfigError(
            f"the factory {spec!r} lives in __main__, which a worker process cannot import; "
            f'move the function into a module (e.g. mybench.py) and pass "mybench:{function}"'
        )
    return module, function


def load_factory(spec: str) -> LoadedFactory:
    """Import ``spec``'s module, call its function once and check what it returns;
    ``ConfigError`` (one line saying what to fix) for anything that would fail a worker."""
    module_name, function_name = parse_factory(spec)
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:
        raise ConfigError(
            f"cannot import the factory's module {module_name!r} ({type(exc).__name__}: "
            f"{one_line(exc)}); put its directory on sys.path (the current directory or "
            "PYTHONPATH) or fix the name"
        ) from exc
    function = getattr(module, function_name, None)
    if not callable(function):
        raise ConfigError(
            f"module {module_name!r} has no function {function_name!r} (from the factory "
            f"{spec!r}); define it there or fix the name"
        )
    try:
        made = function()
    except Exception as exc:
        raise ConfigError(
            f"calling the factory {spec!r} failed ({type(exc).__name__}: {one_line(exc)}); "
            f"it must take no arguments and return {_expected()}"
        ) from exc
    return LoadedFactory(spec, _check_variants(spec, made), _import_root(module))


def _expected() -> str:
    return "{" + ", ".join(f'"{name}": <callable>' for name in VARIANTS) + "}"


def _check_variants(spec: str, made: object) -> dict[str, Callable[[], Any]]:
    """``made`` if it is a dict of exactly the two variants, each callable, in order."""
    if not isinstance(made, dict) or set(made) != set(VARIANTS):
        got = f"a dict with keys {list(made)}" if isinstance(made, dict) else type(made).__name__
        raise ConfigError(f"the factory {spec!r} must return {_expected()}, got {got}")
    for name in VARIANTS:
        if not callable(made[name]):
            raise ConfigError(
                f"the factory {spec!r} returned {type(made[name]).__name__} for {name!r}; "
                "it must be a zero-argument callable"
            )
    return {name: made[name] for name in VARIANTS}


def _import_root(module: Any) -> str | None:
    """The sys.path entry ``module`` was found under (None for a module without a file)."""
    file = getattr(module, "__file__", None)
    if not file:
        return None
    path = Path(file).absolute()  # not resolved: a linked file is found where it is linked
    depth = module.__name__.count(".") + (1 if path.name == "__init__.py" else 0)
    return str(path.parents[depth])


def _interpreter_dirs() -> list[Path]:
    """The standard library and site-packages: a fresh interpreter finds them itself."""
    paths = sysconfig.get_paths()
    dirs = [paths[key] for key in ("stdlib", "platstdlib", "purelib", "platlib") if key in paths]
    dirs += getattr(site, "getsitepackages", list)()
    dirs.append(site.getusersitepackages())
    return [Path(d).resolve() for d in dirs]


def worker_paths(loaded: LoadedFactory) -> list[str]:
    """What a worker needs on its PYTHONPATH to import the factory as this process did: the
    module's import root, the current directory, then this process's other ``sys.path``
    directories (those outside the interpreter's own, which it finds by itself)."""
    own = _interpreter_dirs()
    found: list[str] = []
    for entry in [loaded.import_root, os.getcwd(), *sys.path]:
        if entry is None:
            continue
        path = Path(entry or os.getcwd()).resolve()
        inside = any(path == d or d in path.parents for d in own)
        if path.is_dir() and not inside and str(path) not in found:
            found.append(str(path))
    return found


def schedule_seed(config: RunConfig, case: str, tokens: int, worker: int, scope: str) -> int:
    """The block-order seed of one worker's share of a case (one process: the original's)."""
    parts: list[object] = [case, tokens]
    if scope != MICRO_SCOPE:
        parts.append(scope)
    if config.processes > 1:
        parts.append(f"worker{worker}")
    return derive_seed(config.seed, *parts)


def case_order(share: Share) -> list[tuple[int, str]]:
    """The (tokens, case) pairs in the order this share measures them.

    One process: the configured order, as the original. Several: rotated by the worker
    index, so that every case is measured early and late after a table load in some
    worker, and what the position costs lands in the between-worker spread instead of
    biasing one case.
    """
    pairs = [(tokens, case) for tokens in share.config.lengths for case in share.config.cases]
    if share.config.processes == 1:
        return pairs
    shift = share.worker % len(pairs)
    return pairs[shift:] + pairs[:shift]


def build_target(config: RunConfig, facts: checkpoint.ThinkerFacts, table: torch.Tensor) -> Target:
    """The target named in the config, bound to the loaded table."""
    if config.target == "vllm-omni":
        from embedbench.omni.targets.vllm_omni import build_vllm_omni_target

        return build_vllm_omni_target(
            table,
            facts,
            repo=config.repo,
            baseline_ref=config.baseline_ref,
            candidate_ref=config.candidate_ref,
            lm_shim=config.lm_shim,
        )
    return build_reference_target(table, facts, config.lm_shim)


def target_modules(target: Target) -> list[str]:
    """The modules the measured code of ``target`` depends on: those of its shim's class
    and of every class a text lookup passes through (language model, text model,
    embedding), what its variants and tag reach, its builder's own, and the harness's."""
    classes = [type(target.model), *(type(m) for m in lookup_chain(target.language_model))]
    functions = [*target.variants.values(), target.tag]
    return [
        *freshness.dependency_modules(classes, functions),
        *target.modules,
        *HARNESS_MODULES,
    ]


def check_fresh(target: Target) -> freshness.FreshnessReport:
    """Refuse (``StaleCodeError``) when code ``target`` runs differs from its file on disk:
    this process imported it before a ``git checkout`` or an edit (a reused kernel)."""
    measured = {
        f.__qualname__
        for variant in target.variants.values()
        for f in freshness.functions_of(variant)
    }
    return freshness.check_modules(
        target_modules(target), checkout=target.checkout, named_first=measured
    )


def code_fingerprint(fn: Callable[..., Any]) -> str:
    """SHA-256 of the bytecode (and constants) a variant runs, so that two processes can
    show they measured the same code."""
    code = getattr(getattr(fn, "__func__", fn), "__code__", None)
    if code is None:
        return "unavailable"
    return hashlib.sha256(marshal.dumps(code)).hexdigest()


def _load(share: Share) -> tuple[checkpoint.ThinkerFacts, torch.Tensor, dict[str, Any]]:
    """The checkpoint's facts, its table on the share's device, and the table's record:
    ``cuda_start_s`` (creating the CUDA context, before the load clock; None off CUDA),
    ``load_s`` (reading the table onto the device alone) and where it landed."""
    model_dir = Path(share.model_dir)
    facts = checkpoint.read_thinker_facts(model_dir)
    location = checkpoint.locate_embedding(model_dir, facts)
    device = torch.device(share.device)
    cuda_start_s = devices.start_cuda(device)
    started = time.perf_counter()
    table = checkpoint.load_embedding_table(location, device=device)
    sync_for(device)()  # the copy to the device has landed
    placement = {
        "cuda_start_s": cuda_start_s,
        "load_s": time.perf_counter() - started,
        **devices.memory_placement(table),
    }
    return facts, table, placement


# Replaces stability.WAIT_MAX_S (seconds), e.g. short in tests.
HOST_WAIT_ENV = "EMBEDBENCH_HOST_WAIT_S"
# "off": no canary at all (no reads, no probes, host not observed), only to measure what
# the canary itself costs or changes (benchmarks; docs/PERFORMANCE.md).
CANARY_ENV = "EMBEDBENCH_CANARY"


def canary_enabled() -> bool:
    """False when ``EMBEDBENCH_CANARY`` is "off" (anything else but unset or "on" is
    refused with ``ConfigError``)."""
    raw = os.environ.get(CANARY_ENV, "on").strip().lower() or "on"
    if raw not in ("on", "off"):
        raise ConfigError(f"{CANARY_ENV} must be on or off, got {raw!r}")
    return raw == "on"


def host_wait_s() -> float:
    """How long the quiet-host wait lasts: ``EMBEDBENCH_HOST_WAIT_S`` when set, else
    ``stability.WAIT_MAX_S``; ``ConfigError`` for anything but a number >= 0."""
    raw = os.environ.get(HOST_WAIT_ENV, "").strip()
    if not raw:
        return stability.WAIT_MAX_S
    try:
        seconds = float(raw)
    except ValueError:
        seconds = -1.0
    if not seconds >= 0:
        raise ConfigError(f"{HOST_WAIT_ENV} must be a number of seconds >= 0, got {raw!r}")
    return seconds


@dataclass
class HostWatch:
    """The quiet-host wait of one measuring process: a canary probe before its timer floor
    and before every case, judged against the quietest probe it has seen
    (``stability.read_probe``). While a probe is not quiet it emits one ``host_wait`` line
    and probes again every ``WAIT_POLL_S`` s, for up to ``WAIT_MAX_S`` s; then it refuses
    (``HostNoisyError``, exit 2), unless ``allow_busy``, which measures at once and lets the
    probe's reading label the run."""

    canary: Canary
    worker: int
    emit: Emit
    allow_busy: bool = False
    max_wait_s: float = field(default_factory=host_wait_s)
    poll_s: float = stability.WAIT_POLL_S
    sleep: Callable[[float], None] = field(default_factory=lambda: now().sleep)
    clock: Callable[[], float] = field(default_factory=lambda: now().monotonic)
    reference_us: float | None = None
    readings: list[stability.ProbeReading] = field(default_factory=list)
    enabled: bool = True

    def _probe(self) -> stability.ProbeReading:
        """One probe, judged against the quietest level this worker has seen."""
        reads, off_cpu = self.canary.timed_probe()
        return stability.read_probe(reads, self.reference_us, off_cpu_us=off_cpu)

    def wait_until_quiet(self, before: str) -> stability.ProbeReading | None:
        """Probe until quiet (or the wait runs out); emit and return the last reading
        (None, and nothing emitted, when the canary is off)."""
        if not self.enabled:
            return None
        start = self.clock()
        reading = self._probe()
        first_reason = reading.reason
        attempts = 1
        if not reading.quiet and not self.allow_busy:
            self.emit(
                {
                    "event": "host_wait",
                    "worker": self.worker,
                    "before": before,
                    "reason": reading.reason,
                    "max_wait_s": self.max_wait_s,
                }
            )
            while not reading.quiet and self.clock() - start < self.max_wait_s:
                self.sleep(self.poll_s)
                reading = self._probe()
                attempts += 1
        waited = self.clock() - start
        reading = stability.with_pace(reading, self.canary.pace_probe())
        self.reference_us = stability.next_reference(self.reference_us, reading)
        self.readings.append(reading)
        self.emit(
            {
                "event": "host_probe",
                "worker": self.worker,
                "before": before,
                "attempts": attempts,
                "waited_s": round(waited, 3),
                "first_reason": first_reason,
                **reading.to_json(),
            }
        )
        if not reading.quiet and not self.allow_busy:
            raise HostNoisyError(
                f"the host stayed noisy for {waited:.0f} s before {before} in worker "
                f"{self.worker} ({reading.reason}); stop the other load (a memory-hungry "
                "process on another core, another guest), rerun later, or pass --allow-busy "
                "to measure anyway (the run is then labelled noisy)"
            )
        return reading


class CanaryLike(Protocol):
    """What a share reads of its canary (``harness.canary.Canary``, or a simulated one)."""

    def read_us(self) -> float: ...

    def device_us(self) -> float | None: ...

    def timed_probe(self) -> tuple[list[float], list[float]]: ...

    def pace_probe(self) -> list[float]: ...

    def describe(self) -> dict[str, object]: ...


@dataclass
class Loaded:
    """What a share measures with: the ``ready`` event's fields that describe it (the
    target or the factory, the code's fingerprint, freshness, where the table landed),
    the device sync, and whatever the backend keeps for its cases."""

    ready: dict[str, Any]
    sync: Callable[[], None]
    context: Any = None


Calls = dict[str, Callable[[], Any]]


class Backend(Protocol):
    """Where a share's work comes from; ``measure_share`` is the one sequence around it
    (quiet-host wait, timer floor, canary, pair, records) for every entry point: the
    checkpoint and target of ``run`` (``TargetBackend``), the two callables of
    ``paired_benchmark`` (``PairBackend``) and the simulated host (``embedbench.sim``)."""

    def load(self, share: Share) -> Loaded:
        """Load what the share measures (before anything is timed)."""
        ...

    def cases(self, share: Share) -> list[tuple[int, str]]:
        """The (tokens, case) pairs in the order this share measures them."""
        ...

    def case_calls(
        self, share: Share, loaded: Loaded, case: str, tokens: int
    ) -> tuple[Calls, dict[str, Any] | None]:
        """The two variants' zero-argument calls of one case, and its validation row (None
        where nothing is validated)."""
        ...

    def ledger(
        self, share: Share, case: str, tokens: int, calls: Calls
    ) -> dict[str, dict[str, Any]] | None:
        """Each variant's per-call ledger (``harness.ledger``), from one more call of each
        outside any timed window; None where nothing is counted."""
        ...

    def canary(self, share: Share, loaded: Loaded) -> CanaryLike:
        """The share's canary."""
        ...

    def probes(self, share: Share, canary: CanaryLike, on: bool) -> tuple[str, BlockProbes]:
        """What is read at every block edge, and the CPU-frequency source."""
        ...

    def isolated(self, core: int) -> AbstractContextManager[Any]:
        """Pin and isolate the measuring thread; the state has ``to_json()``."""
        ...

    def after_case(self, share: Share) -> None:
        """Clean up what a case left behind, before the next one's quiet-host wait."""
        ...


def release_case_memory(share: Share) -> None:
    """What a case left behind: a garbage collection (gc stays disabled while timing) and,
    on CUDA, the caching allocator's free blocks."""
    gc.collect()
    if torch.device(share.device).type == "cuda":
        torch.cuda.empty_cache()


class TargetBackend:
    """``run``'s share: the checkpoint's table, the configured target and its cases."""

    def load(self, share: Share) -> Loaded:
        facts, table, placement = _load(share)
        target = build_target(share.config, facts, table)
        fresh = check_fresh(target)  # before anything is measured or reported
        ready = {
            "target": target.name,
            "target_metadata": target.metadata,
            "code": {name: code_fingerprint(target.variants[name]) for name in VARIANTS},
            "code_fresh": fresh.to_json(),
            "table": placement,
        }
        return Loaded(ready, sync_for(torch.device(share.device)), (facts, table, target))

    def cases(self, share: Share) -> list[tuple[int, str]]:
        return case_order(share)

    def case_calls(
        self, share: Share, loaded: Loaded, case: str, tokens: int
    ) -> tuple[Calls, dict[str, Any] | None]:
        facts, _table, target = loaded.context
        scenario = build_scenario(
            case,
            tokens,
            token_ids=facts,
            hidden_size=facts.hidden_size,
            device=share.device,
            tag=target.tag,
            deepstack_levels=facts.deepstack_levels,
        )
        calls = {
            name: functools.partial(call_variant, target.variants[name], scenario)
            for name in VARIANTS
        }
        return calls, probe_row(target, scenario, calls)

    def ledger(
        self, share: Share, case: str, tokens: int, calls: Calls
    ) -> dict[str, dict[str, Any]] | None:
        return count_pair(calls, share.device)

    def canary(self, share: Share, loaded: Loaded) -> CanaryLike:
        _facts, table, _target = loaded.context
        return Canary(
            max(share.config.lengths), torch.device(share.device), table=table, core=share.cpu_core
        )

    def probes(self, share: Share, canary: CanaryLike, on: bool) -> tuple[str, BlockProbes]:
        return _block_probes(share, canary, on)

    def isolated(self, core: int) -> AbstractContextManager[Any]:
        return isolated(core)

    def after_case(self, share: Share) -> None:
        release_case_memory(share)


class PairBackend:
    """``paired_benchmark``'s share: two zero-argument callables, given (in this process)
    or made by the share's factory (in a worker), timed as case ``paired``."""

    def __init__(self, variants: Calls | None = None) -> None:
        self.variants = variants

    def load(self, share: Share) -> Loaded:
        if self.variants is None:
            assert share.factory is not None, "a pair needs its callables or a factory"
            self.variants = load_factory(share.factory).variants
        ready: dict[str, Any] = {
            "code": {name: code_fingerprint(self.variants[name]) for name in VARIANTS}
        }
        if share.factory is not None:
            ready["factory"] = share.factory
        return Loaded(ready, sync_for(torch.device(share.device)))

    def cases(self, share: Share) -> list[tuple[int, str]]:
        return [(FACTORY_TOKENS, FACTORY_CASE)]

    def case_calls(
        self, share: Share, loaded: Loaded, case: str, tokens: int
    ) -> tuple[Calls, dict[str, Any] | None]:
        assert self.variants is not None
        return {name: self.variants[name] for name in VARIANTS}, None

    def ledger(
        self, share: Share, case: str, tokens: int, calls: Calls
    ) -> dict[str, dict[str, Any]] | None:
        return count_pair(calls, share.device)

    def canary(self, share: Share, loaded: Loaded) -> CanaryLike:
        return Canary(device=torch.device(share.device), core=share.cpu_core)

    def probes(self, share: Share, canary: CanaryLike, on: bool) -> tuple[str, BlockProbes]:
        return _block_probes(share, canary, on)

    def isolated(self, core: int) -> AbstractContextManager[Any]:
        return isolated(core)

    def after_case(self, share: Share) -> None:
        release_case_memory(share)


def backend_for(share: Share) -> Backend:
    """The backend of a share as a worker receives it: its factory's pair, else the target."""
    return PairBackend() if share.factory is not None else TargetBackend()


def measure_share(
    share: Share,
    emit: Emit,
    *,
    check_stop: Callable[[], None],
    before_case: Callable[[str, int], None] = lambda case, tokens: None,
    backend: Backend | None = None,
) -> None:
    """Measure ``share`` in this process, reporting through ``emit`` (see the module doc).

    ``check_stop`` runs between blocks and may raise to stop; ``before_case`` runs
    before every case but the first (the runner's contention recheck). ``backend`` says
    what is measured (default: ``backend_for(share)``).
    """
    backend = backend if backend is not None else backend_for(share)
    config = share.config
    loaded = backend.load(share)
    canary = backend.canary(share, loaded)
    on = canary_enabled()
    frequency_source, probes = backend.probes(share, canary, on)
    with backend.isolated(share.cpu_core) as state:
        watch = HostWatch(canary, share.worker, emit, allow_busy=config.allow_busy, enabled=on)
        watch.wait_until_quiet("start")
        pairs = backend.cases(share)
        emit(
            {
                "event": "ready",
                "worker": share.worker,
                "pid": os.getpid(),
                "blocks": [share.first_block, share.first_block + share.block_count],
                "case_order": [f"{case}@{tokens}" for tokens, case in pairs],
                **loaded.ready,
                "frequency_source": frequency_source,
                "isolation": state.to_json(),
                "canary": canary.describe(),
            }
        )
        _timer_floor(share, emit, loaded.sync, probes)
        for index, (tokens, case) in enumerate(pairs):
            if index:
                before_case(case, tokens)
            watch.wait_until_quiet(f"{case}@{tokens}")
            calls, row = backend.case_calls(share, loaded, case, tokens)
            work = functools.partial(backend.ledger, share, case, tokens, calls)
            _measure_case(
                share, calls, row, case, tokens, emit, loaded.sync, probes, check_stop, work
            )
            backend.after_case(share)
    emit({"event": "done", "worker": share.worker})


def _time_pair(
    share: Share,
    variants: dict[str, Callable[[], Any]],
    label: tuple[str, int, str],
    emit: Emit,
    sync: Callable[[], None],
    probes: BlockProbes,
    check_stop: Callable[[], None],
) -> list[BlockRecord]:
    """Warm up and time this share's blocks of ``variants`` for ``label`` (case, tokens,
    scope) in the share's design and window, reporting progress through ``emit``."""
    config = share.config
    case, tokens, scope = label
    return measure_pair(
        variants,
        case=case,
        tokens=tokens,
        warmup=config.warmup,
        blocks=share.block_count,
        iterations=config.iterations,
        seed=schedule_seed(config, case, tokens, share.worker, scope),
        device=torch.device(share.device).type,
        sync=sync,
        probes=probes,
        progress=lambda n: emit({"event": "progress", "calls": n}),
        check_stop=check_stop,
        scope=scope,
        first_block=share.first_block,
        window=config.timing_window,
    )


def _timer_floor(share: Share, emit: Emit, sync: Callable[[], None], probes: BlockProbes) -> None:
    """Time the empty call through the share's window after its warm-up; emit the records."""
    config = share.config
    floor = measure_timer_floor(
        device=torch.device(share.device).type,
        sync=sync,
        probes=probes,
        warmup=config.warmup,
        window=config.timing_window,
    )
    emit(_records(share, TIMER_CASE, 0, TIMER_SCOPE, [r.to_json() for r in floor]))


def _block_probes(share: Share, canary: CanaryLike, on: bool) -> tuple[str, BlockProbes]:
    """What is read at every block edge (MHz, GPU clock, the other cores' jiffies, and the
    canary unless it is off), and the MHz source. Called before ``isolated()``, so the
    other cores are the ones this process may run on besides the measuring core."""
    frequency_source, read_mhz = sysinfo.cpu_frequency_reader(share.cpu_core)
    device = torch.device(share.device)
    probes = BlockProbes(
        read_mhz=read_mhz,
        read_gpu_mhz=devices.gpu_clock_reader(device),
        other_cores=other_cores_reader(share.cpu_core),
        **({"canary": canary.read_us, "device_canary": canary.device_us} if on else {}),
    )
    return frequency_source, probes


def _records(share: Share, case: str, tokens: int, scope: str, rows: list[dict]) -> Event:
    for row in rows:
        row["worker"] = share.worker
    return {
        "event": "records",
        "worker": share.worker,
        "case": case,
        "tokens": tokens,
        "scope": scope,
        "records": rows,
    }


def calls_per_share(config: RunConfig, block_count: int) -> int:
    """Warm-up and timed calls of one case in one share (twice that with the A/A check)."""
    calls = 2 * (config.warmup + block_count * config.iterations)
    return 2 * calls if config.aa_check else calls


def probe_row(
    target: Target, scenario: Scenario, calls: dict[str, Callable[[], Any]]
) -> dict[str, Any]:
    """The validation row of one scenario, with where its inputs live and the syncs torch
    reports inside one call of each variant (after validation's call: nothing lazy is
    left), labelled as the lower bound they are (``device_syncs_label``).

    A placement that differs from the PR's makes the row not ok, like a lookup mismatch.
    """
    row = validate_scenario(target, scenario).to_json()
    device = scenario.input_ids.device
    problems = placement_problems(scenario, torch.device(device.type))
    row["placements"] = placements(scenario)
    if problems:
        row["ok"] = False
        row["mismatch"] = {**(row.get("mismatch") or {}), "placements": problems}
    with torch.inference_mode():
        row["device_syncs"] = {name: count_device_syncs(calls[name], device) for name in VARIANTS}
    row["device_syncs_label"] = SYNC_LABEL
    return row


def _measure_case(
    share: Share,
    calls: Calls,
    row: dict[str, Any] | None,
    case: str,
    tokens: int,
    emit: Emit,
    sync: Callable[[], None],
    probes: BlockProbes,
    check_stop: Callable[[], None],
    work: Callable[[], dict[str, dict[str, Any]] | None] = lambda: None,
) -> None:
    """Report one case's validation ``row`` (None: nothing validated), then, once it
    passed, its ``work`` (each variant's ledger), then time it; ``probes`` are read at
    every block edge."""
    config = share.config
    if row is not None:
        emit(
            {
                "event": "validation",
                "worker": share.worker,
                "case": case,
                "tokens": tokens,
                "row": row,
            }
        )
        if not row["ok"]:
            emit({"event": "progress", "calls": calls_per_share(config, share.block_count)})
            return
    _report_work(share, case, tokens, work, emit)
    scopes = [(MICRO_SCOPE, calls)]
    if config.aa_check:  # the baseline against itself, under both labels
        scopes.append((AA_SCOPE, {"baseline": calls["baseline"], "fixed": calls["baseline"]}))
    try:
        timed = []
        for scope, variants in scopes:
            records = _time_pair(
                share, variants, (case, tokens, scope), emit, sync, probes, check_stop
            )
            timed.append((scope, [r.to_json() for r in records]))
    except Exception as exc:  # a crash inside a wrapper: record it, go on with the next case
        message = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
        emit(
            {
                "event": "case_error",
                "worker": share.worker,
                "case": case,
                "tokens": tokens,
                "error": f"crashed while timing: {message}",
            }
        )
        return
    for scope, rows in timed:
        emit(_records(share, case, tokens, scope, rows))


def _report_work(
    share: Share,
    case: str,
    tokens: int,
    work: Callable[[], dict[str, dict[str, Any]] | None],
    emit: Emit,
) -> None:
    """Count each variant's work once (before the warm-up: nothing timed sees it) and emit
    it; a call that raises is reported as the ``work`` event's ``error``, and the timing
    that follows records the crash."""
    try:
        ledger, error = work(), None
    except Exception as exc:
        ledger, error = None, f"{type(exc).__name__}: {one_line(exc)}"
    if ledger is None and error is None:
        return
    emit(
        {
            "event": "work",
            "worker": share.worker,
            "case": case,
            "tokens": tokens,
            "device": torch.device(share.device).type,
            "ledger": ledger,
            "error": error,
        }
    )
