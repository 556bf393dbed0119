"""The measurement pipeline: config → checkpoint → scenarios → target → timing → results.

``run`` checks every input before it writes anything, then writes the output
directory as cases finish. ``paired_benchmark`` runs any two zero-argument
callables through the same timing and statistics.
"""

from __future__ import annotations

import functools
import gc
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import torch
from tqdm.auto import tqdm

from embedbench import checkpoint, stats, summary, sysinfo
from embedbench.config import RunConfig, default_output_dir
from embedbench.devices import resolve_device, sync_for
from embedbench.errors import ConfigError
from embedbench.hostlock import host_lock
from embedbench.interrupts import RunInterrupted, stop_requests
from embedbench.isolation import (
    ContentionReading,
    allowed_cores,
    check_contention,
    isolated,
    resolve_cpu_core,
)
from embedbench.results import ResultsWriter, RunResult, check_output_dir
from embedbench.scenarios import build_scenario, call_variant
from embedbench.targets import VARIANTS, Target
from embedbench.targets.reference import build_reference_target
from embedbench.timing import (
    AA_SCOPE,
    METRIC_ORDER,
    MICRO_SCOPE,
    BlockRecord,
    calls_per_pair,
    derive_seed,
    measure_pair,
    measure_timer_floor,
)
from embedbench.validation import validate_scenario

Log = Callable[[str], None]


def _stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _utc_now() -> datetime:
    return datetime.now(timezone.utc)


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
    started: datetime = field(default_factory=_utc_now)


def prepare(config: RunConfig, *, log: Log = _stderr) -> PreparedRun:
    """Check every input (device, core, output dir, repo and refs, checkpoint) without
    writing results."""
    device = resolve_device(config.device)
    core = resolve_cpu_core(config.cpu_core)
    started = _utc_now()
    output_dir = (
        Path(config.output_dir)
        if config.output_dir
        else default_output_dir(started.strftime("%Y%m%dT%H%M%SZ"))
    )
    check_output_dir(output_dir, overwrite=config.overwrite)
    if config.target == "vllm-omni":
        # Repository, refs and the method at each ref, before the checkpoint is read;
        # vLLM itself is imported only when the target is built.
        from embedbench.targets.vllm_omni import check_vllm_omni_source

        check_vllm_omni_source(
            repo=config.repo, baseline_ref=config.baseline_ref, candidate_ref=config.candidate_ref
        )
    if config.model is None:
        model_dir = checkpoint.default_synthetic_checkpoint(progress=log)
    else:
        model_dir = Path(config.model).expanduser()
    facts = checkpoint.read_thinker_facts(model_dir)
    location = checkpoint.locate_embedding(model_dir, facts)
    return PreparedRun(
        config=config,
        device=device,
        cpu_core=core,
        model_dir=model_dir,
        synthetic=checkpoint.is_synthetic(model_dir),
        facts=facts,
        location=location,
        output_dir=output_dir,
        started=started,
    )


def build_target(prepared: PreparedRun, table: torch.Tensor) -> Target:
    """The target named in the config, bound to the loaded table."""
    config = prepared.config
    if config.target == "vllm-omni":
        from embedbench.targets.vllm_omni import build_vllm_omni_target

        return build_vllm_omni_target(
            table,
            prepared.facts,
            repo=config.repo,
            baseline_ref=config.baseline_ref,
            candidate_ref=config.candidate_ref,
            device=prepared.device,
        )
    return build_reference_target(table, prepared.facts)


