"""What the machine says about itself: CPU frequency, versions, allow-listed environment.

Nothing here invents a number: a value that cannot be read is ``None`` and the
source says ``"unavailable"``. ``provenance()`` gathers everything a result
needs to be traced back: CPU model, governor, scaling driver, turbo state,
frequency source, load, versions, device, checkpoint fingerprint and the
allow-listed environment (never a secret).
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import os
import platform
import re
import sys
from collections.abc import Callable, Mapping
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # torch is imported where it is used: the report side runs without it
    import torch

from embedbench.safetensors_header import header_entry

SYSFS_CPU = Path("/sys/devices/system/cpu")
PROC_CPUINFO = Path("/proc/cpuinfo")

ENV_ALLOW = ("OMP_*", "MKL_*", "CUDA_VISIBLE_DEVICES", "PYTORCH_*", "VLLM_*")
ENV_DENY = re.compile(r"TOKEN|KEY|SECRET|PASSWORD|PASSWD|CREDENTIAL", re.IGNORECASE)


def _sysfs_reader(core: int) -> Callable[[], float | None] | None:
    path = SYSFS_CPU / f"cpu{core}" / "cpufreq" / "scaling_cur_freq"

    def read() -> float | None:
        try:
            return int(path.read_text().strip()) / 1000.0
        except (OSError, ValueError):
            return None

    return read if read() is not None else None


def _cpuinfo_mhz(core: int) -> float | None:
    try:
        text = PROC_CPUINFO.read_text()
    except OSError:
        return None
    current: int | None = None
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key = key.strip()
        if key == "processor":
            current = int(value.strip())
        elif key == "cpu MHz" and current == core:
            try:
                return float(value.strip())
            except ValueError:
                return None
    return None


def cpu_frequency_reader(core: int) -> tuple[str, Callable[[], float | None]]:
    """The best frequency source for ``core`` and a function reading MHz from it.

    Sources in order: ``sysfs`` (scaling_cur_freq), ``/proc/cpuinfo``, else
    ``unavailable`` with a reader that returns ``None``.
    """
    sysfs = _sysfs_reader(core)
    if sysfs is not None:
        return "sysfs", sysfs
    if _cpuinfo_mhz(core) is not None:
        return "/proc/cpuinfo", lambda: _cpuinfo_mhz(core)
    return "unavailable", lambda: None


def cpu_model() -> str | None:
    """The CPU model name from /proc/cpuinfo, or the platform's processor string."""
    try:
        for line in PROC_CPUINFO.read_text().splitlines():
            if line.lower().startswith("model name"):
                return line.partition(":")[2].strip()
    except OSError:
        pass
    return platform.processor() or None


def package_version(name: str) -> str | None:
    """Installed version of a distribution, or None."""
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def versions() -> dict[str, str | None]:
    """Versions that matter to the numbers."""
    try:
        import torch
    except ImportError:  # the report side, re-rendering on a machine without torch
        torch_version, cuda = package_version("torch"), None
    else:
        torch_version, cuda = torch.__version__, torch.version.cuda
    return {
        "python": platform.python_version(),
        "torch": torch_version,
        "cuda": cuda,
        "embedbench": package_version("embedbench"),
        "safetensors": package_version("safetensors"),
        "numpy": package_version("numpy"),
        "vllm": package_version("vllm"),
        "vllm-omni": package_version("vllm-omni"),
        "transformers": package_version("transformers"),
    }


