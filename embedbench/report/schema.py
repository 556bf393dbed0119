"""JSON Schemas of the output files, and a checker that names the first bad field.

Two formats are accepted: embedbench's own (``metadata.json`` has
``schema_version``) and the original PR script's (the same four files with only
the fields that script writes). The schemas require what the report needs and allow
extra fields, so a newer writer stays readable. ``aa-raw.json`` (the A/A check's
records, embedbench only) is optional and holds ``aa_check`` records alone; so is
``work.json`` (each form's per-call ledger, from version 6 on).

jsonschema is imported only to check: the measuring path runs without it (a bare GPU
image lacks it). There a run records that its files went unchecked
(``check_line``) and readers skip the check; ``first_problem`` (``embedbench
validate``) requires it and says how to get it.
"""

from __future__ import annotations

import sys
from importlib import metadata as importlib_metadata
from types import ModuleType
from typing import TYPE_CHECKING, Any

from embedbench.errors import MissingDependencyError
from embedbench.harness.callgrind import FIGURES as COUNTED_PER_CALL
from embedbench.harness.design import DERIVED, GIVEN
from embedbench.harness.timing import AA_SCOPE

if TYPE_CHECKING:
    import jsonschema

__all__ = [
    "AA_RAW",
    "INSTALL_JSONSCHEMA",
    "ORIGINAL_FORMAT",
    "OWN_REFS",
    "PR_VERSION_KEYS",
    "READABLE_VERSIONS",
    "SCHEMAS",
    "SCHEMA_VERSION",
    "SKIPPED_LINE",
    "WORK",
    "available",
    "check_line",
    "detect_format",
    "first_problem",
]

# 2: worker processes (records carry ``worker``; metadata ``processes`` and ``workers``),
# one interval per row with ``ci_level`` and ``interval_method``.
# 3: each metadata fact once, under the original script's name where it has one
# (baseline_ref, checkout, torch, vllm, transformers, embedding_shape, dtype,
# input_ids_dtype, start_time, end_time); ``refs``, ``versions`` and ``embedding`` keep
# only what it lacks, and there is no ``started_at``/``ended_at``/``candidate_ref``/
# ``ids_dtype``. Versions 1 and 2 stay readable (``compat.upgrade_duplicated``).
# 4: a summary row's ``reduction_pct`` is the estimate of its own interval in both designs
# (one process: the Hodges–Lehmann estimate, no longer the PR's ratio of medians), and
# ``pr_reduction_pct`` holds the PR's 100 × (1 − fixed / baseline) of ``host_us``. Rows of
# versions 1 to 3 are read as version 4 has them (``compat.upgrade_headline``). Also in 4,
# optional: the canary's reads in every record (``canary_us_start``/``_end``, and
# ``canary_device_us_*`` on CUDA), and ``canary``, ``host_probes`` and ``host_stability``
# in metadata; older results lack them and read as "host not observed".
# 5: every run records its ``timing_window``, and A/A records live only in aa-raw.json;
# older directories are read with the legacy window and their A/A records moved out of
# micro-raw.json (``upgrades``, where every version's step lives). Optional in 5: each
# record's ``other_cores_busy`` (the other cores' busy time over the block half, in cores)
# and ``host_stability.neighbour`` (the canary's contrast between busy and idle halves),
# and ``host_stability.neighbour_calls`` (the same over each half's median timed call).
# 6: every run writes work.json, one ledger per case, length and variant of what one call
# does, counted exactly (operators, bytes, syncs, kernels; docs/format.md, "work.json");
# an older directory reads with none (``upgrades``). Optional in 6: metadata's
# ``memory_ceiling`` (the streaming-copy ceiling on the measuring core).
# 7: every work.json row carries each form's instructions and simulated cache misses per
# call (``instructions``, ``d1_misses``, ``ll_misses``, ``est_cycles``), counted under
# valgrind with --counts and null without; metadata's ``counts`` says how they were
# taken. An older row reads with the four null (``upgrades``).
SCHEMA_VERSION = 7
READABLE_VERSIONS = (1, 2, 3, 4, 5, 6, 7)
# What ``refs`` and ``versions`` hold beside the original script's top-level fields.
OWN_REFS = ("baseline_sha", "candidate_ref", "candidate_sha")
PR_VERSION_KEYS = ("torch", "vllm", "transformers")
ORIGINAL_FORMAT = "original"
AA_RAW = "aa-raw.json"
WORK = "work.json"