def _metadata(
    prepared: PreparedRun, target: Target, freq_source: str, contention: ContentionReading
) -> dict[str, Any]:
    config = prepared.config
    vocab, hidden = prepared.location.shape
    refs = target.metadata.get(
        "refs", {"baseline_ref": None, "candidate_ref": None, "checked_out_commit": None}
    )
    versions = sysinfo.versions()
    device_name = sysinfo.device_name(prepared.device)
    return {
        "status": "running",
        "target": target.name,
        "target_info": target.metadata,
        # Filled by targets that read code from git (vllm-omni); None for the replica.
        "refs": refs,
        "candidate_ref": target.metadata.get("candidate_ref"),
        "dirty": target.metadata.get("dirty"),
        "versions": versions,
        "device": prepared.device.type,
        "device_name": device_name,
        "provenance": sysinfo.provenance(
            prepared.cpu_core,
            prepared.device,
            prepared.model_dir,
            prepared.location.shard,
            checkpoint.EMBEDDING_KEY,
        ),
        "cpu_core": prepared.cpu_core,
        "cpu_frequency_source": freq_source,
        "contention": contention.to_json(),
        "contention_checks": [{"before": "run", **contention.to_json()}],
        "busy_core": contention.label,
        "allow_busy": config.allow_busy,
        "aa_check": config.aa_check,
        "seed": config.seed,
        "warmup": config.warmup,
        "blocks": config.blocks,
        "iterations": config.iterations,
        "lengths": list(config.lengths),
        "cases": list(config.cases),
        "model": str(prepared.model_dir),
        "synthetic": prepared.synthetic,
        "embedding": {
            "key": checkpoint.EMBEDDING_KEY,
            "shard": prepared.location.shard.name,
            "shape": [vocab, hidden],
            "dtype": "bfloat16",
        },
        "ids_dtype": "int32",
        "mask_device": "cpu",
        "metric_order": list(METRIC_ORDER),
        "environment": sysinfo.allowed_environment(),
        "config": config.to_json(),
        # The original script's top-level fields, for whoever reads its output.
        "baseline_ref": refs.get("baseline_ref"),
        "checkout": refs.get("checked_out_commit"),
        "torch": versions.get("torch"),
        "vllm": versions.get("vllm"),
        "transformers": versions.get("transformers"),
        "gpu": device_name if prepared.device.type == "cuda" else None,
        "torch_cpu_threads": 1,
        "embedding_shape": [vocab, hidden],
        "dtype": "bfloat16",
        "input_ids_dtype": "int32",
        "start_time": prepared.started.timestamp(),
        "started_at": prepared.started.isoformat(),
        "end_time": None,
    }


@contextmanager
def _progress_bar(total: int, enabled: bool) -> Iterator[Callable[[int], None]]:
    bar = tqdm(total=total, unit="call", desc="embedbench", disable=not enabled, file=sys.stderr)
    try:
        yield bar.update
    finally:
        bar.close()


@dataclass
class _Measurement:
    """What every case of one run shares while it is measured."""

    prepared: PreparedRun
    target: Target
    writer: ResultsWriter
    sync: Callable[[], None]
    read_mhz: Callable[[], float | None]
    advance: Callable[[int], None]
    check_stop: Callable[[], None]
    affinity: list[int]

    def recheck_contention(self, case: str, tokens: int) -> ContentionReading:
        """The guard again before a case (a busy core refuses the rest of the run)."""
        reading = check_contention(
            self.prepared.cpu_core,
            allow_busy=self.prepared.config.allow_busy,
            candidates=self.affinity,
        )
        checks = self.writer.metadata["contention_checks"]
        self.writer.update_metadata(
            contention_checks=[*checks, {"before": f"{case}@{tokens}", **reading.to_json()}],
            busy_core=self.writer.metadata["busy_core"] or reading.label,
        )
        return reading


def calls_per_case(config: RunConfig) -> int:
    """Warm-up and timed calls of one case (twice that with the A/A check)."""
    calls = calls_per_pair(config.warmup, config.blocks, config.iterations)
    return 2 * calls if config.aa_check else calls


