"""RunConfig: every run parameter, its default, coercion and validation.

The CLI, the Python API and the notebooks all build a ``RunConfig``; papermill
passes parameters as literals or strings, so every field accepts a string form
too (``"1172"``, ``"[512, 1172]"``, ``"512 1172"``, ``"true"``).
"""

from __future__ import annotations

import ast
import dataclasses
import math
import os
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from embedbench.cases import CASE_LABELS, CASES, MIN_TOKENS
from embedbench.errors import ConfigError
from embedbench.harness.design import DEFAULT_BLOCKS, DEFAULT_PROCESSES, Design, resolve_design
from embedbench.harness.windows import DEFAULT_WINDOW, MEASURABLE, PR, TIGHT
from embedbench.omni import families

__all__ = [
    "DEFAULT_BASELINE_REF",
    "DEFAULT_RESULTS_ROOT",
    "DEVICES",
    "ENTRY_API",
    "ENTRY_CLI",
    "ENTRY_NOTEBOOK",
    "ENTRY_POINTS",
    "FAMILY_CHOICES",
    "LM_SHIMS",
    "SMALL_DESIGN_DF",
    "TARGETS",
    "WORKTREE",
    "CompareConfig",
    "ReportConfig",
    "RunConfig",
    "cli_flag",
    "current_entry_point",
    "default_output_dir",
    "entry_point",
    "parse_float",
    "parse_int",
    "parse_list",
    "parse_max_slowdown",
]

DEFAULT_BASELINE_REF = "01a2f93256975c7ff9565c5414b0fe0225bc4765"
WORKTREE = "WORKTREE"
TARGETS = ("reference", "vllm-omni")
DEVICES = ("auto", "cpu", "cuda")
# The language model the thinker shim looks text up through: "flat" is the PR
# script's one-level shim, "production" the served Qwen2ForCausalLM -> Qwen2Model chain.
LM_SHIMS = ("flat", "production")
# The thinker family: auto takes it from the checkpoint's config.json
# (model_type); without --model, auto is the embedded default's family. The families
# registered when embedbench is imported (one registered later is accepted too).
FAMILY_CHOICES = (families.AUTO_FAMILY, *families.names())
DEFAULT_RESULTS_ROOT = "embedbench-results"
# How a run was started, recorded as metadata.json's ``entry_point`` (docs/format.md):
# the PR comment's reproducing command is that entry point's (docs/usage.md).
ENTRY_CLI = "cli"
ENTRY_NOTEBOOK = "notebook"
ENTRY_API = "api"
ENTRY_POINTS = (ENTRY_CLI, ENTRY_NOTEBOOK, ENTRY_API)
_ENTRY_POINT: ContextVar[str] = ContextVar("embedbench_entry_point", default=ENTRY_API)
# A design with this many degrees of freedom or fewer between its workers (3 workers) gets
# a line after its first worker saying the smallest reduction it can call.
SMALL_DESIGN_DF = 2


def _parse_literal(text: str) -> Any:
    """A Python/JSON literal from a string, or the stripped string itself."""
    try:
        return ast.literal_eval(text.strip())
    except (ValueError, SyntaxError):
        return text.strip()


def parse_int(name: str, value: Any, *, minimum: int | None = None) -> int:
    """An integer from an int or its string form; ConfigError otherwise."""
    if isinstance(value, str):
        value = _parse_literal(value)
    if isinstance(value, bool) or not isinstance(value, int):
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        else:
            raise ConfigError(f"{name} must be an integer, got {value!r}")
    if minimum is not None and value < minimum:
        raise ConfigError(f"{name} must be >= {minimum}, got {value}")
    return value


def parse_float(name: str, value: Any, *, minimum: float | None = None) -> float:
    """A float from a number or its string form; ConfigError otherwise."""
    if isinstance(value, str):
        value = _parse_literal(value)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigError(f"{name} must be a number, got {value!r}")
    if minimum is not None and value < minimum:
        raise ConfigError(f"{name} must be >= {minimum}, got {value}")
    return float(value)