_NUMBER = {"type": "number"}
_NUMBER_OR_NULL = {"type": ["number", "null"]}
_VARIANT_NUMBERS = {
    "type": "object",
    "required": ["baseline", "fixed"],
    "properties": {"baseline": _NUMBER, "fixed": _NUMBER},
}

_RECORD = {
    "type": "object",
    "required": [
        "device",
        "case",
        "tokens",
        "scope",
        "variant",
        "block",
        "iterations",
        "samples_us",
        "wall_start",
        "wall_end",
        "cpu_mhz_start",
        "cpu_mhz_end",
    ],
    "properties": {
        "case": {"type": "string"},
        "tokens": {"type": "integer", "minimum": 0},
        "scope": {"type": "string"},
        "variant": {"type": "string"},
        "block": {"type": "integer", "minimum": 0},
        "position": {"type": "integer", "minimum": 0},
        "iterations": {"type": "integer", "minimum": 1},
        "samples_us": {
            "type": "array",
            "items": {"type": "array", "minItems": 3, "maxItems": 3, "items": _NUMBER},
        },
        "wall_start": _NUMBER,
        "wall_end": _NUMBER,
        "cpu_mhz_start": _NUMBER_OR_NULL,
        "cpu_mhz_end": _NUMBER_OR_NULL,
        "minor_faults": {"type": ["integer", "null"], "minimum": 0},
        "worker": {"type": "integer", "minimum": 0},
        "gpu_mhz_start": _NUMBER_OR_NULL,
        "gpu_mhz_end": _NUMBER_OR_NULL,
        "canary_us_start": _NUMBER_OR_NULL,
        "canary_us_end": _NUMBER_OR_NULL,
        "canary_device_us_start": _NUMBER_OR_NULL,
        "canary_device_us_end": _NUMBER_OR_NULL,
        "other_cores_busy": {"type": ["number", "null"], "minimum": 0},
    },
}

_AA_RECORD = {**_RECORD, "properties": {**_RECORD["properties"], "scope": {"const": AA_SCOPE}}}

_VALIDATION_ROW = {
    "type": "object",
    "required": ["case", "tokens", "calls"],
    "properties": {
        "case": {"type": "string"},
        "tokens": {"type": "integer"},
        # Written by the original and by newer embedbench runs; older rows lack it.
        "device": {"type": "string"},
        "calls": {"type": "object", "additionalProperties": {"type": "integer"}},
        "torch_equal": {"type": "boolean"},
        "same_input_wrapper_torch_equal": {"type": "boolean"},
        "ok": {"type": "boolean"},
    },
}

_SUMMARY_ROW = {
    "type": "object",
    "required": ["case", "tokens", "host_us", "reduction_pct"],
    "properties": {
        "case": {"type": "string"},
        "tokens": {"type": "integer"},
        "host_us": {"oneOf": [_VARIANT_NUMBERS, {"type": "null"}]},
        "reduction_pct": _NUMBER_OR_NULL,
        # Schema 4 on; older rows lack it (``compat.upgrade_headline`` fills it in).
        "pr_reduction_pct": _NUMBER_OR_NULL,
        "reduction_ci95_pct": {
            "oneOf": [
                {"type": "array", "minItems": 2, "maxItems": 2, "items": _NUMBER},
                {"type": "null"},
            ]
        },
        "verdict": {"type": "string"},
        "valid": {"type": "boolean"},
    },
}

