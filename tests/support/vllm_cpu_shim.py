"""Let the registry's CUDA build of torchvision import on a CPU-only torch (tests only).

Not part of the library. ``scripts/vllm-omni-cpu-env.sh`` copies this file into the
separate vLLM-Omni CPU venv and activates it from a ``.pth`` file there, so every
interpreter of that venv (and only of that venv) gets the workaround.

Why: torchvision 0.28.0 on PyPI is a CUDA build. On the CPU build of torch 2.13.0 its
compiled operators fail to load, and its pure-Python part then dies at import on
``torch.library.register_fake("torchvision::nms")`` because no ``torchvision::nms``
schema exists. transformers imports torchvision when it is installed, and vLLM's
Qwen2.5-Omni code imports transformers, so the thinker module cannot import at all.

What: define the two operator schemas (``nms`` and ``qnms``, the ones torchvision
registers fake kernels for unconditionally) through ``torch.library`` before
torchvision is first imported. The schemas have no kernel: calling the operators
still fails, which is harmless here (nothing in ``embed_input_ids`` uses them).

``install()`` does this lazily: it puts a finder on ``sys.meta_path`` that defines the
schemas the first time ``torchvision`` is imported, so interpreters that never import
torchvision (pip, for one) do not pay for importing torch.
"""

from __future__ import annotations

import importlib.abc
import sys
from typing import Any

SCHEMAS: tuple[str, ...] = (
    "nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
    "qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
)

_library: Any = None  # the torch.library.Library must stay alive for the schemas to stay


def _has_schema(qualified_name: str) -> bool:
    import torch

    try:
        torch._C._dispatch_find_schema_or_throw(qualified_name, "")
    except RuntimeError:
        return False
    return True


def define_torchvision_schemas() -> list[str]:
    """Define the missing ``torchvision::`` schemas; return the names defined now."""
    global _library
    import torch

    missing = [s for s in SCHEMAS if not _has_schema("torchvision::" + s.split("(", 1)[0])]
    if not missing:
        return []
    if _library is None:
        _library = torch.library.Library("torchvision", "FRAGMENT")
    for schema in missing:
        _library.define(schema)
    return [s.split("(", 1)[0] for s in missing]


class _TorchvisionHook(importlib.abc.MetaPathFinder):
    """Defines the schemas just before the first ``import torchvision``; finds nothing."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> None:
        if fullname == "torchvision":
            sys.meta_path[:] = [f for f in sys.meta_path if f is not self]
            define_torchvision_schemas()
        return None


def install() -> None:
    """Arm the hook (idempotent); if torchvision is already imported, do nothing."""
    if "torchvision" in sys.modules:
        return
    if not any(isinstance(f, _TorchvisionHook) for f in sys.meta_path):
        sys.meta_path.insert(0, _TorchvisionHook())
