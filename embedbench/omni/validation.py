"""Pre-timing validation: lookup counts per variant and ``torch.equal`` of the outputs.

The expected counts are the target's family's (:mod:`embedbench.omni.families`). For a
family with DeepStack the buffer each variant stores through
``_set_deepstack_input_embeds`` is compared too, with ``torch.equal``; the row's
``compared`` says what was compared.

A mismatch is recorded in a :class:`ValidationResult`, never raised: the run goes
on, the case is marked invalid, and what differed is written to ``validation.json``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import torch

from embedbench.cases import VARIANTS
from embedbench.omni import families
from embedbench.omni.families.spec import DEEPSTACK_BUFFER
from embedbench.omni.scenarios import VISION, Scenario, call_variant
from embedbench.omni.targets import Target

__all__ = [
    "DEEPSTACK_BUFFER",
    "EXPECTED_LOOKUPS",
    "LookupCounter",
    "ValidationResult",
    "count_lookups",
    "take_deepstack_buffer",
    "validate_scenario",
]

_ATTRIBUTE = "embed_input_ids"
# Text lookups per call, per case and variant, of the embedded default's family (every
# family's are its own: ``families.get(name).expected_lookups``).
EXPECTED_LOOKUPS: dict[str, dict[str, int]] = {
    case: dict(counts) for case, counts in families.default().expected_lookups.items()
}


@dataclass
class LookupCounter:
    """How many times the language model's ``embed_input_ids`` was called."""

    count: int = 0

    def reset(self) -> None:
        self.count = 0


@contextmanager
def count_lookups(language_model: Any) -> Iterator[LookupCounter]:
    """Count calls of ``language_model.embed_input_ids`` inside the block.

    The instance attribute is replaced by a counting wrapper around the current
    bound method, so wrapper code that reaches it through
    ``self.get_language_model().embed_input_ids`` is counted. On exit, even on
    error, the previous state is restored: an instance attribute that was there
    before is put back, otherwise the wrapper is deleted and the class method
    shows through again.
    """
    instance_dict = getattr(language_model, "__dict__", {})
    had_instance_attr = _ATTRIBUTE in instance_dict
    previous = instance_dict.get(_ATTRIBUTE)
    original: Callable[..., Any] = getattr(language_model, _ATTRIBUTE)
    counter = LookupCounter()

    def counting_embed_input_ids(*args: Any, **kwargs: Any) -> Any:
        counter.count += 1
        return original(*args, **kwargs)

    setattr(language_model, _ATTRIBUTE, counting_embed_input_ids)
    try:
        yield counter
    finally:
        if had_instance_attr:
            setattr(language_model, _ATTRIBUTE, previous)
        else:
            delattr(language_model, _ATTRIBUTE)


@dataclass
class ValidationResult:
    """Validation of one (case, tokens) on one device: observed vs expected lookups, equality."""

    case: str
    tokens: int
    device: str
    calls: dict[str, int]
    expected_calls: dict[str, int]
    torch_equal: bool
    ok: bool
    mismatch: dict[str, Any] | None = field(default=None)
    family: str = field(default_factory=lambda: families.default().name)
    # What torch.equal compared: the outputs, and for DeepStack the buffer too.
    compared: tuple[str, ...] = ("output",)
    # torch.equal of the two DeepStack buffers (None: the family has none).
    deepstack_equal: bool | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "case": self.case,
            "tokens": self.tokens,
            # As in the original script's rows: the device type the inputs live on.
            "device": self.device,
            "calls": dict(self.calls),
            "expected_calls": dict(self.expected_calls),
            "torch_equal": self.torch_equal,
            # The original script's name for the same check.
            "same_input_wrapper_torch_equal": self.torch_equal,
            "ok": self.ok,
            "mismatch": self.mismatch,
            "family": self.family,
            "compared": list(self.compared),
            **({} if self.deepstack_equal is None else {"deepstack_equal": self.deepstack_equal}),
        }


def _dtype_of(value: Any) -> Any:
    return value.dtype if isinstance(value, torch.Tensor) else type(value)


def _describe_difference(outputs: dict[str, torch.Tensor]) -> dict[str, Any]:
    """What differs between the baseline and fixed outputs (they are not equal)."""
    base, fixed = outputs["baseline"], outputs["fixed"]
    if not isinstance(base, torch.Tensor) or not isinstance(fixed, torch.Tensor):
        return {"type": {name: type(value).__name__ for name, value in outputs.items()}}
    detail: dict[str, Any] = {}
    if base.shape != fixed.shape:
        detail["shape"] = {name: list(value.shape) for name, value in outputs.items()}
    if base.dtype != fixed.dtype:
        detail["dtype"] = {name: str(value.dtype) for name, value in outputs.items()}
    if base.device != fixed.device:
        detail["device"] = {name: str(value.device) for name, value in outputs.items()}
    if detail:
        return detail

    a = base.detach().cpu()
    b = fixed.detach().cpu()
    if a.dim() == 0:
        a, b = a.reshape(1), b.reshape(1)
    # NaN != NaN, so identical NaNs count as a difference, as torch.equal does.
    differs = (a != b).reshape(a.shape[0], -1).any(dim=1)
    rows = differs.nonzero(as_tuple=True)[0]
    diff = (a.double() - b.double()).abs()
    finite = diff[torch.isfinite(diff)]
    detail["first_differing_position"] = int(rows[0]) if len(rows) else None
    detail["differing_positions"] = len(rows)
    detail["max_abs_diff"] = float(finite.max()) if finite.numel() else None
    if finite.numel() != diff.numel():
        detail["non_finite_differences"] = int(diff.numel() - finite.numel())
    return detail


