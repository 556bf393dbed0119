"""The registry of model families: the only list of the families embedbench measures.

Each family is one module that defines ``FAMILY`` (a
:class:`~embedbench.omni.families.spec.Family`). The registry finds those in this
package, in the order of their module names, then imports the modules that the
environment variable ``EMBEDBENCH_FAMILIES`` names (comma-separated, importable
elsewhere: a family kept outside the package, which worker processes then see too);
:func:`register` adds one in-process. Everything else asks the registry: names,
labels, PRs, geometry, token ids, expected lookups, the hooks. The registry and the
family modules are torch-free (the report side reads labels and PRs from here); a
family's torch side is its ``replica`` module, imported on the run side only.

The family of a checkpoint comes from its config.json (:func:`family_of_config`);
``--family auto`` takes it from there, and a named family that the checkpoint
contradicts is refused with one line (:func:`check_family`).
"""

from __future__ import annotations

import importlib
import os
import pkgutil
from pathlib import Path
from typing import Any

from embedbench.errors import ConfigError
from embedbench.omni.families.spec import Family

__all__ = [
    "AUTO_FAMILY",
    "ENVIRONMENT",
    "Family",
    "UnknownModelType",
    "all_families",
    "check_family",
    "default",
    "environment_problem",
    "family_of_config",
    "get",
    "names",
    "register",
    "requested_family",
    "unregister",
    "with_reference_table",
]

# --family auto: the checkpoint's family (without --model: the embedded default's).
AUTO_FAMILY = "auto"
# Modules of this package that are not families.
_NOT_FAMILIES = frozenset({"spec"})
# Modules of families outside the package, comma-separated, registered after the built-in.
ENVIRONMENT = "EMBEDBENCH_FAMILIES"

_REGISTRY: dict[str, Family] = {}
_ENVIRONMENT_PROBLEM: str | None = None


def register(family: Family) -> Family:
    """Add ``family`` (refused when its name, model types or architectures are taken,
    or when a second one claims to be the default); return it."""
    if family.name in _REGISTRY or family.name == AUTO_FAMILY:
        raise ValueError(f"family {family.name!r} is already registered")
    claimed = _claims(family)
    for other in _REGISTRY.values():
        taken = claimed & _claims(other)
        if taken:
            raise ValueError(f"family {family.name!r}: {sorted(taken)} belong to {other.name!r}")
        if family.default and other.default:
            raise ValueError(f"family {family.name!r}: {other.name!r} is already the default")
    _REGISTRY[family.name] = family
    return family


def unregister(name: str) -> None:
    """Remove the family called ``name`` (a test's family, when the test is done)."""
    _REGISTRY.pop(name, None)


def _claims(family: Family) -> set[str]:
    return {
        family.model_type,
        family.thinker_model_type,
        family.architecture,
        *family.other_architectures,
    }


def _discover() -> None:
    """Register the package's family modules, then those ``EMBEDBENCH_FAMILIES`` names."""
    modules = [
        f"{__name__}.{info.name}"
        for info in sorted(pkgutil.iter_modules(__path__), key=lambda i: i.name)
        if not info.ispkg and info.name not in _NOT_FAMILIES
    ]
    global _ENVIRONMENT_PROBLEM
    for name in modules:
        _register_module(name)
    extra = [m.strip() for m in os.environ.get(ENVIRONMENT, "").split(",") if m.strip()]
    for name in extra:
        try:
            _register_module(name)
        except (ConfigError, ValueError) as exc:
            # Not raised here, at import: the CLI refuses it in one line, and ``get``
            # names it (see ``environment_problem``).
            _ENVIRONMENT_PROBLEM = _ENVIRONMENT_PROBLEM or str(exc)


def _register_module(name: str) -> None:
    try:
        module = importlib.import_module(name)
    except ImportError as exc:
        raise ConfigError(f"{ENVIRONMENT}: cannot import family module {name!r}: {exc}") from None
    family = getattr(module, "FAMILY", None)
    if not isinstance(family, Family):
        raise ConfigError(f"{ENVIRONMENT}: module {name!r} defines no FAMILY (a Family)")
    if _REGISTRY.get(family.name) is not family:
        try:
            register(family)
        except ValueError as exc:
            raise ConfigError(f"{ENVIRONMENT}: module {name!r}: {exc}") from None


