"""What one call does, counted exactly: the per-call ledger of a form (docs/format.md,
"work.json").

``count_work(call, device)`` runs ``call()`` once, outside any timed window, under a
``TorchDispatchMode`` that sees every aten operator it dispatches, and returns a
``Ledger``:

- ``ops``: operator name (``aten.embedding``) → calls;
- ``bytes_read`` and ``bytes_written``: from the sizes of each operator's tensors, the
  inputs read and the outputs written (``op_bytes`` per operator). A view reads and
  writes nothing; a gather (``GATHERS``) reads its indices and the rows it returns, not
  its whole table; an in-place scatter (``SCATTERS``) writes the values it puts;
- ``bytes_allocated``: the storages of outputs that share no input's storage;
- ``syncs``: the operators that make the host wait for a device (``SYNCS`` on a device
  tensor, a data-dependent boolean index on a device, a copy from a device to the CPU);
  none on the CPU;
- ``kernels``: on CUDA, the device kernels the call launched (the profiler's CUDA
  activity, copies and memsets left out); None elsewhere.

It counts what the call dispatches under the caller's grad mode, so it is taken where the
timed calls run (inside ``isolation.isolated``: inference mode). The counter knows no
model; the same code gives the same ledger, which ``merge_workers`` checks across worker
processes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

__all__ = [
    "CALLS_PER_LEDGER",
    "COUNTED",
    "GATHERS",
    "SCATTERS",
    "SYNCS",
    "Ledger",
    "LedgerMode",
    "count_pair",
    "count_work",
    "differing_fields",
    "merge_workers",
]

# Operators that read their first argument (a table) only where indexed: they read their
# other inputs and the rows they return.
# The untimed calls of each variant that counting its work takes, before its warm-up.
CALLS_PER_LEDGER = 1
GATHERS = frozenset(
    {
        "aten.embedding",
        "aten.index",
        "aten.index_select",
        "aten.gather",
        "aten.take",
        "aten.masked_select",
    }
)
# In-place operators that write only the values they put into their first argument: the
# position of those values among the arguments.
SCATTERS: Mapping[str, int] = {
    "aten.index_put_": 2,
    "aten._index_put_impl_": 2,
    "aten.masked_scatter_": 2,
    "aten.index_copy_": 3,
    "aten.scatter_": 3,
}
# Operators whose result the host must wait for when their input is on a device.
SYNCS = frozenset(
    {
        "aten.item",
        "aten._local_scalar_dense",
        "aten.is_nonzero",
        "aten.equal",
        "aten.nonzero",
        "aten.nonzero_numpy",
        "aten.masked_select",
        "aten._unique",
        "aten._unique2",
        "aten.unique_dim",
        "aten.unique_consecutive",
    }
)
# Indexing with a boolean mask on a device computes the mask's nonzero first.
_MASK_INDEXING = frozenset(
    {"aten.index", "aten.index_put", "aten.index_put_", "aten._index_put_impl_"}
)
# The counted quantities of a ledger, in the order the report and the gate show them.
COUNTED = ("ops", "bytes_read", "bytes_written", "bytes_allocated", "syncs", "kernels")


@dataclass
class Ledger:
    """One call's counted work (see the module doc); ``to_json`` is a work.json row's."""

    ops: dict[str, int] = field(default_factory=dict)
    op_bytes: dict[str, dict[str, int]] = field(default_factory=dict)
    bytes_read: int = 0
    bytes_written: int = 0
    bytes_allocated: int = 0
    syncs: int = 0
    kernels: int | None = None

    def to_json(self) -> dict[str, Any]:
        """Plain JSON: operators sorted by name."""
        return {
            "ops": dict(sorted(self.ops.items())),
            "op_bytes": {name: dict(self.op_bytes[name]) for name in sorted(self.op_bytes)},
            "bytes_read": self.bytes_read,
            "bytes_written": self.bytes_written,
            "bytes_allocated": self.bytes_allocated,
            "syncs": self.syncs,
            "kernels": self.kernels,
        }


def _nbytes(tensor: torch.Tensor) -> int:
    return tensor.numel() * tensor.element_size()


def _storage(tensor: torch.Tensor) -> int:
    """The tensor's storage, by address (a tensor without one stands for itself)."""
    try:
        return tensor.untyped_storage().data_ptr()
    except (RuntimeError, NotImplementedError):
        return id(tensor)


def _storage_bytes(tensor: torch.Tensor) -> int:
    try:
        return tensor.untyped_storage().nbytes()
    except (RuntimeError, NotImplementedError):
        return _nbytes(tensor)


def _tensors(tree: Any) -> list[torch.Tensor]:
    """The distinct tensors in ``tree`` (arguments or results), in order."""
    seen: dict[int, torch.Tensor] = {}
    for leaf in tree_leaves(tree):
        if isinstance(leaf, torch.Tensor):
            seen.setdefault(id(leaf), leaf)
    return list(seen.values())


def _mutates(func: Any) -> bool:
    return any(a.alias_info is not None and a.alias_info.is_write for a in func._schema.arguments)


def _on_device(tensor: torch.Tensor) -> bool:
    return tensor.device.type not in ("cpu", "meta")


