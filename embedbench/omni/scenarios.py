"""The six benchmark inputs: token ids, CPU masks and tagged multimodal rows.

A scenario is built once per (case, length) and reused for every call of both
variants, so the two variants always see identical inputs. Nothing here times
anything; :func:`call_variant` is the one place that binds a scenario to a wrapper
call, so validation and timing call the wrappers the same way.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

# The case names, labels and MIN_TOKENS live in the torch-free embedbench.cases (the
# report side needs them); importable from here as before.
from embedbench.cases import CASE_LABELS as CASE_LABELS
from embedbench.cases import CASES as CASES
from embedbench.cases import MIN_TOKENS as MIN_TOKENS
from embedbench.errors import ConfigError

__all__ = [
    "CASES",
    "CASE_LABELS",
    "MIN_TOKENS",
    "MODALITIES",
    "PLACEHOLDER_START",
    "SEED_BASE",
    "SEPARATOR_TOKENS",
    "TEXT_ID_HIGH",
    "TEXT_ID_LOW",
    "VISION",
    "PlaceholderRun",
    "Scenario",
    "build_scenario",
    "call_variant",
    "deepstack_fill_value",
    "fill_value",
    "placeholder_runs",
    "placement_problems",
    "placements",
]

# First placeholder position; the text before it stands in for the chat prefix.
PLACEHOLDER_START = 44
# Text tokens between two non-interleaved placeholder runs.
SEPARATOR_TOKENS = 2
# Random text ids are drawn from [TEXT_ID_LOW, TEXT_ID_HIGH).
TEXT_ID_LOW = 2
TEXT_ID_HIGH = 10000
# The generator seed is SEED_BASE + length (issue #7451).
SEED_BASE = 7451

MODALITIES: tuple[str, ...] = ("audio", "image", "video")
# The modalities whose embeddings carry DeepStack levels (Qwen3-Omni's vision encoder).
VISION: frozenset[str] = frozenset({"image", "video"})


# Distinct within a case and exactly representable in bfloat16 (and in every float
# dtype), so a row written to the wrong modality's positions shows up.
def fill_value(index: int) -> float:
    """The fill of the ``index``-th multimodal embedding (first-appearance order): index + 1,
    as the PR script fills them (1, 2, 3, ...)."""
    return float(index + 1)


def deepstack_fill_value(index: int, level: int, levels: int) -> float:
    """The fill of DeepStack level ``level`` (0-based, of ``levels``) of the ``index``-th
    embedding: negative, so never a main-scale value, and a distinct binary fraction per
    level (``-(index + 1) - (level + 1) / 4`` for three levels), exact in bfloat16; so a
    level written to the wrong place, or the wrong level, shows up."""
    step = 2.0 ** -max(1, levels.bit_length())
    return -float(index + 1) - (level + 1) * step


# (modality, count) per run, in sequence order. Non-interleaved runs are separated
# by SEPARATOR_TOKENS text tokens; the interleaved runs are contiguous.
_LAYOUTS: dict[str, tuple[tuple[str, int], ...]] = {
    "text": (),
    "audio": (("audio", 100),),
    "image": (("image", 16),),
    "video": (("video", 128),),
    "mixed": (("audio", 100), ("image", 16), ("video", 128)),
    "interleaved": (("video", 64), ("audio", 50), ("video", 64), ("audio", 50)),
}
_CONTIGUOUS: frozenset[str] = frozenset({"interleaved"})


@dataclass(frozen=True)
class PlaceholderRun:
    """``count`` placeholder tokens of one modality starting at position ``start``."""

    modality: str
    start: int
    count: int

    @property
    def stop(self) -> int:
        return self.start + self.count


@dataclass
class Scenario:
    """The inputs of one (case, length): what both variants are called with."""

    case: str
    label: str
    tokens: int
    input_ids: torch.Tensor
    is_multimodal: torch.Tensor | None
    multimodal_embeddings: list[torch.Tensor] | None
    runs: tuple[PlaceholderRun, ...]
    # DeepStack levels of the vision embeddings (Qwen3-Omni: 3; 0: none, Qwen2.5-Omni).
    deepstack_levels: int = 0

    @property
    def modalities(self) -> tuple[str, ...]:
        """Modalities in first-appearance order (the order of the embedding list)."""
        return _first_appearance(self.runs)


def _check_case(case: str) -> str:
    if case not in CASES:
        raise ConfigError(f"unknown case {case!r}; choose from {', '.join(CASES)}")
    return case


def _check_tokens(tokens: Any) -> int:
    try:
        if isinstance(tokens, bool):
            raise TypeError
        value = operator.index(tokens)
    except TypeError:
        raise ConfigError(f"tokens must be an integer, got {tokens!r}") from None
    if value < MIN_TOKENS:
        raise ConfigError(f"tokens must be at least {MIN_TOKENS} (got {value})")
    return value


def _first_appearance(runs: tuple[PlaceholderRun, ...]) -> tuple[str, ...]:
    seen: list[str] = []
    for run in runs:
        if run.modality not in seen:
            seen.append(run.modality)
    return tuple(seen)


def placeholder_runs(case: str) -> tuple[PlaceholderRun, ...]:
    """The placeholder runs of ``case`` in sequence order."""
    _check_case(case)
    gap = 0 if case in _CONTIGUOUS else SEPARATOR_TOKENS
    runs: list[PlaceholderRun] = []
    position = PLACEHOLDER_START
    for modality, count in _LAYOUTS[case]:
        runs.append(PlaceholderRun(modality, position, count))
        position += count + gap
    return tuple(runs)


def _token_id_map(token_ids: Any) -> dict[str, int]:
    ids: dict[str, int] = {}
    for modality in MODALITIES:
        name = f"{modality}_token_id"
        value = getattr(token_ids, name, None)
        if value is None or isinstance(value, bool):
            raise ConfigError(f"token_ids has no integer {name}")
        try:
            ids[modality] = operator.index(value)
        except TypeError:
            raise ConfigError(f"token_ids.{name} must be an integer, got {value!r}") from None
    if len(set(ids.values())) != len(ids):
        raise ConfigError(f"audio, image and video token ids must differ, got {ids}")
    return ids


def build_scenario(
    case: str,
    tokens: int,
    *,
    token_ids: Any,
    hidden_size: int,
    device: str | torch.device = "cpu",
    dtype: torch.dtype = torch.bfloat16,
    tag: Callable[[torch.Tensor, str], torch.Tensor],
    deepstack_levels: int = 0,
) -> Scenario:
    """Build the inputs of one case at one length.

    ``token_ids`` is any object with ``audio_token_id``, ``image_token_id`` and
    ``video_token_id``. Token ids are int32 on ``device``; the mask is a bool tensor
    on the CPU (as in the original: a CPU mask spares the merge a device sync);
    the multimodal embeddings are one ``(rows, hidden_size)`` tensor per modality
    in first-appearance order, on ``device``, the ``i``-th filled with ``fill_value(i)``
    (i + 1, as the PR script) and passed through ``tag(tensor, modality)``.

    With ``deepstack_levels`` k > 0 (Qwen3-Omni), image and video embeddings carry the
    DeepStack width, ``(k + 1) * hidden_size`` features: the main scale (filled as
    above) followed by k levels of ``hidden_size`` each (``deepstack_fill_value``).
    Audio embeddings keep ``hidden_size``.
    """
    _check_case(case)
    tokens = _check_tokens(tokens)
    if isinstance(hidden_size, bool) or not isinstance(hidden_size, int) or hidden_size < 1:
        raise ConfigError(f"hidden_size must be a positive integer, got {hidden_size!r}")
    if (
        isinstance(deepstack_levels, bool)
        or not isinstance(deepstack_levels, int)
        or deepstack_levels < 0
    ):
        raise ConfigError(f"deepstack_levels must be an integer >= 0, got {deepstack_levels!r}")
    runs = placeholder_runs(case)

    generator = torch.Generator().manual_seed(SEED_BASE + tokens)
    ids = torch.randint(TEXT_ID_LOW, TEXT_ID_HIGH, (tokens,), generator=generator)

    is_multimodal: torch.Tensor | None = None
    embeddings: list[torch.Tensor] | None = None
    if runs:
        id_of = _token_id_map(token_ids)
        is_multimodal = torch.zeros(tokens, dtype=torch.bool)
        rows: dict[str, int] = {}
        for run in runs:
            ids[run.start : run.stop] = id_of[run.modality]
            is_multimodal[run.start : run.stop] = True
            rows[run.modality] = rows.get(run.modality, 0) + run.count

        def rows_of(index: int, modality: str) -> torch.Tensor:
            levels = deepstack_levels if modality in VISION else 0
            fills = [fill_value(index)] + [
                deepstack_fill_value(index, level, levels) for level in range(levels)
            ]
            width = (levels + 1) * hidden_size
            embedding = torch.empty((rows[modality], width), dtype=dtype, device=device)
            for part, fill in enumerate(fills):
                embedding[:, part * hidden_size : (part + 1) * hidden_size] = fill
            return tag(embedding, modality)

        embeddings = [rows_of(i, m) for i, m in enumerate(_first_appearance(runs))]
    return Scenario(
        case=case,
        label=CASE_LABELS[case],
        tokens=tokens,
        input_ids=ids.to(dtype=torch.int32).to(device),
        is_multimodal=is_multimodal,
        multimodal_embeddings=embeddings,
        runs=runs,
        deepstack_levels=deepstack_levels,
    )


def _where(tensor: torch.Tensor) -> str:
    return f"{str(tensor.dtype).removeprefix('torch.')} on {tensor.device.type}"


def placements(scenario: Scenario) -> dict[str, str | None]:
    """Where the inputs live, e.g. ``{"input_ids": "int32 on cuda", ...}`` (None: absent)."""
    rows = scenario.multimodal_embeddings or []
    return {
        "input_ids": _where(scenario.input_ids),
        "is_multimodal": None if scenario.is_multimodal is None else _where(scenario.is_multimodal),
        "multimodal_embeddings": ", ".join(sorted({_where(r) for r in rows})) or None,
    }


def placement_problems(scenario: Scenario, device: torch.device) -> list[str]:
    """What differs from the PR's placements: int32 ids and the rows on ``device``, the
    bool mask on the CPU (a CPU mask spares the merge a device sync)."""
    problems = []
    ids = scenario.input_ids
    if ids.dtype != torch.int32 or ids.device.type != device.type:
        problems.append(f"input_ids are {_where(ids)}, expected int32 on {device.type}")
    mask = scenario.is_multimodal
    if mask is not None and (mask.dtype != torch.bool or mask.device.type != "cpu"):
        problems.append(f"is_multimodal is {_where(mask)}, expected bool on cpu")
    for row in scenario.multimodal_embeddings or []:
        if row.device.type != device.type:
            problems.append(f"a multimodal embedding is on {row.device.type}, not {device.type}")
            break
    return problems


def call_variant(fn: Callable[..., torch.Tensor], scenario: Scenario) -> torch.Tensor:
    """Call a wrapper variant on a scenario: ``fn(ids, embeddings, is_multimodal=mask)``.

    For the text case both are None, which both wrapper forms delegate to the
    parent's single text lookup.

    With DeepStack (Qwen3-Omni) each call gets a fresh list of the same tensors: that
    wrapper replaces each vision entry of the list by its main-scale view, in place, so
    a reused list would reach the next call already split (the engine builds a new list
    per step). Both variants pay the same copy.
    """
    embeddings = scenario.multimodal_embeddings
    if scenario.deepstack_levels and embeddings is not None:
        embeddings = list(embeddings)
    return fn(scenario.input_ids, embeddings, is_multimodal=scenario.is_multimodal)
