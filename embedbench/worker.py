"""A worker process of ``embedbench run``: ``python -m embedbench.worker`` (not for users).

It reads one ``measure.Share`` as JSON on stdin, measures it in this fresh process, and
writes the events of ``measure.measure_share`` to stdout, one JSON object per line.
Anything else that prints (torch, vLLM logging) is sent to stderr, so the event stream
stays clean. Ctrl-C or SIGTERM stops it after the current block (exit 130); a bad input
exits 2 with an ``error`` event of kind ``usage``; any other failure exits 1 with an
``error`` event of kind ``crash`` (and the traceback on stderr).
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from typing import Any, TextIO

from embedbench.errors import EmbedbenchError, one_line
from embedbench.harness.interrupts import stop_requests
from embedbench.measure import Share, measure_share

EXIT_OK = 0
EXIT_CRASH = 1
EXIT_USAGE = 2
EXIT_STOPPED = 130


def _event_stream() -> TextIO:
    """A private copy of stdout for events; fd 1 itself then points at stderr."""
    stream = os.fdopen(os.dup(1), "w", encoding="utf-8", buffering=1)
    os.dup2(2, 1)
    return stream


def main() -> int:
    """Measure the share given on stdin; return the exit code."""
    events = _event_stream()

    def emit(event: dict[str, Any]) -> None:
        events.write(json.dumps(event) + "\n")

    try:
        share = Share.from_json(json.loads(sys.stdin.read()))
        with stop_requests() as stop:
            measure_share(share, emit, check_stop=stop.check)
    except KeyboardInterrupt as exc:
        emit({"event": "stopped", "reason": one_line(exc)})
        return EXIT_STOPPED
    except EmbedbenchError as exc:
        emit({"event": "error", "kind": "usage", "message": one_line(exc)})
        return EXIT_USAGE
    except Exception as exc:
        traceback.print_exc()
        emit(
            {
                "event": "error",
                "kind": "crash",
                "message": f"{type(exc).__name__}: {one_line(exc)}",
            }
        )
        return EXIT_CRASH
    finally:
        events.flush()
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
