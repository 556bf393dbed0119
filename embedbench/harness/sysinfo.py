"""What the machine says about itself: CPU frequency, versions, allow-listed environment.

Nothing here invents a number: a value that cannot be read is ``None`` and the
source says ``"unavailable"``. ``provenance()`` gathers everything a result
needs to be traced back: CPU model, governor, scaling driver, turbo state,
frequency source, load, versions, device and the allow-listed environment (never a secret).
"""

from __future__ import annotations

import fnmatch
import os
import platform
import re
import sys
from collections.abc import Callable
from importlib import metadata
from pathlib import Path
from typing import Any

__all__ = [
    "ENV_ALLOW",
    "ENV_DENY",
    "PROC_CPUINFO",
    "SYSFS_CPU",
    "allowed_environment",
    "boost_state",
    "cpu_frequency_reader",
    "cpu_model",
    "cpufreq_policy",
    "host_facts",
    "last_level_cache_bytes",
    "load_average",
    "package_version",
    "provenance",
    "versions",
]

SYSFS_CPU = Path("/sys/devices/system/cpu")
PROC_CPUINFO = Path("/proc/cpuinfo")

# CUDA_* and TORCH_* too: CUDA_LAUNCH_BLOCKING=1 would make every launch synchronous.
ENV_ALLOW = ("OMP_*", "MKL_*", "CUDA_*", "PYTORCH_*", "TORCH_*", "VLLM_*")
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
    # torch's own answer where the run side has imported it; the report side never
    # imports torch (a laptop re-rendering may not have it) and reads the package data.
    torch = sys.modules.get("torch")
    if torch is None:
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


def allowed_environment() -> dict[str, str]:
    """Environment variables from the allow-list, minus anything that looks secret."""
    return {
        name: value
        for name, value in sorted(os.environ.items())
        if any(fnmatch.fnmatchcase(name, pattern) for pattern in ENV_ALLOW)
        and not ENV_DENY.search(name)
    }


def host_facts() -> dict[str, object]:
    """Machine facts for the metadata."""
    return {
        "cpu_model": cpu_model(),
        "platform": platform.platform(),
        "executable": sys.executable,
        "logical_cpus": os.cpu_count(),
    }


# --- provenance -----------------------------------------------------------------------------

# The safetensors format caps its JSON header at 100 MB.


def _cache_size_bytes(text: str | None) -> int | None:
    """sysfs cache sizes read like "266240K" or "32M"."""
    if not text:
        return None
    match = re.fullmatch(r"(\d+)([KMG]?)", text.strip())
    if match is None:
        return None
    return int(match.group(1)) * {"": 1, "K": 2**10, "M": 2**20, "G": 2**30}[match.group(2)]


def last_level_cache_bytes(core: int = 0) -> int | None:
    """The size of ``core``'s last-level cache from sysfs (None where sysfs does not say)."""
    found: dict[int, int] = {}
    for index in sorted((SYSFS_CPU / f"cpu{core}" / "cache").glob("index*")):
        level, size = _read_text(index / "level"), _cache_size_bytes(_read_text(index / "size"))
        if level and level.isdigit() and size:
            found[int(level)] = max(size, found.get(int(level), 0))
    return found[max(found)] if found else None


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


def provenance(cpu_core: int, device: dict[str, Any]) -> dict[str, Any]:
    """Everything needed to trace a number back to its machine and software.

    ``device`` is :func:`embedbench.harness.devices.describe`'s (torch lives there). The
    checkpoint's fingerprint is the caller's to add
    (:func:`embedbench.omni.checkpoint.fingerprint`): the harness knows no model.
    """
    source, read_mhz = cpu_frequency_reader(cpu_core)
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
        "device": device,
        "environment": allowed_environment(),
    }
