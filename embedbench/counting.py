"""The counting process of ``--counts``: ``python -m embedbench.counting SPEC_FILE`` (not
for users), run by ``embedbench.harness.countrun`` under valgrind's callgrind
(``harness.callgrind.valgrind_command``).

``SPEC_FILE`` is a JSON file: ``share`` (a ``measure.Share``, on the CPU), ``calls``
(per form), ``warmup`` (per form) and ``start_instrumentation`` (callgrind started with
instrumentation off, and this process turns it on once the table is loaded:
``harness.vgrequest``); with ``prepare`` true, the process runs natively and only loads,
builds and calls each form once (see ``harness.countrun``: it leaves every module's
bytecode cached before the counted process starts). It loads the table and builds the
forms once, through the share's ``Backend`` as a timing worker does (the target's cases,
or a factory's pair), then, per case and length in the share's order: ``warmup`` calls
of each form, then ``calls`` more, the forms taking turns
(``harness.callgrind.collected_calls``), each call collected into a dump of its own
(torch's ``_valgrind_toggle``, then ``_valgrind_toggle_and_dump_stats``): the warm-up's
dumps are left unread, so that the code around a counted call is as warm as the forms. A
case whose validation fails is not counted.

It writes one JSON event per line to stdout: ``ready`` (``pid``: the process whose
dumps these are; ``personality``: its Linux personality flags), ``counted`` after each
dump (``case``, ``tokens``, ``variant``, ``part``: the dump's number, ``calls``: the
calls in it; with ``error`` where a call raised, and ``part`` null where nothing was
collected), ``skipped`` (a case that failed validation), ``done``; a failure ends with
an ``error`` event and exit 2 (bad input) or 1.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TextIO

from embedbench.errors import EmbedbenchError, one_line
from embedbench.harness.exiting import exit_now

__all__ = ["EXIT_CRASH", "EXIT_OK", "EXIT_USAGE", "count_forms", "main"]

EXIT_OK = 0
EXIT_CRASH = 1
EXIT_USAGE = 2

Emit = Callable[[dict[str, Any]], None]


def _event_stream() -> TextIO:
    """A private copy of stdout for events; fd 1 itself then points at stderr."""
    stream = os.fdopen(os.dup(1), "w", encoding="utf-8", buffering=1)
    os.dup2(2, 1)
    return stream


def _personality() -> int | None:
    """This process's Linux personality flags (None where unreadable)."""
    try:
        return int(Path("/proc/self/personality").read_text().strip(), 16)
    except (OSError, ValueError):
        return None


def _collect(call: Callable[[], Any], calls: int) -> str | None:
    """Collect ``calls`` calls of ``call`` into one dump; the error (one line) where a call
    raised (the dump is taken all the same, so the numbering holds)."""
    import torch

    torch._C._valgrind_toggle()
    error = None
    try:
        for _ in range(calls):
            call()
    except Exception as exc:
        error = f"{type(exc).__name__}: {one_line(exc)}"
    torch._C._valgrind_toggle_and_dump_stats()
    return error


def count_forms(spec: dict[str, Any], emit: Emit) -> None:
    """Load the share of ``spec`` once and count each case's forms (see the module doc)."""
    import torch

    from embedbench.harness import vgrequest
    from embedbench.harness.callgrind import collected_calls
    from embedbench.measure import Share, backend_for
    from embedbench.omni.targets import VARIANTS

    if not torch._C._valgrind_supported_platform():
        raise EmbedbenchError(
            "this torch build cannot toggle callgrind's collection "
            "(torch._C._valgrind_supported_platform() is False); run without counts"
        )
    share = Share.from_json(spec["share"])
    calls, warmup = int(spec["calls"]), int(spec["warmup"])
    backend = backend_for(share)
    loaded = backend.load(share)
    emit({"event": "ready", "pid": os.getpid(), "personality": _personality()})
    part = 0
    with backend.isolated(share.cpu_core):
        if spec.get("prepare"):
            _call_each_once(backend, share, loaded)
            emit({"event": "done"})
            return
        if spec.get("start_instrumentation") and not vgrequest.start_instrumentation():
            raise EmbedbenchError(
                "the counting process could not start callgrind's instrumentation "
                "(no client request reached valgrind); rerun, or report it"
            )
        for case, tokens, forms in _valid_cases(backend, share, loaded):
            if forms is None:
                emit({"event": "skipped", "case": case, "tokens": tokens})
                continue
            # The warm-up takes the counted calls' own path, each call dumped and its dump
            # left unread: the code around a counted call warms up with the forms.
            warm_error = None
            for variant in collected_calls(VARIANTS, warmup):
                error = _collect(forms[variant], 1)
                warm_error = warm_error or error
                part += 1
            for variant in collected_calls(VARIANTS, calls):
                event = {"event": "counted", "case": case, "tokens": tokens, "variant": variant}
                if warm_error:  # a form raised: nothing is counted
                    emit({**event, "part": None, "calls": 1, "error": warm_error})
                    continue
                error = _collect(forms[variant], 1)
                part += 1
                event.update(part=part, calls=1)
                emit({**event, "error": error} if error else event)
    emit({"event": "done"})


def _valid_cases(
    backend: Any, share: Any, loaded: Any
) -> Iterator[tuple[str, int, dict[str, Callable[[], Any]] | None]]:
    """(case, tokens, forms) of every case of ``share`` in its order, forms None where the
    case failed validation; the backend's ``after_case`` runs once the caller is done with
    a valid case's forms."""
    for tokens, case in backend.cases(share):
        forms, row = backend.case_calls(share, loaded, case, tokens)
        if row is not None and not row.get("ok"):
            yield case, tokens, None
            continue
        yield case, tokens, forms
        backend.after_case(share)


def _call_each_once(backend: Any, share: Any, loaded: Any) -> None:
    """Every form of every valid case of ``share`` called once, uncounted (``prepare``):
    the same walk as the counted process's."""
    for _case, _tokens, forms in _valid_cases(backend, share, loaded):
        for call in (forms or {}).values():
            with contextlib.suppress(Exception):  # the counted process records it
                call()


def main(argv: list[str]) -> int:
    """Count the forms of the spec file ``argv[0]``; return the exit code."""
    events = _event_stream()

    def emit(event: dict[str, Any]) -> None:
        events.write(json.dumps(event) + "\n")

    try:
        if len(argv) != 1:
            raise EmbedbenchError("usage: python -m embedbench.counting SPEC_FILE (JSON)")
        count_forms(json.loads(Path(argv[0]).read_text(encoding="utf-8")), emit)
    except EmbedbenchError as exc:
        emit({"event": "error", "kind": "usage", "message": one_line(exc)})
        return EXIT_USAGE
    except Exception as exc:
        traceback.print_exc()
        emit({"event": "error", "kind": "crash", "message": f"{type(exc).__name__}: {exc}"})
        return EXIT_CRASH
    finally:
        events.flush()
    return EXIT_OK


if __name__ == "__main__":
    exit_now(main(sys.argv[1:]))