def _as_bool(name: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in {"true", "1", "yes", "on"}:
        return True
    if isinstance(value, str) and value.strip().lower() in {"false", "0", "no", "off", ""}:
        return False
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    raise ConfigError(f"{name} must be true or false, got {value!r}")


def parse_list(name: str, value: Any) -> list[Any]:
    """A list from a scalar, a sequence, or a string like '[512, 1172]', '512 1172',
    '512,1172' or '[text, audio]'."""
    if isinstance(value, str):
        parsed = _parse_literal(value)
        if isinstance(parsed, str):
            if parsed.startswith("[") and parsed.endswith("]"):  # YAML-like: [text, audio]
                parsed = parsed[1:-1]
            parts = parsed.replace(",", " ").split()
            parsed = [_parse_literal(p) for p in parts]
        value = parsed
    if isinstance(value, (list, tuple)):
        return list(value)
    if isinstance(value, Iterable) and not isinstance(value, (str, bytes, dict)):
        return list(value)
    return [value]


def _optional_str(value: Any) -> str | None:
    if value is None:
        return None
    text = str(value).strip()
    return text or None


def _param(default: Any, help: str, **spelling: str) -> Any:
    """A parameter field: its default and one-line help, shared by the CLI (``--help``)
    and the notebooks (the parameters cell, ``papermill --help-notebook``).

    ``spelling`` overrides how the CLI spells it: ``cli`` the flag (default: the name
    with dashes, ``--cpu-core``), ``metavar`` argparse's. The help must not contain "=",
    or papermill cannot parse the notebook's parameter line.
    """
    if "=" in help:
        raise ValueError(f"parameter help must not contain '=': {help!r}")
    return field(default=default, metadata={"help": help, **spelling})


def cli_flag(param: dataclasses.Field) -> str:
    """The CLI flag of a parameter field: ``cpu_core`` -> ``--cpu-core``, unless it says."""
    return param.metadata.get("cli") or "--" + param.name.replace("_", "-")


def _items(name: str, value: Any, whole: Callable[[str], bool] = lambda _text: False) -> list:
    """Like ``parse_list``, but every string inside is split the same way, so ``--lengths
    512,1172`` (``["512,1172"]``) and ``["[512, 1172]"]`` read as two items; a string that
    ``whole`` accepts stays one item."""
    if isinstance(value, str) and whole(value):
        return [value]
    if isinstance(value, (list, tuple)):
        return [item for part in value for item in _items(name, part, whole)]
    parsed = parse_list(name, value)
    if len(parsed) == 1 and parsed[0] == value:
        return parsed
    return [item for part in parsed for item in _items(name, part, whole)]


def _case_key(text: str) -> str:
    return " ".join(text.split()).casefold()


# Case names and report labels ("Text", "Audio + image + video"), any letter case.
_CASE_NAMES = {_case_key(n): n for n in CASES} | {_case_key(v): k for k, v in CASE_LABELS.items()}


@dataclass(frozen=True)
class RunConfig:
    """Every parameter of a run; build with keyword arguments (strings are coerced)."""

    model: str | None = _param(None, "checkpoint dir; unset: the embedded synthetic default")
    target: str = _param("reference", "reference (built-in replica) or vllm-omni (needs repo)")
    repo: str | None = _param(None, "vLLM-Omni git checkout for target vllm-omni")
    baseline_ref: str = _param(DEFAULT_BASELINE_REF, "baseline git ref")
    candidate_ref: str = _param(WORKTREE, "candidate git ref, or WORKTREE (the checkout as is)")
    cpu_core: int | None = _param(None, "core to pin; unset: the lowest allowed core")
    lengths: tuple[int, ...] = _param((1172,), "token counts, each at least 300")
    cases: tuple[str, ...] = _param(CASES, "to measure (names or report labels, any case)")
    warmup: int = _param(50, "warm-up calls per variant")
    blocks: int | None = _param(
        None, f"paired blocks; unset: {DEFAULT_BLOCKS}, or twice processes when that is more"
    )
    iterations: int = _param(20, "calls per variant per block")
    device: str = _param("auto", "auto, cpu or cuda")
    seed: int = _param(0, "seed of the block order")
    output_dir: str | None = _param(None, "results dir; unset: ./embedbench-results/UTC-time")
    overwrite: bool = _param(False, "replace results already in the output dir")
    allow_busy: bool = _param(False, "measure even on a busy core (results are labelled)")
    aa_check: bool = _param(
        False, "also time each baseline against itself (A/A noise floor)", cli="--aa"
    )
    counts: bool = _param(
        False,
        "after the timing, also count instructions and simulated cache misses per call "
        "under valgrind (callgrind)",
    )
    processes: int | None = _param(
        None,
        "fresh worker processes the blocks are spread over; 1: one process; "
        f"unset: {DEFAULT_PROCESSES}, or blocks / 2 when that is fewer",
    )
    timing_window: str = _param(
        DEFAULT_WINDOW,
        f"{PR} (the PR script's clock order) or {TIGHT} (reads outside the wall window)",
    )
    lm_shim: str = _param(
        "flat",
        "flat (the PR script's lookup) or production (served call depth)",
        metavar="{" + ",".join(LM_SHIMS) + "}",
    )
    family: str = _param(
        families.AUTO_FAMILY,
        f"auto (the checkpoint's model_type; no model: {families.default().name}), "
        f"{' or '.join(families.names())}; a family the checkpoint contradicts is refused",
        metavar="{" + ",".join(FAMILY_CHOICES) + "}",
    )

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        set_(self, "model", _optional_str(self.model))
        set_(self, "repo", _optional_str(self.repo))
        set_(self, "output_dir", _optional_str(self.output_dir))
        target = str(self.target).strip()
        if target not in TARGETS:
            raise ConfigError(f"unknown target {target!r}; choose from {', '.join(TARGETS)}")
        set_(self, "target", target)
        for name in ("baseline_ref", "candidate_ref"):
            ref = _optional_str(getattr(self, name))
            if ref is None:
                raise ConfigError(f"{name} must not be empty")
            if ref.startswith("-"):
                raise ConfigError(f"{name} {ref!r} must not start with '-'")
            set_(self, name, ref)
        if self.cpu_core is not None and _optional_str(self.cpu_core) is not None:
            set_(self, "cpu_core", parse_int("cpu_core", self.cpu_core, minimum=0))
        else:
            set_(self, "cpu_core", None)
        set_(self, "lengths", self._coerce_lengths(self.lengths))
        set_(self, "cases", self._coerce_cases(self.cases))
        set_(self, "warmup", parse_int("warmup", self.warmup, minimum=0))
        design = resolve_design(
            self._optional_int("blocks", self.blocks, minimum=2),
            self._optional_int("processes", self.processes, minimum=1),
        )
        set_(self, "blocks", design.blocks)
        set_(self, "processes", design.processes)
        set_(self, "_design", design)
        set_(self, "iterations", parse_int("iterations", self.iterations, minimum=1))
        set_(self, "device", self._coerce_choice("device", self.device, DEVICES))
        set_(self, "lm_shim", self._coerce_choice("lm_shim", self.lm_shim, LM_SHIMS))
        choices = (families.AUTO_FAMILY, *families.names())
        set_(self, "family", self._coerce_choice("family", self.family, choices))
        set_(self, "seed", parse_int("seed", self.seed))
        set_(self, "overwrite", _as_bool("overwrite", self.overwrite))
        set_(self, "allow_busy", _as_bool("allow_busy", self.allow_busy))
        set_(self, "aa_check", _as_bool("aa_check", self.aa_check))
        set_(self, "counts", _as_bool("counts", self.counts))
        set_(
            self,
            "timing_window",
            self._coerce_choice("timing_window", self.timing_window, MEASURABLE),
        )

    @staticmethod
    def _optional_int(name: str, value: Any, *, minimum: int) -> int | None:
        """None for an unset value (None or blank), else ``parse_int``'s integer."""
        if _optional_str(value) is None:
            return None
        return parse_int(name, value, minimum=minimum)

    @property
    def design(self) -> Design:
        """The blocks and processes, and whether each was given or derived from the other
        (``dataclasses.replace`` passes both on, so they count as given there)."""
        return self._design  # type: ignore[attr-defined]  # set in __post_init__

    @property
    def processes_source(self) -> str:
        """``given``, or ``derived`` (unset: the most, up to 5, that the blocks allow)."""
        return self.design.processes_source

    @property
    def blocks_source(self) -> str:
        """``given``, or ``derived`` (unset: 20, or what the given processes need)."""
        return self.design.blocks_source

    def worker_blocks(self) -> list[range]:
        """The block indices of each worker: consecutive, an even count each, as equal as
        the pairs allow (the first workers take one pair more when they do not divide)."""
        share, extra = divmod(self.blocks // 2, self.processes)
        spans, start = [], 0
        for worker in range(self.processes):
            count = 2 * (share + (1 if worker < extra else 0))
            spans.append(range(start, start + count))
            start += count
        return spans

    @staticmethod
    def _coerce_choice(name: str, value: Any, allowed: tuple[str, ...]) -> str:
        """One of ``allowed`` (case and surrounding blanks ignored); ConfigError otherwise."""
        choice = str(value).strip().lower()
        if choice not in allowed:
            raise ConfigError(f"unknown {name} {choice!r}; choose from {', '.join(allowed)}")
        return choice

    @staticmethod
    def _coerce_lengths(value: Any) -> tuple[int, ...]:
        items = _items("lengths", value)
        if not items:
            raise ConfigError("lengths must name at least one token count, e.g. 1172")
        lengths = tuple(parse_int("lengths", item) for item in items)
        short = [n for n in lengths if n < MIN_TOKENS]
        if short:
            raise ConfigError(f"lengths must be >= {MIN_TOKENS} tokens, got {short[0]}")
        if len(set(lengths)) != len(lengths):
            raise ConfigError(f"lengths has duplicates: {list(lengths)}; list each length once")
        return lengths

    @staticmethod
    def _coerce_cases(value: Any) -> tuple[str, ...]:
        # A string that names a case is one item: a label may contain blanks.
        items = _items("cases", value, lambda text: _case_key(text) in _CASE_NAMES)
        if not items:
            raise ConfigError(f"cases must name at least one of {', '.join(CASES)}")
        cases = []
        for item in items:
            case = _CASE_NAMES.get(_case_key(str(item)))
            if case is None:
                raise ConfigError(
                    f"unknown case {str(item).strip()!r}; choose from {', '.join(CASES)}"
                )
            cases.append(case)
        if len(set(cases)) != len(cases):
            raise ConfigError(f"cases has duplicates: {cases}; list each case once")
        return tuple(cases)

    def to_json(self) -> dict[str, Any]:
        """The parameters as plain JSON values."""
        data = dataclasses.asdict(self)
        data["lengths"] = list(self.lengths)
        data["cases"] = list(self.cases)
        return data

    @classmethod
    def from_mapping(cls, params: dict[str, Any]) -> RunConfig:
        """Build from a dict (e.g. notebook globals); unknown keys are refused."""
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(params) - names)
        if unknown:
            known = ", ".join(sorted(names))
            raise ConfigError(f"unknown parameter {unknown[0]!r}; known: {known}")
        return cls(**params)


def parse_max_slowdown(value: Any, name: str = "max_slowdown_pct") -> float:
    """The gate's allowance in percent: a finite number >= 0 (or its string form)."""
    pct = parse_float(name, value, minimum=0)
    if not math.isfinite(pct):
        raise ConfigError(f"{name} must be a finite number >= 0, got {value!r}")
    return pct


@dataclass(frozen=True)
class ReportConfig:
    """The parameters of notebooks/report.ipynb."""

    results_dir: str | None = _param(None, "a run's output dir; unset: the newest run")

    def __post_init__(self) -> None:
        object.__setattr__(self, "results_dir", _optional_str(self.results_dir))


@dataclass(frozen=True)
class CompareConfig:
    """The parameters of notebooks/compare.ipynb, coerced as RunConfig's are: papermill
    passes ``-p include_reference false`` as the string "false"."""

    results_dirs: tuple[str, ...] = _param(
        (), "two or more run output dirs (one with the reference)"
    )
    include_reference: bool = _param(True, "add the PR #7477 H100 reference table")
    max_slowdown_pct: float = _param(0.0, "gate: allowed slowdown in percent (0 or more)")
    allow_mixed_windows: bool = _param(False, "show runs of different timing windows, labelled")

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        dirs = parse_list("results_dirs", [] if self.results_dirs is None else self.results_dirs)
        set_(self, "results_dirs", tuple(str(d).strip() for d in dirs))
        set_(self, "include_reference", _as_bool("include_reference", self.include_reference))
        set_(self, "max_slowdown_pct", parse_max_slowdown(self.max_slowdown_pct))
        allow = _as_bool("allow_mixed_windows", self.allow_mixed_windows)
        set_(self, "allow_mixed_windows", allow)


@contextmanager
def entry_point(kind: str) -> Iterator[None]:
    """Runs started inside this block record ``kind`` (one of ``ENTRY_POINTS``) as their
    entry point: the CLI's ``run`` and run.ipynb wrap their call of ``run`` in it."""
    if kind not in ENTRY_POINTS:
        raise ConfigError(f"unknown entry point {kind!r}; choose from {', '.join(ENTRY_POINTS)}")
    token = _ENTRY_POINT.set(kind)
    try:
        yield
    finally:
        _ENTRY_POINT.reset(token)


def current_entry_point() -> str:
    """The entry point a run started now records: ``api`` outside ``entry_point``."""
    return _ENTRY_POINT.get()


def default_output_dir(now: str) -> Path:
    """A fresh directory name under ./embedbench-results for a run started at ``now``."""
    return Path(os.getcwd()) / DEFAULT_RESULTS_ROOT / now