class LedgerMode(TorchDispatchMode):
    """Counts every aten operator dispatched inside it into ``ledger``."""

    def __init__(self) -> None:
        super().__init__()
        self.ledger = Ledger()

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        # Nothing compiles inside this mode: without this, torch wraps the handler to
        # keep Dynamo out, importing torch._dynamo (about a second) at its first call.
        return False

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[override]
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        self._count(func, args, kwargs, out)
        return out

    def _count(self, func: Any, args: tuple, kwargs: dict, out: Any) -> None:
        name = str(func.overloadpacket)
        inputs, outputs = _tensors((args, kwargs)), _tensors(out)
        read, written, allocated = _bytes(name, func, args, inputs, outputs)
        ledger = self.ledger
        ledger.ops[name] = ledger.ops.get(name, 0) + 1
        moved = ledger.op_bytes.setdefault(name, {"read": 0, "written": 0})
        moved["read"] += read
        moved["written"] += written
        ledger.bytes_read += read
        ledger.bytes_written += written
        ledger.bytes_allocated += allocated
        ledger.syncs += _syncs(name, args, inputs, outputs)


def _bytes(
    name: str,
    func: Any,
    args: tuple,
    inputs: list[torch.Tensor],
    outputs: list[torch.Tensor],
) -> tuple[int, int, int]:
    """(read, written, allocated) bytes of one operator call."""
    storages = {_storage(t) for t in inputs}
    fresh = {_storage(t): t for t in outputs if _storage(t) not in storages}
    mutates = _mutates(func)
    if outputs and not fresh and not mutates:  # a view, or a conversion that was a no-op
        return 0, 0, 0
    table = args[0] if args and isinstance(args[0], torch.Tensor) else None
    if name in GATHERS and table is not None:
        read = sum(_nbytes(t) for t in inputs if t is not table) + sum(map(_nbytes, outputs))
    elif name in SCATTERS and mutates and table is not None:
        read = sum(_nbytes(t) for t in inputs if t is not table)
    else:
        read = sum(map(_nbytes, inputs))
    source = SCATTERS.get(name)
    values = args[source] if source is not None and len(args) > source else None
    if isinstance(values, torch.Tensor) and mutates:
        written = _nbytes(values)
    else:
        written = sum(map(_nbytes, outputs))
    allocated = sum(_storage_bytes(t) for t in fresh.values())
    return read, written, allocated


def _syncs(name: str, args: tuple, inputs: list[torch.Tensor], outputs: list[torch.Tensor]) -> int:
    """1 when the host waits for a device in this operator call, else 0."""
    on_device = [t for t in inputs if _on_device(t)]
    if not on_device:
        return 0
    if name in SYNCS:
        return 1
    if name in _MASK_INDEXING and any(
        t.dtype == torch.bool and _on_device(t) for t in _tensors(args[1:2])
    ):
        return 1
    to_host = any(t.device.type == "cpu" for t in outputs)
    return 1 if to_host else 0


def _kernels(call: Callable[[], Any], device: torch.device) -> int:
    """The CUDA kernels ``call()`` launches on ``device`` (copies and memsets left out)."""
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize(device)
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        call()
        torch.cuda.synchronize(device)
    return sum(
        1
        for event in prof.events()
        if event.device_type == DeviceType.CUDA and not event.name.startswith(("Memcpy", "Memset"))
    )


def count_work(call: Callable[[], Any], device: torch.device | str = "cpu") -> Ledger:
    """The ledger of one ``call()`` (see the module doc); on CUDA the call runs inside the
    profiler too, for ``kernels``."""
    dev = torch.device(device)
    mode = LedgerMode()

    def counted() -> None:
        with mode:
            call()

    if dev.type == "cuda":
        mode.ledger.kernels = _kernels(counted, dev)
    else:
        counted()
    return mode.ledger


def count_pair(
    calls: Mapping[str, Callable[[], Any]], device: torch.device | str = "cpu"
) -> dict[str, dict[str, Any]]:
    """Each variant's ledger as JSON, ``CALLS_PER_LEDGER`` call each, in the order given."""
    return {name: count_work(call, device).to_json() for name, call in calls.items()}


def differing_fields(first: Mapping[str, Any], other: Mapping[str, Any]) -> list[str]:
    """The counted fields (``op_bytes`` too) on which two ledgers differ."""
    return [key for key in (*COUNTED, "op_bytes") if first.get(key) != other.get(key)]


def merge_workers(
    by_worker: Mapping[int, Mapping[str, Mapping[str, Any]] | None],
) -> dict[str, dict[str, Any]]:
    """One ledger per variant from several workers' (None: that worker's call failed): the
    lowest worker's, with ``workers`` (those that counted), ``workers_agree`` and, where
    they do not, ``differing`` (worker → the fields that differ, or ``error``)."""
    counted = sorted(w for w, ledger in by_worker.items() if ledger is not None)
    failed = sorted(w for w, ledger in by_worker.items() if ledger is None)
    if not counted:
        return {}
    first = by_worker[counted[0]]
    assert first is not None
    merged = {}
    for variant, ledger in first.items():
        differing: dict[str, list[str]] = {str(w): ["error"] for w in failed}
        for worker in counted[1:]:
            other = (by_worker[worker] or {}).get(variant, {})
            fields = differing_fields(ledger, other)
            if fields:
                differing[str(worker)] = fields
        row = {**ledger, "workers": counted, "workers_agree": not differing}
        if differing:
            row["differing"] = dict(sorted(differing.items(), key=lambda kv: int(kv[0])))
        merged[variant] = row
    return merged