_COUNT = {"type": "integer", "minimum": 0}
_WORK_ROW = {
    "type": "object",
    "required": [
        "case",
        "tokens",
        "variant",
        "ops",
        "bytes_read",
        "bytes_written",
        "bytes_allocated",
        "syncs",
        "kernels",
    ],
    "properties": {
        "case": {"type": "string"},
        "tokens": {"type": "integer", "minimum": 0},
        "variant": {"type": "string"},
        "ops": {"type": "object", "additionalProperties": _COUNT},
        "bytes_read": _COUNT,
        "bytes_written": _COUNT,
        "bytes_allocated": _COUNT,
        "syncs": _COUNT,
        "kernels": {"type": ["integer", "null"], "minimum": 0},
        "workers_agree": {"type": "boolean"},
        # Schema 7 on, null where not counted (--counts); older rows lack them.
        **{name: {"type": ["integer", "null"], "minimum": 0} for name in COUNTED_PER_CALL},
    },
}

_METADATA_COMMON = {
    "warmup": {"type": "integer", "minimum": 0},
    "blocks": {"type": "integer", "minimum": 1},
    "iterations": {"type": "integer", "minimum": 1},
    "lengths": {"type": "array", "items": {"type": "integer"}},
    "cpu_core": {"type": "integer", "minimum": 0},
    "metric_order": {"type": "array", "minItems": 3, "items": {"type": "string"}},
}

SCHEMAS: dict[str, dict[str, dict[str, Any]]] = {
    "embedbench": {
        "metadata.json": {
            "type": "object",
            "required": [
                "schema_version",
                "status",
                "warmup",
                "blocks",
                "iterations",
                "lengths",
                "cpu_core",
                "metric_order",
                "target",
                "device",
            ],
            "properties": {
                **_METADATA_COMMON,
                "schema_version": {"type": "integer", "enum": list(READABLE_VERSIONS)},
                "status": {"enum": ["running", "complete", "interrupted", "failed"]},
                # The I/O guard's reading (ioguard.IoReading.to_json()); optional, so
                # results written before the guard existed stay valid at this version.
                "io_guard": {"type": ["object", "null"]},
                # The canary's host-stability reading (stability.HostStability.to_json());
                # optional, as io_guard: older results lack it.
                "host_stability": {
                    "type": "object",
                    "required": ["verdict", "reasons", "workers", "canary_reads"],
                    "properties": {
                        "verdict": {"enum": ["stable", "noisy"]},
                        "reasons": {"type": "array", "items": {"type": "string"}},
                        "workers": {"type": "array", "items": {"type": "object"}},
                        "canary_reads": {"type": "integer", "minimum": 0},
                    },
                },
                "host_probes": {"type": "array", "items": {"type": "object"}},
                # Where the parent ran while measuring, and why on the measuring core
                # when it did; optional, as for io_guard.
                "parent_affinity": {
                    "type": ["array", "null"],
                    "items": {"type": "integer", "minimum": 0},
                },
                "parent_affinity_reason": {"type": ["string", "null"]},
                # Whether processes and blocks were given or derived from each other
                # (config.design); optional, as for io_guard.
                "processes_source": {"enum": [GIVEN, DERIVED]},
                "blocks_source": {"enum": [GIVEN, DERIVED]},
                # The streaming-copy ceiling on the measuring core
                # (bandwidth.MemoryCeiling.to_json()); optional, as for io_guard.
                "memory_ceiling": {
                    "type": ["object", "null"],
                    "properties": {
                        "bytes_per_s": {"type": ["number", "null"], "exclusiveMinimum": 0},
                        "buffer_bytes": {"type": "integer", "minimum": 1},
                        "repetitions": {"type": "integer", "minimum": 0},
                        "core": {"type": ["integer", "null"], "minimum": 0},
                    },
                },
            },
        },
        "micro-raw.json": {"type": "array", "items": _RECORD},
        AA_RAW: {"type": "array", "items": _AA_RECORD},
        WORK: {"type": "array", "items": _WORK_ROW},
        "validation.json": {
            "type": "array",
            "items": {**_VALIDATION_ROW, "required": ["case", "tokens", "calls", "ok"]},
        },
        "summary.json": {
            "type": "array",
            "items": {
                **_SUMMARY_ROW,
                "required": ["case", "tokens", "host_us", "reduction_pct", "verdict", "valid"],
            },
        },
    },
    ORIGINAL_FORMAT: {
        "metadata.json": {
            "type": "object",
            "required": ["warmup", "blocks", "iterations", "lengths", "metric_order"],
            "properties": _METADATA_COMMON,
        },
        "micro-raw.json": {"type": "array", "items": _RECORD},
        AA_RAW: {"type": "array", "items": _AA_RECORD},
        WORK: {"type": "array", "items": _WORK_ROW},
        "validation.json": {"type": "array", "items": _VALIDATION_ROW},
        "summary.json": {"type": "array", "items": _SUMMARY_ROW},
    },
}


