"""Valgrind client requests from Python, without a compiler: callgrind's
``CALLGRIND_START_INSTRUMENTATION``, which torch does not expose.

A client request is a no-op instruction sequence that valgrind recognises while it
translates the code (valgrind.h's ``VALGRIND_DO_CLIENT_REQUEST``): four rotations of a
register by 128 bits in all, then an exchange of a register with itself, with the address
of the request's six words in another. ``_AMD64`` is that sequence as a function of the
System V calling convention (``request(args, default) -> result``), put in an executable
page and called through ctypes. Natively it returns ``default``: nothing happens.

Only x86-64 Linux has it here; elsewhere ``available()`` is False and the counting
process is instrumented from its start instead (slower, the same counts).
"""

from __future__ import annotations

import ctypes
import mmap
import platform
import sys
from collections.abc import Callable

__all__ = ["available", "running_on_valgrind", "start_instrumentation"]

_AMD64 = bytes.fromhex(
    "4889f8"  # mov rax, rdi: the request's words
    "4889f2"  # mov rdx, rsi: the result where valgrind is not there
    "48c1c703"  # rol rdi, 3
    "48c1c70d"  # rol rdi, 13
    "48c1c73d"  # rol rdi, 61
    "48c1c733"  # rol rdi, 51
    "4887db"  # xchg rbx, rbx: rdx = the request's result
    "4889d0"  # mov rax, rdx
    "c3"  # ret
)
# valgrind.h and callgrind.h: the core's and callgrind's request codes.
_RUNNING_ON_VALGRIND = 0x1001
_CALLGRIND_BASE = (ord("C") << 24) | (ord("T") << 16)
_START_INSTRUMENTATION = _CALLGRIND_BASE + 4

_Request = Callable[[int, int], int]
_cache: list[tuple[mmap.mmap, _Request] | None] = []


def _function() -> _Request | None:
    """The request function (built once), or None where it cannot be."""
    if not _cache:
        _cache.append(_build())
    built = _cache[0]
    return None if built is None else built[1]


def _build() -> tuple[mmap.mmap, _Request] | None:
    if not sys.platform.startswith("linux") or platform.machine() not in ("x86_64", "AMD64"):
        return None
    try:
        page = mmap.mmap(-1, mmap.PAGESIZE, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
    except (OSError, ValueError):  # W^X hardening: no writable executable page
        return None
    page.write(_AMD64)
    address = ctypes.addressof(ctypes.c_char.from_buffer(page))
    function = ctypes.CFUNCTYPE(ctypes.c_uint64, ctypes.c_void_p, ctypes.c_uint64)(address)
    return page, function


def available() -> bool:
    """Whether this process can make client requests (x86-64 Linux, an executable page)."""
    return _function() is not None


def _request(code: int, default: int = 0) -> int:
    function = _function()
    if function is None:
        return default
    words = (ctypes.c_uint64 * 6)(code, 0, 0, 0, 0, 0)
    return int(function(ctypes.addressof(words), default))


def running_on_valgrind() -> int:
    """How many valgrinds this process runs under (0 natively, or where requests are not
    ``available``)."""
    return _request(_RUNNING_ON_VALGRIND)


def start_instrumentation() -> bool:
    """Ask callgrind to start instrumenting (a no-op natively and under other tools); True
    when valgrind answered the request."""
    if not running_on_valgrind():
        return False
    _request(_START_INSTRUMENTATION)
    return True