def take_deepstack_buffer(model: Any) -> torch.Tensor | None:
    """The DeepStack buffer's valid rows as one ``(levels, tokens, hidden)`` copy (None
    when nothing is stored), then cleared: rows zeroed, no valid rows. Reads the
    attributes the real class and the replica share (``deepstack_input_embeds``, a list
    per level, and ``deepstack_input_embeds_num_tokens``)."""
    buffers = getattr(model, "deepstack_input_embeds", None)
    count = getattr(model, "deepstack_input_embeds_num_tokens", 0)
    if not buffers or not count:
        return None
    snapshot = torch.stack([level[:count] for level in buffers])  # a copy
    for level in buffers:
        level[:count].zero_()
    model.deepstack_input_embeds_num_tokens = 0
    return snapshot


def _compare_deepstack(
    buffers: dict[str, torch.Tensor | None], expect_set: bool
) -> tuple[bool, dict[str, Any] | None]:
    """torch.equal (and same dtype) of the two buffers, each set exactly when expected."""
    state = {name: "set" if b is not None else "not set" for name, b in buffers.items()}
    if any((b is not None) != expect_set for b in buffers.values()):
        return False, {**state, "expected": "set" if expect_set else "not set"}
    base, fixed = buffers["baseline"], buffers["fixed"]
    if base is None or fixed is None:
        return True, None
    if base.dtype == fixed.dtype and bool(torch.equal(base, fixed)):
        return True, None
    return False, _describe_difference(
        {name: b.permute(1, 0, 2) for name, b in buffers.items() if b is not None}
    )


def validate_scenario(target: Target, scenario: Scenario) -> ValidationResult:
    """Run each variant once on ``scenario``, counting text lookups, and compare.

    ``ok`` requires the expected lookup count for each variant, no exception,
    ``torch.equal`` of the two outputs and the same output dtype (``torch.equal``
    alone accepts equal values in different dtypes). Never raises for a mismatch or for an
    exception in a variant: both are recorded in ``mismatch``.

    The expected counts are ``target.family``'s. With DeepStack, each variant starts
    from an empty buffer and what it stored is compared as well (``deepstack_equal``);
    a vision case must store one, another case must not.
    """
    family = families.get(target.family)
    expected = family.lookups(scenario.case)
    calls: dict[str, int] = {}
    outputs: dict[str, torch.Tensor] = {}
    buffers: dict[str, torch.Tensor | None] = {}
    errors: list[str] = []

    with torch.inference_mode():
        for variant in VARIANTS:
            fn = target.variants[variant]
            if family.deepstack:
                take_deepstack_buffer(target.model)  # what an earlier call left
            with count_lookups(target.language_model) as counter:
                try:
                    outputs[variant] = call_variant(fn, scenario)
                except Exception as error:  # recorded, not raised
                    message = str(error).splitlines()[0] if str(error) else ""
                    errors.append(f"{variant} raised {type(error).__name__}: {message}")
            calls[variant] = counter.count
            if family.deepstack:
                buffers[variant] = take_deepstack_buffer(target.model)

        mismatch: dict[str, Any] = {}
        if errors:
            mismatch["error"] = "; ".join(errors)

        wrong_counts = {
            variant: {"observed": calls[variant], "expected": expected[variant]}
            for variant in VARIANTS
            if calls[variant] != expected[variant]
        }
        if wrong_counts:
            mismatch["lookup_counts"] = wrong_counts

        torch_equal = False
        if len(outputs) == len(VARIANTS):
            base, fixed = outputs["baseline"], outputs["fixed"]
            try:
                torch_equal = bool(torch.equal(base, fixed))
            except (RuntimeError, TypeError):
                torch_equal = False
            # torch.equal compares values across dtypes (bf16 == fp32 rows pass), so
            # a changed output dtype is recorded on its own.
            if not torch_equal or _dtype_of(base) != _dtype_of(fixed):
                mismatch["outputs"] = _describe_difference(outputs)

        deepstack_equal = None
        if family.deepstack and not errors:
            expect_set = scenario.deepstack_levels > 0 and any(
                m in VISION for m in scenario.modalities
            )
            deepstack_equal, difference = _compare_deepstack(buffers, expect_set)
            if difference is not None:
                mismatch[DEEPSTACK_BUFFER] = difference
        elif family.deepstack:
            deepstack_equal = False

    return ValidationResult(
        case=scenario.case,
        tokens=scenario.tokens,
        device=scenario.input_ids.device.type,
        calls=calls,
        expected_calls=expected,
        torch_equal=torch_equal,
        ok=not mismatch,
        mismatch=mismatch or None,
        family=family.name,
        compared=family.compared,
        deepstack_equal=deepstack_equal,
    )
