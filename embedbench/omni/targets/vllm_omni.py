"""The real vLLM-Omni thinker: baseline from a git ref, candidate from the checkout.

``build_vllm_omni_target`` imports ``Qwen2_5OmniThinkerForConditionalGeneration``
from the checkout (``repo`` first on ``sys.path``) or, without ``repo``, from the
installed ``vllm_omni`` (whose git checkout then provides the baseline). It builds
an instance without the real ``__init__`` (``cls.__new__`` + ``nn.Module.__init__``)
holding only what ``embed_input_ids`` touches: ``config`` (the checkpoint's
``thinker_config`` through transformers' ``Qwen2_5OmniThinkerConfig``),
``_has_oov_mm_tokens = False`` and a language model around the checkpoint's table.
The language model is built from vLLM's own classes (``lm_shim``): ``flat``
is the PR script's shim, ``embed_input_ids(ids) -> self.embed_tokens(ids)`` around
vLLM's ``VocabParallelEmbedding``; ``production`` is the served chain, the real
``Qwen2ForCausalLM.embed_input_ids`` -> ``Qwen2Model.embed_input_ids`` ->
``VocabParallelEmbedding``, with both models built without ``__init__``. Either way
the embedding's weight is the loaded table itself, never a copy.
The two variants are the method at ``baseline_ref`` (compiled by
:mod:`embedbench.omni.gitsource` against the live class) and at ``candidate_ref``
(``WORKTREE``: the live method), both bound to that instance.

The checkpoint's family (:mod:`embedbench.omni.families`) picks the class and its path,
transformers' config class and the values it must read back, and the ``production``
language model's classes; a family whose real ``__init__`` gives the wrapper more (a
vision tower and the DeepStack buffer, say) adds it with its ``prepare_real_shim`` hook.

vLLM is imported only inside :func:`build_vllm_omni_target`, never when embedbench
itself is imported; :func:`check_vllm_omni_source` checks the repository and refs
without importing it. :func:`loaded_modules` names the thinker's modules a process has
already imported, for the freshness check before a run (:mod:`embedbench.harness.freshness`).
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path
from types import MethodType, ModuleType
from typing import Any

import torch
from torch import nn

from embedbench.config import LM_SHIMS, WORKTREE
from embedbench.errors import EmbedbenchError, GitSourceError
from embedbench.harness import freshness
from embedbench.harness.sysinfo import package_version
from embedbench.omni import families, gitsource
from embedbench.omni.checkpoint import ThinkerFacts
from embedbench.omni.families import Family
from embedbench.omni.targets import Target, bare_module, lm_metadata, vllm_helpers
from embedbench.omni.targets.reference import FlatLanguageModel
from embedbench.omni.targets.vllm_helpers import tag_modality

__all__ = [
    "INSTALL_HINT",
    "MEASURED",
    "METHOD",
    "OWN_MODULES",
    "PACKAGE",
    "THINKER_CLASS",
    "THINKER_MODULE",
    "THINKER_PATH",
    "VllmOmniImportError",
    "build_vllm_omni_target",
    "check_vllm_omni_source",
    "import_thinker",
    "loaded_modules",
    "measured_methods",
    "source_repo",
    "vllm_language_model",
]

PACKAGE = "vllm_omni"
# The thinker of the embedded default's family; every family's are in its registry entry.
THINKER_MODULE = families.default().thinker_module
THINKER_PATH = families.default().thinker_path
THINKER_CLASS = families.default().thinker_class
METHOD = "embed_input_ids"
MEASURED = f"{THINKER_CLASS}.{METHOD}"
# embedbench's modules that build this target (checked for freshness with the thinker's).
OWN_MODULES = (
    __name__,
    gitsource.__name__,
    "embedbench.omni.targets.reference",
    vllm_helpers.__name__,
)
INSTALL_HINT = (
    "install vLLM-Omni with its dependencies (pip install vllm-omni, which needs vLLM), "
    "or on a CPU-only machine build a venv with scripts/vllm-omni-cpu-env.sh and run "
    "embedbench with its python"
)


class VllmOmniImportError(EmbedbenchError):
    """The vLLM-Omni thinker (or vLLM, or transformers) cannot be imported."""


def _fail(message: str) -> VllmOmniImportError:
    return VllmOmniImportError(message)


def _family(name: str | None) -> Family:
    """The family called ``name``; None: the embedded default's."""
    return families.get(name) if name is not None else families.default()


