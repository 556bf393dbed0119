"""The Python functions a call enters, in order: how deep a text lookup goes.

Shared by the unit tests (``from support.calltrace import python_calls``) and by
``replica_check.py`` (run as a script, so this directory is on its ``sys.path``).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from types import FrameType
from typing import Any


def python_calls(fn: Callable[..., Any], *args: Any) -> list[str]:
    """Names (``Class.method`` on Python 3.11+) of every Python function entered while
    ``fn(*args)`` runs, in call order; builtins and C functions are not listed."""
    calls: list[str] = []

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        if event == "call":
            code = frame.f_code
            calls.append(getattr(code, "co_qualname", code.co_name))

    previous = sys.getprofile()
    sys.setprofile(profile)
    try:
        fn(*args)
    finally:
        sys.setprofile(previous)
    return calls


def method_names(calls: list[str]) -> list[str]:
    """The calls without their class names, to compare two classes' chains."""
    return [name.rsplit(".", 1)[-1] for name in calls]