def run(config: RunConfig, *, log: Log = _stderr, progress: bool = True) -> RunResult:
    """Measure every case and length of ``config``; write and return the results.

    Refuses (``EmbedbenchError``) before writing anything when an input is bad, when
    another embedbench run holds the host lock, or when the pinned core is busy.
    """
    prepared = prepare(config, log=log)
    with host_lock() as lock:
        affinity = allowed_cores()
        contention = check_contention(
            prepared.cpu_core, allow_busy=config.allow_busy, candidates=affinity
        )
        if contention.label:
            log(f"warning: {contention.label}")
        table = checkpoint.load_embedding_table(prepared.location, device=prepared.device)
        target = build_target(prepared, table)
        freq_source, read_mhz = sysinfo.cpu_frequency_reader(prepared.cpu_core)
        metadata = _metadata(prepared, target, freq_source, contention)
        writer = ResultsWriter(prepared.output_dir, {**metadata, "host_lock": lock.to_json()})
        log(f"writing results to {prepared.output_dir}")
        return _measure_all(prepared, target, writer, read_mhz, affinity, progress)


def _measure_all(
    prepared: PreparedRun,
    target: Target,
    writer: ResultsWriter,
    read_mhz: Callable[[], float | None],
    affinity: list[int],
    progress: bool,
) -> RunResult:
    config = prepared.config
    pairs = [(tokens, case) for tokens in config.lengths for case in config.cases]
    completed: list[str] = []
    try:
        with (
            stop_requests() as stop,
            isolated(prepared.cpu_core) as state,
            _progress_bar(len(pairs) * calls_per_case(config), progress) as advance,
        ):
            sync = sync_for(prepared.device)
            writer.update_metadata(threads=state.to_json())
            floor = measure_timer_floor(device=prepared.device.type, sync=sync, read_mhz=read_mhz)
            writer.add_records([r.to_json() for r in floor])
            session = _Measurement(
                prepared, target, writer, sync, read_mhz, advance, stop.check, affinity
            )
            for index, (tokens, case) in enumerate(pairs):
                if index:
                    session.recheck_contention(case, tokens)
                _measure_case(session, case, tokens)
                completed.append(f"{case}@{tokens}")
                _release_memory(prepared.device)
    except KeyboardInterrupt as exc:  # also RunInterrupted, raised between blocks
        _finish(writer, "interrupted", completed)
        raise RunInterrupted(
            f"interrupted ({exc or 'KeyboardInterrupt'}); the {len(completed)} completed "
            f"case(s) are kept in {prepared.output_dir}"
        ) from exc
    except BaseException as exc:
        _finish(writer, "failed", completed, error=f"{type(exc).__name__}: {exc}")
        raise
    _finish(writer, "complete", completed)
    return RunResult(
        prepared.output_dir, writer.metadata, writer.records, writer.validation, writer.summary
    )


def _finish(writer: ResultsWriter, status: str, completed: list[str], **fields: Any) -> None:
    ended = _utc_now()
    writer.update_metadata(
        status=status,
        completed_cases=completed,
        end_time=ended.timestamp(),
        ended_at=ended.isoformat(),
        **fields,
    )


def _release_memory(device: torch.device) -> None:
    """Free what the finished case left behind (gc stays disabled while timing)."""
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()


def _time_pair(
    session: _Measurement,
    variants: dict[str, Callable[[], Any]],
    case: str,
    tokens: int,
    seed: int,
    scope: str,
) -> list[dict[str, Any]]:
    config = session.prepared.config
    records = measure_pair(
        variants,
        case=case,
        tokens=tokens,
        warmup=config.warmup,
        blocks=config.blocks,
        iterations=config.iterations,
        seed=seed,
        device=session.prepared.device.type,
        sync=session.sync,
        read_mhz=session.read_mhz,
        progress=session.advance,
        check_stop=session.check_stop,
        scope=scope,
    )
    rows = [r.to_json() for r in records]
    session.writer.add_records(rows)
    return rows


