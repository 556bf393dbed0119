"""Put this directory first on PYTHONPATH to run Python as on a machine without torch.

``import torch`` (or any ``torch.*``) raises ImportError, as it would where torch is
not installed. With ``EMBEDBENCH_NOTORCH_CHECK`` set, the interpreter says at exit on
stderr whether torch was imported anyway (``notorch: torch imported``), and which
imports were refused (``notorch: refused torch``), so a test can tell a clean run from one
that caught an ImportError on the way.
"""

from __future__ import annotations

import atexit
import os
import sys
from importlib.abc import MetaPathFinder

_REFUSED: list[str] = []


class _NoTorch(MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "torch" or name.startswith("torch."):
            _REFUSED.append(name)
            raise ImportError(f"No module named {name!r} (blocked by tests/support/notorch)")
        return None


sys.meta_path.insert(0, _NoTorch())


def _report() -> None:
    if "torch" in sys.modules:
        print("notorch: torch imported", file=sys.stderr)
    for name in dict.fromkeys(_REFUSED):
        print(f"notorch: refused {name}", file=sys.stderr)
    print("notorch: checked", file=sys.stderr)


if os.environ.get("EMBEDBENCH_NOTORCH_CHECK"):
    atexit.register(_report)