def allowed_environment(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """Environment variables from the allow-list, minus anything that looks secret."""
    env = os.environ if environ is None else environ
    return {
        name: value
        for name, value in sorted(env.items())
        if any(fnmatch.fnmatchcase(name, pattern) for pattern in ENV_ALLOW)
        and not ENV_DENY.search(name)
    }


def device_name(device: torch.device) -> str:
    """A human name for the device that runs the lookups."""
    if device.type == "cuda":
        import torch

        return torch.cuda.get_device_name(device)
    return cpu_model() or "cpu"


def host_facts() -> dict[str, object]:
    """Machine facts for the metadata."""
    return {
        "cpu_model": cpu_model(),
        "platform": platform.platform(),
        "executable": sys.executable,
        "logical_cpus": os.cpu_count(),
    }


# --- provenance -----------------------------------------------------------------------------

FINGERPRINT_VERSION = "embedbench-fingerprint-v1"
INDEX_NAME = "model.safetensors.index.json"
# The safetensors format caps its JSON header at 100 MB.


def _read_text(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except (OSError, UnicodeDecodeError):
        return None


def _khz_to_mhz(text: str | None) -> float | None:
    try:
        return int(text) / 1000.0 if text is not None else None
    except ValueError:
        return None


def cpufreq_policy(core: int) -> dict[str, Any]:
    """Governor, scaling driver and min/max MHz of ``core`` from sysfs (None where absent)."""
    base = SYSFS_CPU / f"cpu{core}" / "cpufreq"
    return {
        "governor": _read_text(base / "scaling_governor"),
        "scaling_driver": _read_text(base / "scaling_driver"),
        "min_mhz": _khz_to_mhz(_read_text(base / "scaling_min_freq")),
        "max_mhz": _khz_to_mhz(_read_text(base / "scaling_max_freq")),
    }


def boost_state(core: int | None = None) -> dict[str, Any]:
    """Whether turbo/boost is enabled, and where that was read; None when unreadable.

    Sources in order: ``intel_pstate/no_turbo`` (1 = turbo off), the global
    ``cpufreq/boost`` (1 = on), the per-policy ``cpuN/cpufreq/boost``.
    """
    candidates: list[tuple[Path, bool]] = [
        (SYSFS_CPU / "intel_pstate" / "no_turbo", True),
        (SYSFS_CPU / "cpufreq" / "boost", False),
    ]
    if core is not None:
        candidates.append((SYSFS_CPU / f"cpu{core}" / "cpufreq" / "boost", False))
    for path, inverted in candidates:
        text = _read_text(path)
        if text in ("0", "1"):
            enabled = (text == "1") != inverted
            return {"turbo_enabled": enabled, "source": str(path)}
    return {"turbo_enabled": None, "source": "unavailable"}


def load_average() -> list[float] | None:
    """The 1, 5 and 15 minute load averages, or None where the OS has none."""
    try:
        return [float(x) for x in os.getloadavg()]
    except (OSError, AttributeError):
        return None


def _tree_size(root: Path) -> tuple[int, int]:
    total = files = 0
    for folder, _dirs, names in os.walk(root):
        for name in names:
            try:
                total += (Path(folder) / name).stat().st_size
                files += 1
            except OSError:
                continue
    return total, files


def checkpoint_fingerprint(model_dir: str | Path, shard: str | Path, key: str) -> dict[str, Any]:
    """Path, total size and a cheap fingerprint of a checkpoint (no tensor data is read).

    ``fingerprint`` = sha256 over a version tag, the sha256 of the index file's
    bytes (``none`` without an index), the shard's name, ``key`` and its
    safetensors header entry (dtype, shape, data offsets) as canonical JSON.
    What cannot be read is reported under ``error`` instead of a made-up value.
    """
    root = Path(model_dir).expanduser()
    shard_path = root / shard
    out: dict[str, Any] = {"path": str(root), "shard": shard_path.name, "key": key}
    total, files = _tree_size(root)
    out.update(total_bytes=total, files=files)
    try:
        index = root / INDEX_NAME
        index_sha = hashlib.sha256(index.read_bytes()).hexdigest() if index.is_file() else None
        entry = header_entry(shard_path, key)
    except (OSError, ValueError) as exc:
        return {
            **out,
            "index_sha256": None,
            "embedding_header": None,
            "fingerprint": None,
            "error": " ".join(str(exc).split()),
        }
    digest = hashlib.sha256()
    for part in (
        FINGERPRINT_VERSION,
        index_sha or "none",
        shard_path.name,
        key,
        json.dumps(entry, sort_keys=True, separators=(",", ":")),
    ):
        digest.update(part.encode() + b"\n")
    return {
        **out,
        "index_sha256": index_sha,
        "embedding_header": entry,
        "fingerprint": digest.hexdigest(),
        "error": None,
    }


HUGE_PAGE_BYTES = 2 * 2**20


def _smaps_huge_kb(address: int, smaps: Path = Path("/proc/self/smaps")) -> int | None:
    """AnonHugePages (kB) of the mapping that holds ``address``, or None if unreadable."""
    inside = False
    try:
        with smaps.open() as handle:
            for line in handle:
                head = line.split(maxsplit=1)[0]
                if "-" in head and not head.endswith(":"):
                    low, _, high = head.partition("-")
                    inside = int(low, 16) <= address < int(high, 16)
                elif inside and head == "AnonHugePages:":
                    return int(line.split()[1])
    except (OSError, ValueError):
        return None
    return None


def memory_placement(table: torch.Tensor) -> dict[str, Any]:
    """Where a CPU tensor landed: its address modulo 2 MiB and the transparent huge pages
    backing its mapping (None for device memory or when /proc cannot tell)."""
    if table.device.type != "cpu":
        return {"address_mod_2mib": None, "anon_huge_kb": None}
    address = table.data_ptr()
    return {"address_mod_2mib": address % HUGE_PAGE_BYTES, "anon_huge_kb": _smaps_huge_kb(address)}


def gpu_facts(device: str | torch.device) -> dict[str, Any] | None:
    """Name and compute capability of a CUDA device, or None for other devices."""
    import torch

    dev = torch.device(device)
    if dev.type != "cuda" or not torch.cuda.is_available():
        return None
    major, minor = torch.cuda.get_device_capability(dev)
    return {"name": torch.cuda.get_device_name(dev), "capability": f"{major}.{minor}"}


def provenance(
    cpu_core: int,
    device: str | torch.device,
    model_dir: str | Path,
    shard: str | Path,
    key: str,
) -> dict[str, Any]:
    """Everything needed to trace a number back to its machine, software and checkpoint."""
    import torch

    source, read_mhz = cpu_frequency_reader(cpu_core)
    dev = torch.device(device)
    try:
        affinity: list[int] | None = sorted(os.sched_getaffinity(0))
    except (OSError, AttributeError):
        affinity = None
    return {
        "cpu": {
            "model": cpu_model(),
            "core": cpu_core,
            "logical_cpus": os.cpu_count(),
            "affinity": affinity,
            "frequency_source": source,
            "mhz_now": read_mhz(),
            **cpufreq_policy(cpu_core),
            "boost": boost_state(cpu_core),
        },
        "load_average": load_average(),
        "platform": platform.platform(),
        "python": {
            "version": platform.python_version(),
            "implementation": platform.python_implementation(),
            "executable": sys.executable,
        },
        "versions": versions(),
        "device": {"type": dev.type, "name": device_name(dev), "gpu": gpu_facts(dev)},
        "checkpoint": checkpoint_fingerprint(model_dir, shard, key),
        "environment": allowed_environment(),
    }