def _measure_case(session: _Measurement, case: str, tokens: int) -> None:
    prepared, target, writer = session.prepared, session.target, session.writer
    config = prepared.config
    scenario = build_scenario(
        case,
        tokens,
        token_ids=prepared.facts,
        hidden_size=prepared.location.shape[1],
        device=prepared.device,
        tag=target.tag,
    )
    check = validate_scenario(target, scenario)
    writer.add_validation(check.to_json())
    if not check.ok:
        session.advance(calls_per_case(config))
        writer.add_summary(summary.invalid_row(case, tokens))
        return
    calls = {
        name: functools.partial(call_variant, target.variants[name], scenario) for name in VARIANTS
    }
    seed = derive_seed(config.seed, case, tokens)
    try:
        rows = _time_pair(session, calls, case, tokens, seed, MICRO_SCOPE)
        aa = None
        if config.aa_check:  # the baseline against itself, under both labels
            aa_seed = derive_seed(config.seed, case, tokens, AA_SCOPE)
            same = {"baseline": calls["baseline"], "fixed": calls["baseline"]}
            aa = summary.aa_summary(
                _time_pair(session, same, case, tokens, aa_seed, AA_SCOPE), seed=aa_seed
            )
    except Exception as exc:  # a crash inside a wrapper: record it, go on with the next case
        message = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
        writer.add_summary(
            summary.invalid_row(case, tokens, error=f"crashed while timing: {message}")
        )
        return
    row = summary.summary_row(case, tokens, rows, seed=seed, aa=aa)
    busy = writer.metadata.get("busy_core")
    writer.add_summary({**row, "busy_core": busy} if busy else row)


@dataclass
class PairedResult:
    """The outcome of ``paired_benchmark``."""

    host_us: dict[str, float]
    reduction_pct: float
    reduction_ci95_pct: tuple[float, float]
    verdict: str
    seed: int
    records: list[BlockRecord] = field(repr=False)
    timer_floor: list[BlockRecord] = field(repr=False)
    statistics: stats.PairSummary | None = field(default=None, repr=False)


def paired_benchmark(
    variants: dict[str, Callable[[], Any]],
    *,
    warmup: int,
    blocks: int,
    iterations: int,
    cpu_core: int | None = None,
    seed: int = 0,
    device: str = "cpu",
    allow_busy: bool = False,
) -> PairedResult:
    """Time two zero-argument callables, ``{"baseline": f, "fixed": g}``, like ``run`` does.

    Takes the host lock and refuses a busy core unless ``allow_busy``, as ``run`` does.
    """
    if set(variants) != set(VARIANTS):
        raise ConfigError(f"variants must be exactly {list(VARIANTS)}, got {list(variants)}")
    checked = RunConfig(
        warmup=warmup,
        blocks=blocks,
        iterations=iterations,
        seed=seed,
        device=device,
        cpu_core=cpu_core,
    )
    dev = resolve_device(checked.device)
    core = resolve_cpu_core(checked.cpu_core)
    sync = sync_for(dev)
    _, read_mhz = sysinfo.cpu_frequency_reader(core)
    schedule_seed = derive_seed(checked.seed, "paired_benchmark")
    ordered = {name: variants[name] for name in VARIANTS}
    with host_lock(), isolated(core):
        check_contention(core, allow_busy=allow_busy, candidates=allowed_cores())
        floor = measure_timer_floor(device=dev.type, sync=sync, read_mhz=read_mhz)
        records = measure_pair(
            ordered,
            case="paired",
            tokens=0,
            warmup=checked.warmup,
            blocks=checked.blocks,
            iterations=checked.iterations,
            seed=schedule_seed,
            device=dev.type,
            sync=sync,
            read_mhz=read_mhz,
        )
    host = summary.blocks_by_variant([r.to_json() for r in records], 0)
    pair = stats.summarize_pair(host["baseline"], host["fixed"], seed=schedule_seed)
    return PairedResult(
        pair.host_us,
        pair.reduction_pct,
        pair.reduction_ci95_pct,
        pair.verdict,
        schedule_seed,
        records,
        floor,
        pair,
    )
