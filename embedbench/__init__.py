"""embedbench: paired host-latency microbenchmark of Qwen2.5-Omni's embed_input_ids.

The public API: ``RunConfig``, ``run``, ``load_results``, ``paired_benchmark``.
"""

from embedbench.config import RunConfig
from embedbench.errors import CheckpointError, ConfigError, EmbedbenchError, OutputDirError
from embedbench.results import RunResult, load_results
from embedbench.runner import PairedResult, paired_benchmark, run

__all__ = [
    "CheckpointError",
    "ConfigError",
    "EmbedbenchError",
    "OutputDirError",
    "PairedResult",
    "RunConfig",
    "RunResult",
    "load_results",
    "paired_benchmark",
    "run",
]