def measured_methods() -> dict[str, str]:
    """What --target vllm-omni measures, per family: ``Class.embed_input_ids``."""
    return {f.name: f.measured for f in families.all_families()}


def _inside(path: str | Path | None, root: Path) -> bool:
    if path is None:
        return False
    try:
        Path(path).resolve().relative_to(root.resolve())
    except ValueError:
        return False
    return True


def source_repo(repo: str | Path | None) -> Path:
    """The git work tree to read the baseline from.

    ``repo`` when given; otherwise the checkout that the installed ``vllm_omni``
    package lives in (found without importing it).
    """
    if repo is not None:
        return gitsource.repo_root(repo)
    spec = importlib.util.find_spec(PACKAGE)
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    if not locations:
        raise _fail(
            f"vllm-omni is not importable (no module named {PACKAGE!r}); pass --repo "
            f"YOUR_CHECKOUT or {INSTALL_HINT}"
        )
    location = Path(locations[0])
    try:
        return gitsource.repo_root(location)
    except GitSourceError:
        raise GitSourceError(
            f"the installed {PACKAGE} ({location}) is not in a git checkout, so no baseline "
            f"ref can be read; pass --repo YOUR_VLLM_OMNI_CHECKOUT"
        ) from None


def check_vllm_omni_source(
    *, repo: str | Path | None, baseline_ref: str, candidate_ref: str, family: str | None = None
) -> dict[str, Any]:
    """Check the repository, the refs and ``family``'s method at each ref, importing nothing.

    Returns the repository root and the resolved SHAs. Raises ``GitSourceError`` (or
    ``VllmOmniImportError`` when no ``repo`` is given and vllm-omni is not installed).
    """
    spec = _family(family)
    path, cls = spec.thinker_path, spec.thinker_class
    root = source_repo(repo)
    baseline_sha = gitsource.check_method(root, baseline_ref, path, cls, METHOD)
    candidate_sha = None
    if candidate_ref != WORKTREE:
        candidate_sha = gitsource.check_method(root, candidate_ref, path, cls, METHOD)
    elif repo is not None and not (root / path).is_file():
        raise GitSourceError(
            f"{path} is not in the work tree of {root}; check out a vLLM-Omni revision "
            f"that has it or pass --candidate-ref"
        )
    return {"repo": str(root), "baseline_sha": baseline_sha, "candidate_sha": candidate_sha}


def _put_first_on_path(root: Path) -> bool:
    """Put ``root`` first on ``sys.path``; True when it was not there before."""
    entry = str(root)
    present = entry in sys.path
    sys.path[:] = [p for p in sys.path if p != entry]
    sys.path.insert(0, entry)
    return not present


def import_thinker(root: Path | None, family: str | None = None) -> tuple[ModuleType, type]:
    """Import ``family``'s thinker module (from ``root`` when given); return it and the class."""
    spec = _family(family)
    module_name, path, class_name = spec.thinker_module, spec.thinker_path, spec.thinker_class
    where = f"from {root}" if root is not None else "from the installed package"
    added = False
    if root is not None:
        loaded = sys.modules.get(PACKAGE)
        if loaded is not None and not _inside(getattr(loaded, "__file__", None), root):
            raise _fail(
                f"{PACKAGE} is already imported in this process from {loaded.__file__}, not "
                f"from {root}; start a fresh Python process (or kernel) for --repo {root}"
            )
        added = _put_first_on_path(root)
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:
        if added:
            sys.path[:] = [p for p in sys.path if p != str(root)]
        detail = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        raise _fail(
            f"vllm-omni is not importable: import {module_name} {where} failed with "
            f"{type(exc).__name__}: {detail}; {INSTALL_HINT}"
        ) from None
    if root is not None and not _inside(module.__file__, root):
        raise _fail(
            f"{module_name} was imported from {module.__file__}, not from --repo {root}; "
            f"is {root} a vLLM-Omni checkout (with {path})?"
        )
    cls = getattr(module, class_name, None)
    if not isinstance(cls, type):
        raise GitSourceError(f"{module.__file__} has no class {class_name} in the work tree")
    return module, cls


