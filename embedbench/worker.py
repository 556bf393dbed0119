"""A worker process of ``embedbench run``: ``python -m embedbench.worker`` (not for users).

It reads one ``measure.Share`` as JSON from the first line of stdin, measures it in this
fresh process, and writes the events of ``measure.measure_share`` to stdout, one JSON
object per line. After each event of ``measure.HANDSHAKE_EVENTS`` it waits for one
``measure.ACK`` line on stdin (the parent has written what the event changes), so the
parent's writes never overlap its timing. Anything else that prints (torch, vLLM
logging) is sent to stderr, so the event stream stays clean. Ctrl-C or SIGTERM stops it
after the current block (exit 130), and so does a parent that is gone (stdin ends where
an acknowledgement was due, or stdout is closed); a bad input exits 2 with an ``error``
event of kind ``usage``; any other failure exits 1 with an ``error`` event of kind
``crash`` (and the traceback on stderr).
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from typing import Any, TextIO

from embedbench.errors import EmbedbenchError, one_line
from embedbench.harness.exiting import exit_now
from embedbench.harness.interrupts import RunInterrupted, stop_requests
from embedbench.measure import ACK, HANDSHAKE_EVENTS, Share, measure_share

__all__ = ["EXIT_CRASH", "EXIT_OK", "EXIT_STOPPED", "EXIT_USAGE", "main", "wait_for_ack"]

EXIT_OK = 0
EXIT_CRASH = 1
EXIT_USAGE = 2
EXIT_STOPPED = 130


def _event_stream() -> TextIO:
    """A private copy of stdout for events; fd 1 itself then points at stderr."""
    stream = os.fdopen(os.dup(1), "w", encoding="utf-8", buffering=1)
    os.dup2(2, 1)
    return stream


def wait_for_ack(stdin: TextIO) -> None:
    """Block until the parent's acknowledgement; its end of stdin stops this worker."""
    line = stdin.readline()
    if not line:
        raise RunInterrupted("stdin ended before the parent acknowledged (the parent is gone)")
    if line.strip() != ACK:
        raise RuntimeError(f"expected {ACK!r} from the parent on stdin, got {line.strip()!r}")


def _silence(events: TextIO) -> None:
    """Nobody reads the events any more: drop what is left instead of failing on it."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, events.fileno())
    os.close(devnull)


def main() -> int:
    """Measure the share given on stdin; return the exit code."""
    events = _event_stream()

    def emit(event: dict[str, Any]) -> None:
        try:
            events.write(json.dumps(event) + "\n")
        except BrokenPipeError:
            raise RunInterrupted("stdout closed (the parent is gone)") from None
        if event["event"] in HANDSHAKE_EVENTS:
            wait_for_ack(sys.stdin)

    def last(event: dict[str, Any]) -> None:
        try:
            events.write(json.dumps(event) + "\n")
        except OSError:  # the parent is gone (a broken pipe)
            _silence(events)

    try:
        share = Share.from_json(json.loads(sys.stdin.readline()))
        with stop_requests() as stop:
            measure_share(share, emit, check_stop=stop.check)
    except KeyboardInterrupt as exc:
        last({"event": "stopped", "reason": one_line(exc)})
        return EXIT_STOPPED
    except EmbedbenchError as exc:
        last({"event": "error", "kind": "usage", "message": one_line(exc)})
        return EXIT_USAGE
    except Exception as exc:
        traceback.print_exc()
        last(
            {
                "event": "error",
                "kind": "crash",
                "message": f"{type(exc).__name__}: {one_line(exc)}",
            }
        )
        return EXIT_CRASH
    finally:
        try:
            events.flush()
        except OSError:
            _silence(events)
    return EXIT_OK


if __name__ == "__main__":
    exit_now(main())