def environment_problem() -> str | None:
    """Why a family module that ``EMBEDBENCH_FAMILIES`` names was not registered (one
    line, the first such problem), or None."""
    return _ENVIRONMENT_PROBLEM


def names() -> tuple[str, ...]:
    """The registered families' names, in registration order."""
    return tuple(_REGISTRY)


def all_families() -> tuple[Family, ...]:
    """The registered families, in registration order."""
    return tuple(_REGISTRY.values())


def default() -> Family:
    """The embedded default's family (no ``--model``), which is also what a result
    without a ``family`` field measured."""
    found = next((f for f in _REGISTRY.values() if f.default), None)
    if found is None:
        raise LookupError("no registered family is the default")
    return found


def with_reference_table() -> Family:
    """The family whose PR published a before/after table (the one reports set beside)."""
    found = next((f for f in _REGISTRY.values() if f.reference_table is not None), None)
    if found is None:
        raise LookupError("no registered family has a published table")
    return found


def get(name: str) -> Family:
    """The family called ``name`` (one of :func:`names`)."""
    try:
        return _REGISTRY[name]
    except KeyError:
        problem = f" ({_ENVIRONMENT_PROBLEM})" if _ENVIRONMENT_PROBLEM else ""
        raise ConfigError(
            f"unknown family {name!r}; choose from {', '.join((AUTO_FAMILY, *_REGISTRY))}" + problem
        ) from None


class UnknownModelType(ValueError):
    """config.json names a model_type that is no family of embedbench's."""


def family_of_config(config: dict[str, Any]) -> tuple[str, str]:
    """The family a config.json describes, and how it was told: ``(name,
    "model_type")``. Read from the top-level ``model_type``, else
    ``thinker_config.model_type``, else ``architectures``; a config that names none of
    them (an abridged or hand-written one) is taken as the embedded default's family
    (``"default"``). Raises :class:`UnknownModelType` for a model_type of another model.
    """
    model_type = config.get("model_type")
    if isinstance(model_type, str) and model_type:
        for family in _REGISTRY.values():
            if family.model_type == model_type:
                return family.name, "model_type"
        raise UnknownModelType(model_type)
    thinker = config.get("thinker_config")
    thinker_type = thinker.get("model_type") if isinstance(thinker, dict) else None
    for family in _REGISTRY.values():
        if thinker_type == family.thinker_model_type:
            return family.name, "thinker_config.model_type"
    architectures = config.get("architectures")
    if isinstance(architectures, list):
        for architecture in architectures:
            for family in _REGISTRY.values():
                if architecture in (family.architecture, *family.other_architectures):
                    return family.name, "architectures"
    return default().name, "default"


def requested_family(requested: str, *, has_model: bool) -> str:
    """The family a run without a checkpoint builds its synthetic one for (``auto``: the
    embedded default); with a checkpoint, ``requested`` itself."""
    if requested == AUTO_FAMILY and not has_model:
        return default().name
    return requested


def check_family(requested: str, found: str, how: str, model_dir: str | Path) -> str:
    """The run's family: ``found`` (the checkpoint's), unless ``requested`` names another
    family, which is refused with one line (ConfigError, exit 2)."""
    if requested in (AUTO_FAMILY, found):
        return found
    wanted = get(requested)
    family = get(found)
    told = {
        "model_type": f"model_type {family.model_type!r}",
        "thinker_config.model_type": f"thinker_config.model_type {family.thinker_model_type!r}",
        "architectures": f"architectures {family.architecture!r}",
        "default": f"no model_type (taken as {default().label})",
    }[how]
    raise ConfigError(
        f"family {requested} contradicts the checkpoint {model_dir}: its config.json has "
        f"{told}, a {family.label} checkpoint; pass --family auto (notebook: "
        f"family='auto') or a {wanted.label} checkpoint"
    )


_discover()
