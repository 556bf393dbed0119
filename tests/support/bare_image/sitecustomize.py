"""Put this directory first on PYTHONPATH to run Python as on the bare GPU image, which
has torch, numpy, pandas, scipy, matplotlib, safetensors, tqdm and psutil but neither
platformdirs nor jsonschema: importing either (or a submodule) raises ImportError, as
it would where it is not installed. Worker processes inherit PYTHONPATH, so they are
blocked too.
"""

from __future__ import annotations

import sys
from importlib.abc import MetaPathFinder

ABSENT = ("platformdirs", "jsonschema")


class _Absent(MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ABSENT:
            raise ModuleNotFoundError(f"No module named {name!r} (tests/support/bare_image)")
        return None


sys.meta_path.insert(0, _Absent())
