"""The measurement pipeline: config → checkpoint → scenarios → target → timing → results.

``run`` checks every input before it writes anything (and that the code this process
has already imported still matches its files, see ``freshness``), then measures: in its own
process when ``processes=1`` (the original single-process design), else in that many
fresh worker processes one after the other (``python -m embedbench.worker``), each
loading the table itself, pinning, warming up and timing its share of every case's
blocks (see ``measure``). A ``_Collector`` takes the events of either, writes the
output directory as they arrive and a case's summary once every worker has measured
it. While workers measure, this process runs on the other allowed cores (``parentcore``),
and a worker waits after each event that changes a file until it is written (the
handshake, see ``worker``): the parent never writes while a worker times. The host facts
metadata.json records are gathered in ``prepare``, before any worker starts.
``paired_benchmark`` runs any two zero-argument callables through the same timing
and statistics: callables given as a dict in this one process, those of an importable
factory (``"package.module:function"``) in worker processes as ``run`` does, their events
kept in memory by a ``_PairedCollector`` (no output directory).
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import torch
from tqdm import tqdm

from embedbench.config import (
    DEFAULT_BLOCKS,
    DEFAULT_PROCESSES,
    SMALL_DESIGN_DF,
    RunConfig,
    current_entry_point,
    default_output_dir,
)
from embedbench.errors import ConfigError, EmbedbenchError
from embedbench.harness import (
    clock,
    devices,
    freshness,
    hostref,
    stability,
    stats,
    sysinfo,
    windows,
)
from embedbench.harness.bandwidth import MemoryCeiling
from embedbench.harness.callgrind import NOT_COUNTED
from embedbench.harness.countrun import CountError, Counts, check_counts
from embedbench.harness.design import DERIVED, GIVEN, keyword_spelling
from embedbench.harness.devices import resolve_device
from embedbench.harness.hostlock import HostLock
from embedbench.harness.interrupts import RunInterrupted, StopFlag, stop_requests
from embedbench.harness.ioguard import IoReading, guard_window_s
from embedbench.harness.isolation import (
    ContentionReading,
    resolve_cpu_core,
)
from embedbench.harness.ledger import merge_workers
from embedbench.harness.parentcore import ParentAffinity, measuring_here
from embedbench.harness.parentwatch import ParentActivity
from embedbench.harness.timing import (
    AA_SCOPE,
    METRIC_ORDER,
    MICRO_SCOPE,
    TIMER_SCOPE,
    BlockRecord,
    WorkerBlockRecord,
    derive_seed,
)
from embedbench.measure import (
    FACTORY_CASE,
    FACTORY_TOKENS,
    Event,
    PairBackend,
    Share,
    calls_per_share,
    load_factory,
    worker_paths,
)
from embedbench.omni import checkpoint, families, synthetic
from embedbench.omni.targets import VARIANTS
from embedbench.report import summary
from embedbench.report.results import ResultsWriter, RunResult, check_output_dir
from embedbench.report.schema import OWN_REFS, PR_VERSION_KEYS
from embedbench.runhost import RealHost, RunHost, host_reference_path
from embedbench.spawn import WorkerError, worker_environment

__all__ = [
    "HOISTED_TARGET_FIELDS",
    "PIPELINE_MODULES",
    "RECHECK_WINDOW_S",
    "HostFacts",
    "Log",
    "PairedResult",
    "PreparedRun",
    "WorkerError",
    "check_loaded_code",
    "host_reference_path",
    "measure_prepared",
    "paired_benchmark",
    "prepare",
    "run",
    "total_calls",
]

Log = Callable[[str], None]
# The guards' sampling window between workers or cases: 2 × 0.1 s of /proc/stat still
# spans 50 clock ticks at HZ=250, enough to tell a busy core from a quiet one.
# EMBEDBENCH_CONTENTION_WINDOW_S replaces it, as every guard window (ioguard.guard_window_s).
RECHECK_WINDOW_S = 0.1
# The modules whose embedbench imports make up the run's pipeline in this process.
PIPELINE_MODULES = ("embedbench.runner", "embedbench.measure")

# Target metadata fields that metadata.json holds at top level (each fact once).
HOISTED_TARGET_FIELDS = ("refs", "dirty", "versions", "lm_shim")


def _stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _utc_now() -> datetime:
    """Now, on the clock the measuring code reads (``harness.clock``: a simulated host's
    in ``embedbench.sim``)."""
    return datetime.fromtimestamp(clock.now().wall(), timezone.utc)


@dataclass(frozen=True)
class HostFacts:
    """What metadata.json records of this machine, gathered before any worker starts: the
    device, the provenance (with the checkpoint's fingerprint) and the package versions."""

    device: dict[str, Any]
    provenance: dict[str, Any]
    versions: dict[str, str | None]

    @classmethod
    def gather(
        cls,
        device: torch.device,
        cpu_core: int,
        model_dir: Path,
        location: checkpoint.EmbeddingLocation,
    ) -> HostFacts:
        """Read them now (NVML, sysfs, the checkpoint's header), not while a worker times."""
        described = devices.describe(device)
        fingerprint = checkpoint.fingerprint(model_dir, location.shard, checkpoint.EMBEDDING_KEY)
        return cls(
            device=described,
            provenance={**sysinfo.provenance(cpu_core, described), "checkpoint": fingerprint},
            versions=sysinfo.versions(),
        )


@dataclass
class PreparedRun:
    """A run whose inputs all passed their checks; nothing has been written yet."""

    config: RunConfig
    device: torch.device
    cpu_core: int
    model_dir: Path
    synthetic: bool
    facts: checkpoint.ThinkerFacts
    location: checkpoint.EmbeddingLocation
    output_dir: Path
    host: HostFacts
    started: datetime = field(default_factory=_utc_now)
    code_fresh: freshness.FreshnessReport | None = None

    def shares(self) -> list[Share]:
        """Each worker's share of the blocks (one share for ``processes=1``)."""
        return [
            Share(
                config=self.config,
                worker=worker,
                first_block=span.start,
                block_count=len(span),
                cpu_core=self.cpu_core,
                device=str(self.device),
                model_dir=str(self.model_dir),
            )
            for worker, span in enumerate(self.config.worker_blocks())
        ]


def prepare(config: RunConfig, *, log: Log = _stderr) -> PreparedRun:
    """Check every input (device, core, output dir, repo and refs, checkpoint) without
    writing results, and gather the host facts metadata.json records."""
    if config.counts:  # valgrind, before anything else is checked or measured
        check_counts()
    device = resolve_device(config.device)
    core = resolve_cpu_core(config.cpu_core)
    started = _utc_now()
    output_dir = (
        Path(config.output_dir)
        if config.output_dir
        else default_output_dir(started.strftime("%Y%m%dT%H%M%SZ"))
    )
    check_output_dir(output_dir, overwrite=config.overwrite)
    checkout = None
    if config.target == "vllm-omni":
        # Repository, refs and the method at each ref, before the checkpoint is read;
        # vLLM itself is imported only when the target is built.
        from embedbench.omni.targets.vllm_omni import check_vllm_omni_source

        checkout = check_vllm_omni_source(
            repo=config.repo,
            baseline_ref=config.baseline_ref,
            candidate_ref=config.candidate_ref,
            family=_source_family(config),
        )["repo"]
    code_fresh = check_loaded_code(config, checkout=checkout)
    # The run's first line, once the quick refusals are behind it: a derived design.
    for note in config.design.notes():
        log(note)
    if config.model is None:
        family = families.requested_family(config.family, has_model=False)
        model_dir = synthetic.default_synthetic_checkpoint(progress=log, family=family)
    else:
        model_dir = Path(config.model).expanduser()
    facts = checkpoint.read_thinker_facts(model_dir)
    # The family is the checkpoint's; a --family it contradicts is refused here (exit 2).
    families.check_family(config.family, facts.family, facts.family_source, model_dir)
    location = checkpoint.locate_embedding(model_dir, facts)
    return PreparedRun(
        config=config,
        device=device,
        cpu_core=core,
        model_dir=model_dir,
        synthetic=synthetic.is_synthetic(model_dir),
        facts=facts,
        location=location,
        output_dir=output_dir,
        host=HostFacts.gather(device, core, model_dir, location),
        started=started,
        code_fresh=code_fresh,
    )


def _source_family(config: RunConfig) -> str:
    """The family whose thinker the vllm-omni target reads from git, known before the
    checkpoint is checked: the named one, the embedded default's, or the one --model's
    config.json says (a bad checkpoint is reported later, in its turn)."""
    family = families.requested_family(config.family, has_model=config.model is not None)
    if family != families.AUTO_FAMILY:
        return family
    try:
        return checkpoint.read_thinker_facts(Path(config.model).expanduser()).family
    except EmbedbenchError:
        return families.default().name


def check_loaded_code(
    config: RunConfig, *, checkout: str | None = None
) -> freshness.FreshnessReport:
    """Before anything is measured: the run's modules that this process has already
    imported (a reused kernel) must match their files, or ``StaleCodeError``.

    The pipeline's embedbench modules and, for the vllm-omni target, the thinker's
    modules if an earlier run imported them. The measuring process checks its target's
    modules again once it is built (``measure.check_fresh``).
    """
    names = freshness.imported_modules(PIPELINE_MODULES, package="embedbench")
    measured: tuple[str, ...] = ()
    if config.target == "vllm-omni":
        from embedbench.omni.targets.vllm_omni import loaded_modules, measured_methods

        names += loaded_modules()
        measured = tuple(measured_methods().values())
    return freshness.check_modules(names, checkout=checkout, named_first=measured)


def _metadata(
    prepared: PreparedRun,
    ready: Event,
    guards: tuple[ContentionReading, IoReading],
    parent: ParentAffinity | None,
) -> dict[str, Any]:
    """metadata.json at the start of measuring, from the first worker's ``ready`` event
    and what was gathered before (it computes nothing: a worker is about to time)."""
    contention, io = guards
    config = prepared.config
    target_metadata = ready["target_metadata"]
    vocab, hidden = prepared.location.shape
    # Each fact once: where the original script has a name for it (baseline_ref,
    # checkout, torch, vllm, transformers, embedding_shape, dtype, start_time), that
    # top-level field alone; ``refs``, ``versions`` and ``embedding`` hold the rest.
    # The target's refs, work-tree state, versions and shim go to their top-level homes;
    # ``target_info`` keeps what only the target knows (classes, files, call chain).
    target_refs = target_metadata.get("refs") or {}
    refs = {key: target_refs.get(key) for key in OWN_REFS}
    target_info = {k: v for k, v in target_metadata.items() if k not in HOISTED_TARGET_FIELDS}
    all_versions = {**(target_metadata.get("versions") or {}), **prepared.host.versions}
    versions = {k: v for k, v in all_versions.items() if k not in PR_VERSION_KEYS}
    device = prepared.host.device
    return {
        "status": "running",
        "target": ready["target"],
        "target_info": target_info,
        # Filled by targets that read code from git (vllm-omni); None for the replica.
        "refs": refs,
        "dirty": target_metadata.get("dirty"),
        "code_sha256": ready["code"],
        # The freshness check of the (first) measuring process, and of this one before it.
        "code_fresh": {
            **ready["code_fresh"],
            "parent": prepared.code_fresh.to_json() if prepared.code_fresh else None,
        },
        "versions": versions,
        "device": prepared.device.type,
        "device_name": device["name"],
        "provenance": prepared.host.provenance,
        "cpu_core": prepared.cpu_core,
        # Where this process ran while measuring (off the measuring core when it could).
        "parent_affinity": parent.cores if parent else None,
        "parent_affinity_reason": parent.reason if parent else None,
        "cpu_frequency_source": ready["frequency_source"],
        "canary": ready.get("canary"),
        "threads": ready["isolation"],
        "contention": contention.to_json(),
        "contention_checks": [{"before": "run", **contention.to_json()}],
        "busy_core": contention.label,
        "io_guard": io.to_json(),
        "io_checks": [{"before": "run", **io.to_json()}],
        "busy_io": io.label,
        "allow_busy": config.allow_busy,
        "aa_check": config.aa_check,
        # How --counts took its figures (countrun), once they are taken; null without.
        "counts": None,
        "seed": config.seed,
        "warmup": config.warmup,
        "blocks": config.blocks,
        "iterations": config.iterations,
        "processes": config.processes,
        "processes_source": config.processes_source,
        "blocks_source": config.blocks_source,
        "timing_window": config.timing_window,
        "timing_window_description": windows.describe(config.timing_window),
        "lm_shim": config.lm_shim,
        "family": prepared.facts.family,
        "family_source": prepared.facts.family_source,
        "workers": [],
        "lengths": list(config.lengths),
        "cases": list(config.cases),
        "model": str(prepared.model_dir),
        "synthetic": prepared.synthetic,
        "embedding": {
            "key": checkpoint.EMBEDDING_KEY,
            "shard": prepared.location.shard.name,
        },
        "mask_device": "cpu",
        "metric_order": list(METRIC_ORDER),
        "environment": sysinfo.allowed_environment(),
        "config": config.to_json(),
        "entry_point": current_entry_point(),
        # The original script's top-level fields, for whoever reads its output.
        "baseline_ref": target_refs.get("baseline_ref"),
        "checkout": target_refs.get("checked_out_commit"),
        **{key: all_versions.get(key) for key in PR_VERSION_KEYS},
        "gpu": device["name"] if prepared.device.type == "cuda" else None,
        "torch_cpu_threads": 1,
        "embedding_shape": [vocab, hidden],
        "dtype": "bfloat16",
        "input_ids_dtype": "int32",
        "start_time": prepared.started.timestamp(),
        "end_time": None,
    }


PROGRESS_STEP_PCT = 10  # away from a terminal, one line each time the run passes a step


class _ProgressLines:
    """Progress as a few plain lines on a stream that is not a terminal (a notebook's
    stderr, a CI log): one per ``PROGRESS_STEP_PCT`` of the calls, nothing redrawn, no
    widget (papermill would save a frozen one, and nbconvert an empty slot)."""

    def __init__(self, total: int, stream: Any) -> None:
        self.total, self.stream = max(total, 1), stream
        self.done = 0
        self.shown = 0  # the last step printed, in percent

    def update(self, calls: int) -> None:
        self.done = min(self.done + calls, self.total)
        step = self.done * 100 // self.total // PROGRESS_STEP_PCT * PROGRESS_STEP_PCT
        if step > self.shown:
            self.shown = step
            print(
                f"embedbench: {step} % of {self.total} calls",
                file=self.stream,
                flush=True,
            )

    def close(self) -> None:
        """Nothing to tear down: the lines are the record."""


class _Bar(tqdm):
    """tqdm without its monitor thread (it would wake in this process while a worker
    times)."""

    monitor_interval = 0


@contextmanager
def _progress_bar(total: int, enabled: bool) -> Iterator[Callable[[int], None]]:
    """Progress on stderr that appears with the first finished calls (a run refused before
    measuring prints nothing but its one line): a bar on a terminal, a line per tenth of
    the calls elsewhere (``_ProgressLines``), nothing when not ``enabled``."""
    bar: list[Any] = []

    def advance(calls: int) -> None:
        if not enabled:
            return
        if not bar:
            stream = sys.stderr
            if stream.isatty():
                bar.append(_Bar(total=total, unit="call", desc="embedbench", file=stream))
            else:
                bar.append(_ProgressLines(total, stream))
        bar[0].update(calls)

    try:
        yield advance
    finally:
        if bar:
            bar[0].close()


def total_calls(config: RunConfig) -> int:
    """Warm-up and timed calls of the whole run, over every worker (for progress bars)."""
    per_case = sum(calls_per_share(config, len(span)) for span in config.worker_blocks())
    return len(config.lengths) * len(config.cases) * per_case


@dataclass
class _CaseState:
    """What the workers have reported for one case and length so far."""

    validation: dict[int, dict[str, Any]] = field(default_factory=dict)
    # Each worker's ledger per variant (None: its counting call raised).
    work: dict[int, dict[str, Any] | None] = field(default_factory=dict)
    records: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    timed: dict[str, set[int]] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    answered: set[int] = field(default_factory=set)
    written: bool = False


def _host_wait_line(event: Event) -> str:
    """The one line of a worker's quiet-host wait."""
    return (
        f"waiting up to {event['max_wait_s']:.0f} s for a quiet host before "
        f"{event['before']} (worker {event['worker']}): {event['reason']}"
    )


class _Collector:
    """Turns measurement events into the output directory (the writer starts at ``ready``)."""

    def __init__(
        self,
        prepared: PreparedRun,
        host: RunHost,
        lock: HostLock,
        guards: tuple[ContentionReading, IoReading],
        advance: Callable[[int], None],
        log: Log,
        affinity: list[int],
        ceiling: MemoryCeiling | None = None,
    ) -> None:
        self.prepared = prepared
        self.ceiling = ceiling
        self.host = host
        self.affinity = affinity
        self.lock = lock
        self.contention, self.io = guards
        self.advance = advance
        self.log = log
        self.writer: ResultsWriter | None = None
        self.first_ready: Event | None = None
        # Where this process runs while measuring; set by whoever measures.
        self.parent: ParentAffinity | None = None
        self.cases = {
            (case, tokens): _CaseState()
            for tokens in prepared.config.lengths
            for case in prepared.config.cases
        }
        self.completed: list[str] = []
        self.host_probes: list[dict[str, Any]] = []
        # This host's stored quiet levels, read once before any worker starts.
        self.reference_path = host.reference_path()
        self.reference_entries = hostref.load_all(self.reference_path)
        self._order = list(self.cases)
        self._rows: dict[tuple[str, int], dict[str, Any]] = {}

    # -- events -----------------------------------------------------------------------------

    def handle(self, event: Event) -> None:
        """Take one event of ``measure.measure_share``."""
        kind = event["event"]
        if kind == "progress":
            self.advance(int(event["calls"]))
            return
        if kind == "ready":
            self._ready(event)
            return
        if kind == "host_wait":
            self.log(_host_wait_line(event))
            return
        if kind == "host_probe":  # kept in memory, written with the next results
            self.host_probes.append({k: v for k, v in event.items() if k != "event"})
            return
        writer = self._writer()
        if kind == "records":  # A/A records go to aa-raw.json, the rest to micro-raw.json
            writer.add_records(event["records"])
            if event["scope"] != TIMER_SCOPE:
                self._timed(event)
        elif kind == "validation":
            self._validation(event)
        elif kind == "work":
            self._work(event)
        elif kind == "case_error":
            state = self.cases[(event["case"], event["tokens"])]
            state.errors.append(event["error"])
            self._answered(event["case"], event["tokens"], event["worker"])

    def _timed(self, event: Event) -> None:
        """One worker's records of one scope of a case; the case is answered by that worker
        once it has delivered every scope (the A/B comparison, and the A/A check if asked)."""
        case, tokens, worker = event["case"], event["tokens"], event["worker"]
        state = self.cases[(case, tokens)]
        state.records.setdefault(event["scope"], []).extend(event["records"])
        state.timed.setdefault(event["scope"], set()).add(worker)
        scopes = (MICRO_SCOPE, AA_SCOPE) if self.prepared.config.aa_check else (MICRO_SCOPE,)
        if all(worker in state.timed.get(scope, ()) for scope in scopes):
            self._answered(case, tokens, worker)

    def _writer(self) -> ResultsWriter:
        if self.writer is None:
            raise WorkerError("a worker reported results before it was ready")
        return self.writer

    def _ready(self, event: Event) -> None:
        worker = {
            key: event[key]
            for key in ("worker", "pid", "blocks", "case_order", "code", "table", "isolation")
        }
        worker["started_at"] = _utc_now().isoformat()
        worker["code_fresh_s"] = event["code_fresh"]["seconds"]
        if self.writer is None:
            self.first_ready = event
            guards = (self.contention, self.io)
            metadata = _metadata(self.prepared, event, guards, self.parent)
            ceiling = self.ceiling.to_json() if self.ceiling else None
            self.writer = ResultsWriter(
                self.prepared.output_dir,
                {
                    **metadata,
                    "host_lock": self.lock.to_json(),
                    "memory_ceiling": ceiling,
                    **self._host_fields(metadata),
                },
                aa_check=self.prepared.config.aa_check,
            )
            self.log(f"writing results to {self.prepared.output_dir}")
        else:
            self._same_code(event)
        workers = self.writer.metadata["workers"]
        self.writer.update_metadata(workers=[*workers, worker])

    def _same_code(self, event: Event) -> None:
        """Every worker must measure exactly the code the first one measured."""
        first = self.first_ready
        assert first is not None
        for key in ("target", "code", "target_metadata"):
            if event[key] != first[key]:
                raise WorkerError(
                    f"worker {event['worker']} measured different code than worker "
                    f"{first['worker']} ({key} differs: was the source changed during the "
                    "run?); rerun without editing the measured code"
                )

    def _validation(self, event: Event) -> None:
        writer = self._writer()
        case, tokens, row = event["case"], event["tokens"], event["row"]
        state = self.cases[(case, tokens)]
        state.validation[event["worker"]] = row
        if not row.get("ok"):
            self._answered(case, tokens, event["worker"])
        merged = self._merged_validation(state)
        if len(state.validation) == 1:
            writer.add_validation(merged)
        else:
            writer.replace_validation(case, tokens, merged)

    def _work(self, event: Event) -> None:
        """One worker's ledger of a case: work.json's rows of that case, over the workers
        so far (the first one's counts; a worker whose differ is named in them)."""
        case, tokens, worker = event["case"], event["tokens"], event["worker"]
        state = self.cases[(case, tokens)]
        state.work[worker] = event.get("ledger")
        if event.get("error"):
            self.log(f"warning: worker {worker} could not count {case}@{tokens}: {event['error']}")
        merged = merge_workers(state.work)
        rows = [
            {
                "case": case,
                "tokens": tokens,
                "variant": variant,
                "device": event["device"],
                **row,
                **NOT_COUNTED,
            }
            for variant, row in merged.items()
        ]
        if rows:
            self._writer().set_work(case, tokens, rows)

    def add_counts(self, counts: Counts) -> None:
        """Each work.json row's instructions and simulated misses per call (null where not
        counted), and metadata.json's ``counts``: how they were taken."""
        writer = self._writer()
        keys = list(dict.fromkeys((r["case"], r["tokens"]) for r in writer.work))
        for case, tokens in keys:
            rows = [
                {**r, **counts.row_fields(case, tokens, r["variant"])}
                for r in writer.work
                if (r["case"], r["tokens"]) == (case, tokens)
            ]
            writer.set_work(case, tokens, rows)
        writer.update_metadata(counts=counts.metadata)

    @staticmethod
    def _merged_validation(state: _CaseState) -> dict[str, Any]:
        """The first worker's row; any worker's failure makes it fail, named per worker."""
        failed = [w for w in sorted(state.validation) if not state.validation[w].get("ok")]
        row = dict(state.validation[failed[0] if failed else min(state.validation)])
        if len(state.validation) > 1 or failed:
            row["workers_ok"] = {str(w): bool(r.get("ok")) for w, r in state.validation.items()}
        return row

    def _answered(self, case: str, tokens: int, worker: int) -> None:
        state = self.cases[(case, tokens)]
        state.answered.add(worker)
        if len(state.answered) == self.prepared.config.processes and not state.written:
            self._summarize(case, tokens, state)

    def _summarize(self, case: str, tokens: int, state: _CaseState) -> None:
        writer = self._writer()
        state.written = True
        failed = [r for r in state.validation.values() if not r.get("ok")]
        if failed:
            self._add_row(case, tokens, summary.invalid_row(case, tokens))
        elif state.errors:
            self._add_row(case, tokens, summary.invalid_row(case, tokens, error=state.errors[0]))
        else:
            config = self.prepared.config
            aa = None
            if config.aa_check:
                aa = summary.aa_summary(state.records[AA_SCOPE])
            row = summary.summary_row(
                case,
                tokens,
                state.records[MICRO_SCOPE],
                seed=derive_seed(config.seed, case, tokens),
                aa=aa,
            )
            labels = {key: writer.metadata.get(key) for key in ("busy_core", "busy_io")}
            self._add_row(case, tokens, {**row, **{k: v for k, v in labels.items() if v}})
        writer.update_metadata(**self._host_fields(writer.metadata))

    def _host_fields(self, metadata: dict[str, Any]) -> dict[str, Any]:
        """``host_probes`` and ``host_stability`` from what has arrived so far."""
        writer = self.writer
        records = [*writer.records, *writer.aa_records] if writer else []
        reading = stability.assess_host(
            records,
            probes=self.host_probes,
            other_cores_busy=stability.busiest_other_cores(metadata.get("contention_checks", [])),
            reference=stability.reference_from(
                self.reference_entries.get(self._reference_key(metadata), []),
                float(metadata.get("start_time") or clock.now().wall()),
            ),
        )
        return {"host_probes": list(self.host_probes), "host_stability": reading.to_json()}

    def _reference_key(self, metadata: dict[str, Any]) -> str:
        cpu = (metadata.get("provenance") or {}).get("cpu") or {}
        return hostref.host_key(
            cpu.get("model"),
            int(metadata.get("cpu_core") or 0),
            str(metadata.get("device")),
            metadata.get("canary") or {},
        )

    def keep_reference(self) -> None:
        """After a complete run: its memory level joins this host's reference where
        ``stability.joins_reference`` says so (nothing where the file cannot be written)."""
        metadata = self.writer.metadata if self.writer else {}
        reading = metadata.get("host_stability") or {}
        if not stability.joins_reference(reading):
            return
        entry = {
            "level": reading["memory_level"],
            "time": metadata.get("end_time") or clock.now().wall(),
            "run": str(self.prepared.output_dir),
        }
        hostref.append(self.reference_path, self._reference_key(metadata), entry)

    def _add_row(self, case: str, tokens: int, row: dict[str, Any]) -> None:
        """Write summary rows in the configured order, whichever worker finished last."""
        self._rows[(case, tokens)] = row
        while self._order and self._order[0] in self._rows:
            key = self._order.pop(0)
            self._writer().add_summary(self._rows.pop(key))
            self.completed.append(f"{key[0]}@{key[1]}")

    def check_design(self, first: Share) -> None:
        """After the first worker of a design with few degrees of freedom: one line with the
        smallest reduction it can call (from that worker's blocks), and the record of it."""
        config = self.prepared.config
        if self.writer is None or not 1 <= config.processes - 1 <= SMALL_DESIGN_DF:
            return
        mine = {
            f"{case}@{tokens}": [r for r in state.records.get(MICRO_SCOPE, []) if r["worker"] == 0]
            for (case, tokens), state in self.cases.items()
        }
        found = summary.design_check(
            {k: v for k, v in mine.items() if v},
            workers=config.processes,
            blocks_per_worker=first.block_count,
        )
        mdes = [v["mde_pct"] for v in found.values() if v["mde_pct"] is not None]
        defaults = [v["default_design_mde_pct"] for v in found.values() if v["mde_pct"]]
        if not mdes:
            return
        self.writer.update_metadata(
            design_check={"from": "worker 0", "workers": config.processes, "cases": found}
        )
        self.log(
            f"{config.processes} worker processes give {config.processes - 1} degree(s) of "
            f"freedom: from worker 0's blocks, this run can call a reduction of "
            f"{min(mdes):.0f}–{max(mdes):.0f} % at best (80 % power), against "
            f"{min(defaults):.0f}–{max(defaults):.0f} % for --blocks {DEFAULT_BLOCKS} over "
            f"{DEFAULT_PROCESSES} workers; smaller effects will read 'no detectable difference'"
        )

    # -- guards and the end -----------------------------------------------------------------

    def recheck(self, before: str) -> None:
        """The guards again, with shorter windows than before the run (they run between
        every two workers): I/O, then the core; either refuses the rest of the run."""
        allow_busy = self.prepared.config.allow_busy
        window = guard_window_s(RECHECK_WINDOW_S)
        io = self.host.quiet_io(allow_busy=allow_busy, window_s=window, log=self.log)
        reading = self.host.contention(
            self.prepared.cpu_core, allow_busy=allow_busy, candidates=self.affinity, window_s=window
        )
        writer = self._writer()
        meta = writer.metadata
        writer.update_metadata(
            io_checks=[*meta["io_checks"], {"before": before, **io.to_json()}],
            busy_io=meta["busy_io"] or io.label,
            contention_checks=[*meta["contention_checks"], {"before": before, **reading.to_json()}],
            busy_core=meta["busy_core"] or reading.label,
        )

    def worker_finished(
        self, worker: int, exit_code: int, parent: ParentActivity | None = None
    ) -> None:
        """Record when and how a worker ended, and what this process did while it measured
        (``parent_while_measuring``; None in one process); nothing for one never ready."""
        writer = self.writer
        if writer is None or all(w["worker"] != worker for w in writer.metadata["workers"]):
            return
        ended = {
            "ended_at": _utc_now().isoformat(),
            "exit_code": exit_code,
            "parent_while_measuring": parent.to_json() if parent else None,
        }
        workers = [
            {**w, **ended} if w["worker"] == worker else w for w in writer.metadata["workers"]
        ]
        writer.update_metadata(workers=workers)

    def finish(self, status: str, **fields: Any) -> None:
        """Final status, the completed cases and the end time (nothing if never ready)."""
        if self.writer is None:
            return
        ended = _utc_now()
        self.writer.update_metadata(
            **self._host_fields(self.writer.metadata),
            status=status,
            completed_cases=list(self.completed),
            end_time=ended.timestamp(),
            **fields,
        )
        # The files as written, checked once at the end; where jsonschema is missing
        # (a bare GPU image), the line says the check was skipped.
        check = (
            self.writer.schema_check()
            if self.writer.directory is not None
            else "skipped: results kept in memory, no files to check"
        )
        self.writer.update_metadata(schema_check=check)

    def result(self) -> RunResult:
        """The finished run, in memory."""
        w = self._writer()
        return RunResult(
            self.prepared.output_dir,
            w.metadata,
            w.records,
            w.validation,
            w.summary,
            w.aa_records,
            w.work,
        )


def run(config: RunConfig, *, log: Log = _stderr, progress: bool = True) -> RunResult:
    """Measure every case and length of ``config``; write and return the results.

    Refuses (``EmbedbenchError``) before writing anything when an input is bad, when
    another embedbench run holds the host lock, when the machine is still writing back
    (after waiting up to a minute for it) or when the pinned core is busy.
    """
    return measure_prepared(prepare(config, log=log), RealHost(), log=log, progress=progress)


def measure_prepared(
    prepared: PreparedRun, host: RunHost, *, log: Log = _stderr, progress: bool = True
) -> RunResult:
    """The run's one sequence on ``host``: the lock, the guards, every share (in this
    process for ``processes=1``, else one worker after the other with the guards again
    between them), the results and this host's quiet reference."""
    config = prepared.config
    with host.lock() as lock:
        affinity = host.allowed_cores()
        io = host.quiet_io(allow_busy=config.allow_busy, log=log)
        contention = host.contention(
            prepared.cpu_core, allow_busy=config.allow_busy, candidates=affinity
        )
        for label in (io.label, contention.label):
            if label:
                log(f"warning: {label}")
        # The memory system's ceiling on the measuring core, before any share is timed.
        ceiling = host.memory_ceiling(prepared.cpu_core)
        with _progress_bar(total_calls(config), progress) as advance:
            guards = (contention, io)
            collector = _Collector(
                prepared, host, lock, guards, advance, log, affinity, ceiling=ceiling
            )
            with _ended_as(collector, prepared), stop_requests() as stop:
                if config.processes == 1:
                    _measure_in_process(prepared, host, collector, stop)
                else:
                    _measure_in_workers(prepared, host, collector, stop, log)
        if config.counts:  # once every worker has ended, with the progress bar closed
            with _ended_as(collector, prepared):
                _count(prepared, host, collector, log)
        collector.finish("complete")
        collector.keep_reference()
        return collector.result()


@contextmanager
def _ended_as(collector: _Collector, prepared: PreparedRun) -> Iterator[None]:
    """An interrupt inside ends the run's files as ``interrupted`` (the completed cases
    kept), any other exception as ``failed``."""
    try:
        yield
    except KeyboardInterrupt as exc:  # also RunInterrupted, raised between blocks
        collector.finish("interrupted")
        if collector.writer is None:
            raise
        raise RunInterrupted(
            f"interrupted ({exc or 'KeyboardInterrupt'}); the {len(collector.completed)} "
            f"completed case(s) are kept in {prepared.output_dir}"
        ) from exc
    except BaseException as exc:
        collector.finish("failed", error=f"{type(exc).__name__}: {exc}")
        raise


def _count(prepared: PreparedRun, host: RunHost, collector: _Collector, log: Log) -> None:
    """``--counts``, after the timing: each form's instructions and simulated misses per
    call, from one counting process on the CPU (``harness.countrun``), into work.json and
    metadata.json. A counting process that fails leaves the timing as it is, and says
    why in metadata's ``counts``."""
    if collector.writer is None:
        return
    share = prepared.shares()[0]
    try:
        counts = host.count_calls(share, measured_device=prepared.device.type, log=log)
    except CountError as exc:
        log(f"warning: {exc}; the results keep their timing, without counts")
        counts = Counts(metadata={"tool": "callgrind", "error": str(exc)})
    collector.add_counts(counts)


def _measure_in_process(
    prepared: PreparedRun, host: RunHost, collector: _Collector, stop: StopFlag
) -> None:
    """``processes=1``: the original design, every block in this process (``isolated``
    pins it to the measuring core; it writes between cases, in the same thread)."""
    (share,) = prepared.shares()
    collector.parent = measuring_here(prepared.cpu_core)
    host.measure_here(
        share,
        collector.handle,
        check_stop=stop.check,
        before_case=lambda case, tokens: collector.recheck(f"{case}@{tokens}"),
    )
    collector.worker_finished(share.worker, 0)


def _measure_in_workers(
    prepared: PreparedRun, host: RunHost, collector: _Collector, stop: StopFlag, log: Log
) -> None:
    """Every share in its own fresh process, one after the other on the pinned core,
    with this process on the other allowed cores meanwhile (where there is one)."""
    with host.pinned_away(prepared.cpu_core, collector.affinity) as parent:
        collector.parent = parent
        for share in prepared.shares():
            stop.check()
            if share.worker:
                collector.recheck(f"worker {share.worker}")
            host.run_worker(share, collector, stop, log, spawning=parent.spawning)
            if share.worker == 0:
                collector.check_design(share)


@dataclass
class PairedResult:
    """The outcome of ``paired_benchmark``: the paired summary plus the raw records.

    ``host_us``, ``reduction_pct``, ``pr_reduction_pct``, ``reduction_ci95_pct`` and
    ``verdict`` read through to ``summary`` (the one place they are computed);
    ``host_stability`` is the canary's reading of the host while it measured. From a
    factory, the records are ``WorkerBlockRecord``s (each with its ``worker``) and
    ``seed`` is the case's seed (as a run's summary row), each worker's schedule derived
    from the run seed and its index.
    """

    summary: stats.PairSummary
    seed: int
    records: list[BlockRecord] = field(repr=False)
    timer_floor: list[BlockRecord] = field(repr=False)
    host_stability: stability.HostStability | None = None
    # ``given``, or ``derived`` when ``processes`` was left unset.
    processes_source: str = GIVEN
    # Each variant's per-call ledger (docs/format.md, "work.json": a row's fields less
    # case, tokens and variant); None where nothing was counted.
    work: dict[str, dict[str, Any]] | None = None
    # With ``counts=True``: how the instructions and simulated misses in ``work`` were
    # taken (metadata.json's ``counts``); None without.
    counts: dict[str, Any] | None = None

    @property
    def host_us(self) -> dict[str, float]:
        """Median of block medians per variant."""
        return self.summary.host_us

    @property
    def reduction_pct(self) -> float:
        """The headline: the Hodges–Lehmann estimate, inside ``reduction_ci95_pct``."""
        return self.summary.reduction_pct

    @property
    def pr_reduction_pct(self) -> float:
        """The PR's statistic: 100 × (1 − fixed / baseline) of ``host_us``."""
        return self.summary.pr_reduction_pct

    @property
    def reduction_ci95_pct(self) -> tuple[float, float]:
        """The interval of the reduction (its level is ``summary.interval.level``)."""
        return self.summary.reduction_ci95_pct

    @property
    def verdict(self) -> str:
        """faster, slower or no detectable difference."""
        return self.summary.verdict


def paired_benchmark(
    variants: dict[str, Callable[[], Any]] | str,
    *,
    warmup: int,
    blocks: int,
    iterations: int,
    cpu_core: int | None = None,
    seed: int = 0,
    device: str = "cpu",
    allow_busy: bool = False,
    timing_window: str = windows.DEFAULT_WINDOW,
    processes: int | None = None,
    host: RunHost | None = None,
    counts: bool = False,
) -> PairedResult:
    """Time two zero-argument callables, ``{"baseline": f, "fixed": g}``, like ``run`` does.

    Takes the host lock and refuses a busy core unless ``allow_busy``, as ``run`` does.
    ``blocks`` must be even. ``timing_window`` is ``"pr"`` (the PR script's) or
    ``"tight"`` (see ``windows``).

    ``variants`` as a dict: measured in this one process (arbitrary callables cannot be
    sent to a fresh worker), so the interval is the within-process Hodges–Lehmann
    interval: it does not see what differs between processes; ``processes`` must be
    unset. As an importable factory ``"package.module:function"`` returning that dict:
    spread over ``processes`` fresh worker processes as ``run`` spreads a case, with its
    between-process t interval, which predicts a rerun (``_paired_in_workers``).
    Unset, ``processes`` is RunConfig's: the most, up to 5, that ``blocks // 2`` allows
    (one line on stderr when that is fewer than 5); ``processes_source`` of the result
    says whether it was given or derived. ``host``: where it measures (default: this
    machine; ``embedbench.sim.simulate_pair`` passes a simulated one). ``counts``: after
    the timing, also count each form's instructions and simulated cache misses per call
    under valgrind (``work`` and ``counts`` of the result); a factory only.
    """
    host = host if host is not None else RealHost()
    design = {
        "warmup": warmup,
        "blocks": blocks,
        "iterations": iterations,
        "seed": seed,
        "device": device,
        "cpu_core": cpu_core,
        "timing_window": timing_window,
    }
    if isinstance(variants, str):
        config = RunConfig(**design, allow_busy=allow_busy, processes=processes, counts=counts)
        return _paired_in_workers(variants, config, host)
    if counts:
        raise ConfigError(
            "counts=True needs a factory: counting runs the forms in another process, under "
            'valgrind, where callables cannot be sent; pass "package.module:function" (a '
            "function returning the dict)"
        )
    if set(variants) != set(VARIANTS):
        raise ConfigError(f"variants must be exactly {list(VARIANTS)}, got {list(variants)}")
    if processes is not None and processes != 1:
        raise ConfigError(
            f"processes={processes} needs a factory: callables passed as a dict run in this "
            'one process; pass "package.module:function" (a function returning the dict) '
            "to spread the blocks over worker processes"
        )
    source = DERIVED if processes is None else GIVEN
    checked = RunConfig(**design, processes=1)
    return dataclasses.replace(
        _paired_in_process(variants, checked, allow_busy, host), processes_source=source
    )


def _paired_in_process(
    variants: dict[str, Callable[[], Any]], checked: RunConfig, allow_busy: bool, host: RunHost
) -> PairedResult:
    """Every block of ``variants`` in this process, pinned to the measuring core: the one
    measuring sequence (``measure.measure_share``) with the callables as its backend,
    under the host lock, the I/O guard and the contention guard."""
    dev = resolve_device(checked.device)
    core = resolve_cpu_core(checked.cpu_core)
    config = dataclasses.replace(checked, allow_busy=allow_busy)
    (share,) = _factory_shares(None, config, core, str(dev))
    collector = _PairedCollector(_stderr)
    with host.lock():
        host.quiet_io(allow_busy=allow_busy, log=_stderr)
        host.contention(core, allow_busy=allow_busy, candidates=host.allowed_cores())
        with stop_requests() as stop:
            host.measure_here(
                share,
                collector.handle,
                check_stop=stop.check,
                before_case=lambda _case, _tokens: None,
                backend=PairBackend({name: variants[name] for name in VARIANTS}),
            )
    collector.worker_finished(share.worker, 0)
    return collector.result(config)


class _PairedCollector:
    """The events of a factory's workers, kept in memory: ``_Collector``'s ``handle`` and
    ``worker_finished``, without an output directory."""

    def __init__(self, log: Log) -> None:
        self.log = log
        self.records: list[dict[str, Any]] = []
        self.floor: list[dict[str, Any]] = []
        self.probes: list[dict[str, Any]] = []
        self.exit_codes: dict[int, int] = {}
        self.parent_activity: dict[int, ParentActivity] = {}
        self.work: dict[int, dict[str, Any] | None] = {}
        self._first_ready: Event | None = None

    def handle(self, event: Event) -> None:
        """Take one event of ``measure.measure_share`` (a factory's share)."""
        kind = event["event"]
        if kind == "ready":
            self._same_code(event)
        elif kind == "host_wait":
            self.log(_host_wait_line(event))
        elif kind == "host_probe":
            self.probes.append({k: v for k, v in event.items() if k != "event"})
        elif kind == "records":
            timer = event["scope"] == TIMER_SCOPE
            (self.floor if timer else self.records).extend(event["records"])
        elif kind == "work":
            self.work[event["worker"]] = event.get("ledger")
            if event.get("error"):
                self.log(
                    f"paired_benchmark: worker {event['worker']} could not count: {event['error']}"
                )

    def _same_code(self, event: Event) -> None:
        """Every worker must time the bytecode the first one timed."""
        first = self._first_ready
        if first is None:
            self._first_ready = event
        elif event["code"] != first["code"]:
            raise WorkerError(
                f"worker {event['worker']} timed different code than worker "
                f"{first['worker']} (was the factory's module edited during the run?); "
                "rerun without editing it"
            )

    def worker_finished(
        self, worker: int, exit_code: int, parent: ParentActivity | None = None
    ) -> None:
        """Keep how a worker ended and what this process did while it measured."""
        self.exit_codes[worker] = exit_code
        if parent is not None:
            self.parent_activity[worker] = parent

    def result(self, config: RunConfig) -> PairedResult:
        """The summary over every worker's blocks (the between-process interval) and the
        canary's reading of the host."""
        pair = summary.summarize_records(self.records)
        host = stability.assess_host([*self.floor, *self.records], probes=self.probes)
        return PairedResult(
            pair,
            derive_seed(config.seed, FACTORY_CASE, FACTORY_TOKENS),
            [WorkerBlockRecord.from_json(r) for r in self.records],
            [WorkerBlockRecord.from_json(r) for r in self.floor],
            host,
            config.processes_source,
            {v: {**row, **NOT_COUNTED} for v, row in merge_workers(self.work).items()} or None,
        )


def _factory_shares(spec: str | None, config: RunConfig, core: int, device: str) -> list[Share]:
    """Each worker's share of a pair's blocks (``spec``: the factory; None in process)."""
    return [
        Share(
            config=config,
            worker=worker,
            first_block=span.start,
            block_count=len(span),
            cpu_core=core,
            device=device,
            model_dir="",
            factory=spec,
        )
        for worker, span in enumerate(config.worker_blocks())
    ]


def _paired_in_workers(spec: str, config: RunConfig, host: RunHost) -> PairedResult:
    """A factory's blocks over ``config.processes`` fresh workers, one after the other on
    the measuring core, under the host lock, the I/O guard and the contention guard (both
    again between workers), this process pinned away meanwhile. The factory is imported
    and called here first, so a bad one is refused before any worker starts. With
    ``counts``, valgrind is checked first and the forms counted once every worker has
    ended."""
    if config.counts:
        check_counts()
    loaded = load_factory(spec)
    for note in config.design.notes(keyword_spelling):  # a derived processes, once checked
        _stderr(f"paired_benchmark: {note}")
    env = worker_environment(worker_paths(loaded))
    del loaded  # what the factory built here is not needed: every worker builds its own
    dev = resolve_device(config.device)
    core = resolve_cpu_core(config.cpu_core)
    collector = _PairedCollector(_stderr)
    allow_busy = config.allow_busy
    with host.lock():
        affinity = host.allowed_cores()
        host.quiet_io(allow_busy=allow_busy, log=_stderr)
        host.contention(core, allow_busy=allow_busy, candidates=affinity)
        with stop_requests() as stop, host.pinned_away(core, affinity) as parent:
            for share in _factory_shares(spec, config, core, str(dev)):
                stop.check()
                if share.worker:
                    window = guard_window_s(RECHECK_WINDOW_S)
                    host.quiet_io(allow_busy=allow_busy, log=_stderr, window_s=window)
                    host.contention(
                        core, allow_busy=allow_busy, candidates=affinity, window_s=window
                    )
                host.run_worker(share, collector, stop, _stderr, spawning=parent.spawning, env=env)
        result = collector.result(config)
        if not config.counts:
            return result
        share = _factory_shares(spec, config, core, str(dev))[0]
        try:
            counted = host.count_calls(share, measured_device=dev.type, log=_stderr, env=env)
        except CountError as exc:
            _stderr(f"paired_benchmark: warning: {exc}; the result keeps its timing, no counts")
            counted = Counts(metadata={"tool": "callgrind", "error": str(exc)})
    work = {
        variant: {**row, **counted.row_fields(FACTORY_CASE, FACTORY_TOKENS, variant)}
        for variant, row in (result.work or {}).items()
    }
    return dataclasses.replace(result, work=work or None, counts=counted.metadata)