def detect_format(metadata: Any) -> str:
    """``embedbench`` when metadata carries a schema_version, else the original format."""
    if isinstance(metadata, dict) and "schema_version" in metadata:
        return "embedbench"
    return ORIGINAL_FORMAT


# How to get the checker, for every message that says it is missing.
INSTALL_JSONSCHEMA = "pip install 'jsonschema>=4.18'"
SKIPPED_LINE = (
    "skipped: jsonschema is not installed here, so the files were written without their "
    f"schema check ({INSTALL_JSONSCHEMA}, then embedbench validate this directory)"
)


# jsonschema imports every optional format library it finds. rfc3987_syntax (which
# Jupyter's jupyter-events installs) compiles 38 grammars as it is imported, 1.4 s of every
# run's end. These schemas check no formats, so it is kept out while jsonschema loads.
_SLOW_FORMAT_LIBRARIES = ("rfc3987_syntax",)


def _jsonschema() -> ModuleType | None:
    blocked = [name for name in _SLOW_FORMAT_LIBRARIES if name not in sys.modules]
    for name in blocked:
        sys.modules[name] = None  # type: ignore[assignment]  # import raises ImportError
    try:
        import jsonschema
    except ImportError:
        return None
    finally:
        for name in blocked:
            if sys.modules.get(name, False) is None:
                del sys.modules[name]
    return jsonschema


def available() -> bool:
    """Whether jsonschema imports here (a bare GPU image may lack it)."""
    return _jsonschema() is not None


def _where(error: jsonschema.ValidationError) -> str:
    path = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path)
    return path or "(top level)"


def first_problem(file_name: str, data: Any, fmt: str) -> str | None:
    """One line naming the first bad field of ``data`` as ``file_name``, or None if valid;
    ``MissingDependencyError`` (one line, how to get it) without jsonschema."""
    checker = _jsonschema()
    if checker is None:
        raise MissingDependencyError(
            f"checking results against their schema needs jsonschema, which is not "
            f"installed here; {INSTALL_JSONSCHEMA}"
        )
    validator = checker.Draft202012Validator(SCHEMAS[fmt][file_name])
    errors = sorted(validator.iter_errors(data), key=lambda e: list(map(str, e.absolute_path)))
    if not errors:
        return None
    error = errors[0]
    message = error.message if len(error.message) <= 160 else error.message[:157] + "..."
    return f"{file_name}{_where(error)}: {message}"


def check_line(files: dict[str, Any], fmt: str = "embedbench") -> str:
    """One line for a writer's metadata: its files checked against their schema
    (``passed`` or the first problem), or ``SKIPPED_LINE`` without jsonschema."""
    if not available():
        return SKIPPED_LINE
    for name, data in files.items():
        problem = first_problem(name, data, fmt)
        if problem is not None:
            return f"failed: {problem}"
    version = importlib_metadata.version("jsonschema")
    return f"passed: {', '.join(files)} match their schema (jsonschema {version})"
