"""What the machine says about itself: CPU frequency, versions, allow-listed environment.

Nothing here invents a number: a value that cannot be read is ``None`` and the
source says ``"unavailable"``.
"""

from __future__ import annotations

import fnmatch
import os
import platform
import re
import sys
from collections.abc import Callable, Mapping
from importlib import metadata
from pathlib import Path

import torch

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
    return {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
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