def loaded_modules() -> list[str]:
    """The modules of the real thinkers (every family's) that this process has already
    imported (none in a fresh process): each thinker's module, those of its class's MRO
    and of what its method uses, and embedbench's modules that build this target."""
    names: list[str] = []
    for spec in families.all_families():
        module = sys.modules.get(spec.thinker_module)
        cls = getattr(module, spec.thinker_class, None) if module is not None else None
        if not isinstance(cls, type):
            continue
        method = vars(cls).get(METHOD)
        names += freshness.dependency_modules([cls], [method] if method else [])
    return [*dict.fromkeys(names), *OWN_MODULES] if names else []


def _thinker_config(facts: ThinkerFacts) -> Any:
    """``config`` of the shim: the checkpoint's thinker_config as transformers reads it,
    refused when it does not read back the checkpoint's values (the family's
    ``read_back``: the token ids under its names, and what else the wrapper reads)."""
    family = families.get(facts.family)
    module, name = family.thinker_config_class
    label = family.label
    try:
        config_class = getattr(importlib.import_module(module), name)
    except Exception as exc:
        raise _fail(
            f"transformers' {name} is not importable ({type(exc).__name__}: {exc}); {INSTALL_HINT}"
        ) from None
    try:
        config = config_class.from_dict(dict(facts.thinker_config))
    except Exception as exc:
        raise EmbedbenchError(
            f"the checkpoint's thinker_config is not a valid {name} "
            f"({type(exc).__name__}: {exc}); pass a {label} checkpoint"
        ) from None
    seen, expected = family.read_back(config, facts)
    if seen != expected:
        raise EmbedbenchError(
            f"{name} reads {seen} from the checkpoint's thinker_config, which says "
            f"{expected}; pass a {label} checkpoint"
        )
    return config


def _modality_tagger() -> tuple[Callable[[torch.Tensor, str], torch.Tensor], str]:
    """vLLM's own ``set_mm_embedding_modality`` when it exists, else a plain attribute."""
    try:
        from vllm.multimodal.utils import set_mm_embedding_modality
    except ImportError:
        return tag_modality, "attribute (vllm has no set_mm_embedding_modality)"
    return set_mm_embedding_modality, "vllm.multimodal.utils.set_mm_embedding_modality"


def _vocab_parallel_embedding(table: torch.Tensor) -> nn.Module:
    """vLLM's own ``VocabParallelEmbedding(vocab, hidden, params_dtype=table.dtype,
    disable_tp=True)`` whose weight is ``table`` itself.

    Built under the meta device, so its own (padded) weight never takes memory, then
    given the table as its weight. At TP=1 (``disable_tp``) it needs no vLLM config
    or distributed context; its forward is ``F.embedding(ids.long(), weight)``.
    """
    try:
        from vllm.model_executor.layers.vocab_parallel_embedding import VocabParallelEmbedding
    except Exception as exc:
        raise _fail(
            f"vLLM's VocabParallelEmbedding is not importable ({type(exc).__name__}: {exc}); "
            f"{INSTALL_HINT}"
        ) from None
    vocab, hidden = (int(d) for d in table.shape)
    try:
        with torch.device("meta"):
            layer = VocabParallelEmbedding(vocab, hidden, params_dtype=table.dtype, disable_tp=True)
        layer.weight = nn.Parameter(table, requires_grad=False)
    except Exception as exc:
        raise EmbedbenchError(
            f"vLLM's VocabParallelEmbedding({vocab}, {hidden}, params_dtype={table.dtype}, "
            f"disable_tp=True) cannot be built around the table ({type(exc).__name__}: "
            f"{exc}); vLLM 0.30 builds it on CPU; with another vLLM use --target reference"
        ) from None
    if layer.weight.data_ptr() != table.data_ptr():
        raise EmbedbenchError(
            "vLLM's VocabParallelEmbedding did not take the loaded table as its weight"
        )
    return layer


def _served_language_model(embedding: nn.Module, family: Family) -> nn.Module:
    """The served chain of ``family``: vLLM's causal LM holding its text model holding
    ``embedding``, both without ``__init__``; their own ``embed_input_ids`` methods run
    (vllm-omni's own language-model classes inherit these methods)."""
    module_name, causal_name, model_name = family.production_language_model
    try:
        module = importlib.import_module(module_name)
        causal_class, model_class = getattr(module, causal_name), getattr(module, model_name)
    except Exception as exc:
        raise _fail(
            f"vLLM's {causal_name} is not importable ({type(exc).__name__}: {exc}); {INSTALL_HINT}"
        ) from None
    text_model = bare_module(model_class)
    text_model.embed_tokens = embedding
    language_model = bare_module(causal_class)
    language_model.model = text_model
    return language_model


