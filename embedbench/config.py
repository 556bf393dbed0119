"""RunConfig: every run parameter, its default, coercion and validation.

The CLI, the Python API and the notebooks all build a ``RunConfig``; papermill
passes parameters as literals or strings, so every field accepts a string form
too (``"1172"``, ``"[512, 1172]"``, ``"512 1172"``, ``"true"``).
"""

from __future__ import annotations

import ast
import dataclasses
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from embedbench.cases import CASES, MIN_TOKENS
from embedbench.errors import ConfigError
from embedbench.windows import DEFAULT_WINDOW, MEASURABLE

DEFAULT_BASELINE_REF = "01a2f93256975c7ff9565c5414b0fe0225bc4765"
WORKTREE = "WORKTREE"
TARGETS = ("reference", "vllm-omni")
DEVICES = ("auto", "cpu", "cuda")
# The language model the thinker shim looks text up through (issue 11): "flat" is the PR
# script's one-level shim, "production" the served Qwen2ForCausalLM -> Qwen2Model chain.
LM_SHIMS = ("flat", "production")
DEFAULT_RESULTS_ROOT = "embedbench-results"
# Worker processes per run (issue 10): chosen from the between-run measurements in
# docs/PERFORMANCE.md, the fewest whose interval predicts a rerun on the CI machine.
DEFAULT_PROCESSES = 5


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
    """A list from a scalar, a sequence, or a string like '[512, 1172]' / '512 1172'."""
    if isinstance(value, str):
        parsed = _parse_literal(value)
        if isinstance(parsed, str):
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


@dataclass(frozen=True)
class RunConfig:
    """Every parameter of a run; build with keyword arguments (strings are coerced)."""

    model: str | None = None
    target: str = "reference"
    repo: str | None = None
    baseline_ref: str = DEFAULT_BASELINE_REF
    candidate_ref: str = WORKTREE
    cpu_core: int | None = None
    lengths: tuple[int, ...] = (1172,)
    cases: tuple[str, ...] = CASES
    warmup: int = 50
    blocks: int = 20
    iterations: int = 20
    device: str = "auto"
    seed: int = 0
    output_dir: str | None = None
    overwrite: bool = False
    allow_busy: bool = False
    aa_check: bool = False
    processes: int = DEFAULT_PROCESSES
    timing_window: str = DEFAULT_WINDOW
    # flat: embed_input_ids -> embed_tokens (the PR's); production: the served call depth
    lm_shim: str = "flat"
    extra: dict[str, Any] = field(default_factory=dict, compare=False)

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
        set_(self, "blocks", parse_int("blocks", self.blocks, minimum=2))
        set_(self, "processes", parse_int("processes", self.processes, minimum=1))
        self._check_design()
        set_(self, "iterations", parse_int("iterations", self.iterations, minimum=1))
        device = str(self.device).strip().lower()
        if device not in DEVICES:
            raise ConfigError(f"unknown device {device!r}; choose from {', '.join(DEVICES)}")
        set_(self, "device", device)
        set_(self, "lm_shim", self._coerce_choice("lm_shim", self.lm_shim, LM_SHIMS))
        set_(self, "seed", parse_int("seed", self.seed))
        set_(self, "overwrite", _as_bool("overwrite", self.overwrite))
        set_(self, "allow_busy", _as_bool("allow_busy", self.allow_busy))
        set_(self, "aa_check", _as_bool("aa_check", self.aa_check))
        window = str(self.timing_window).strip().lower()
        if window not in MEASURABLE:
            raise ConfigError(
                f"unknown timing_window {window!r}; choose from {', '.join(MEASURABLE)}"
            )
        set_(self, "timing_window", window)

    def _check_design(self) -> None:
        """Every worker runs as many baseline-first as fixed-first blocks."""
        if self.blocks % 2:
            raise ConfigError(
                f"blocks must be even, so that half the blocks run the baseline first, got "
                f"{self.blocks}; use {self.blocks - 1} or {self.blocks + 1}"
            )
        pairs = self.blocks // 2
        if self.processes > pairs:
            raise ConfigError(
                f"processes ({self.processes}) must be at most blocks / 2 ({pairs}), so that "
                f"every worker runs a block in each order; pass --processes {pairs} "
                f"(notebook: processes={pairs}) or --blocks {2 * self.processes}"
            )

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
        items = parse_list("lengths", value)
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
        items = [str(item).strip() for item in parse_list("cases", value)]
        if not items:
            raise ConfigError(f"cases must name at least one of {', '.join(CASES)}")
        for item in items:
            if item not in CASES:
                raise ConfigError(f"unknown case {item!r}; choose from {', '.join(CASES)}")
        if len(set(items)) != len(items):
            raise ConfigError(f"cases has duplicates: {items}; list each case once")
        return tuple(items)

    def replace(self, **changes: Any) -> RunConfig:
        """A copy with some fields changed (and validated again)."""
        return dataclasses.replace(self, **changes)

    def to_json(self) -> dict[str, Any]:
        """The parameters as plain JSON values."""
        data = dataclasses.asdict(self)
        data.pop("extra")
        data["lengths"] = list(self.lengths)
        data["cases"] = list(self.cases)
        return data

    @classmethod
    def from_mapping(cls, params: dict[str, Any]) -> RunConfig:
        """Build from a dict (e.g. notebook globals); unknown keys are refused."""
        names = {f.name for f in dataclasses.fields(cls)} - {"extra"}
        unknown = sorted(set(params) - names)
        if unknown:
            known = ", ".join(sorted(names))
            raise ConfigError(f"unknown parameter {unknown[0]!r}; known: {known}")
        return cls(**params)


def default_output_dir(now: str) -> Path:
    """A fresh directory name under ./embedbench-results for a run started at ``now``."""
    return Path(os.getcwd()) / DEFAULT_RESULTS_ROOT / now