def vllm_language_model(table: torch.Tensor, lm_shim: str, family: str | None = None) -> nn.Module:
    """The language model of the shim for ``lm_shim`` (``flat`` or ``production``),
    from vLLM's own classes, around ``table`` (not copied); ``production`` is
    ``family``'s served chain."""
    if lm_shim not in LM_SHIMS:
        raise ValueError(f"unknown lm_shim {lm_shim!r}; choose from {', '.join(LM_SHIMS)}")
    embedding = _vocab_parallel_embedding(table)
    if lm_shim == "production":
        return _served_language_model(embedding, _family(family))
    return FlatLanguageModel(embedding)


def _build_shim(cls: type, config: Any, language_model: nn.Module) -> Any:
    """An instance of the real class without its ``__init__``: only what the wrapper uses."""
    shim = bare_module(cls)
    shim.config = config
    shim._has_oov_mm_tokens = False
    shim.language_model = language_model
    if shim.get_language_model() is not language_model:
        raise _fail(
            f"{cls.__qualname__}.get_language_model() does not return the language_model "
            f"attribute in this vLLM-Omni revision; the shim needs updating"
        )
    return shim


def _thinker_file_in(module: ModuleType, root: Path, family: str | None = None) -> str:
    """The thinker's path relative to ``root`` (the same path is read at each ref)."""
    try:
        return Path(module.__file__).resolve().relative_to(root.resolve()).as_posix()
    except (TypeError, ValueError):
        return _family(family).thinker_path


def build_vllm_omni_target(
    table: torch.Tensor,
    facts: ThinkerFacts,
    *,
    repo: str | Path | None,
    baseline_ref: str,
    candidate_ref: str = WORKTREE,
    lm_shim: str = "flat",
) -> Target:
    """The ``vllm-omni`` target: the real class's method at two revisions around ``table``,
    looking text up through the language model ``lm_shim`` names; the checkpoint's
    family (``facts.family``) picks the class and its path."""
    family = facts.family
    root = source_repo(repo)
    module, cls = import_thinker(root if repo is not None else None, family)
    path = _thinker_file_in(module, root, family)
    baseline = gitsource.method_at_ref(root, baseline_ref, path, cls, METHOD)
    candidate = gitsource.method_at_ref(root, candidate_ref, path, cls, METHOD)
    language_model = vllm_language_model(table, lm_shim, family)
    shim = _build_shim(cls, _thinker_config(facts), language_model)
    hooks = families.get(family).hooks()
    prepare = getattr(hooks, "prepare_real_shim", None)
    extra = prepare(shim, module, facts, table) if prepare is not None else {}
    tag, tag_source = _modality_tagger()
    head = gitsource.head_commit(root)
    dirty = gitsource.is_dirty(root)
    package = sys.modules.get(PACKAGE)
    metadata: dict[str, Any] = {
        "repo": str(root),
        "thinker_module": module.__name__,
        "thinker_file": module.__file__,
        "thinker_class": f"{cls.__module__}.{cls.__qualname__}",
        "method": METHOD,
        "source_path": path,
        "refs": {
            "baseline_ref": baseline_ref,
            "baseline_sha": baseline.sha,
            "candidate_ref": candidate_ref,
            "candidate_sha": candidate.sha if candidate_ref != WORKTREE else head,
            "checked_out_commit": head,
        },
        "dirty": dirty,
        "code_filenames": {"baseline": baseline.filename, "fixed": candidate.filename},
        "versions": {
            "vllm": package_version("vllm"),
            "vllm-omni": package_version("vllm-omni"),
            "vllm_omni_module": getattr(package, "__version__", None),
            "transformers": package_version("transformers"),
        },
        "modality_tag": tag_source,
        **extra,
        **lm_metadata(lm_shim, language_model),
    }
    return Target(
        name="vllm-omni",
        model=shim,
        language_model=language_model,
        variants={
            "baseline": MethodType(baseline.function, shim),
            "fixed": MethodType(candidate.function, shim),
        },
        tag=tag,
        metadata=metadata,
        modules=(*OWN_MODULES, hooks.__name__),
        checkout=str(root),
        family=family,
    )
