"""Shared fixtures: a small synthetic checkpoint with the real vocabulary and token ids;
and the test tiers (markers unit, e2e, notebook, integration, browser; see TIERS)."""

import atexit
import os
import shutil
import tempfile
from pathlib import Path

import pytest

from embedbench.omni import synthetic

SMALL_HIDDEN = 32


def _session_dir(prefix: str) -> str:
    """A private directory for this test session, removed when the session ends."""
    where = tempfile.mkdtemp(prefix=prefix)
    atexit.register(shutil.rmtree, where, ignore_errors=True)
    return where


# Runs take a host-wide lock; a private lock dir keeps this test session (and the
# subprocesses it starts) from colliding with another session on the same machine.
os.environ["EMBEDBENCH_LOCK_DIR"] = _session_dir("embedbench-test-lock-")
# Short guard windows (contention and iowait; default 0.25 s, 0.1 s between workers):
# runs under test are --allow-busy or checked against fakes, so they need not sleep a
# second per run. Tests of the windows themselves pass them explicitly or unset this.
os.environ["EMBEDBENCH_CONTENTION_WINDOW_S"] = "0.02"
# A small buffer for the memory ceiling each run measures first (default: 8 last-level
# caches, up to 256 MiB, about half a second): runs under test never report the host's.
os.environ["EMBEDBENCH_CEILING_BUFFER_MIB"] = "4"
# The stored reference of this host's quiet memory level: never the user's own (the
# session-wide runs write here; every test gets an empty one of its own, below).
os.environ["EMBEDBENCH_HOST_REFERENCE"] = str(
    Path(_session_dir("embedbench-test-hostref-")) / "host-reference.json"
)


@pytest.fixture(autouse=True)
def _own_host_reference(tmp_path_factory: pytest.TempPathFactory, monkeypatch) -> None:
    """Every test starts with no stored reference of this host's quiet memory level, so a
    run under test is never judged against another test's runs (a test of the reference
    sets its own)."""
    where = tmp_path_factory.mktemp("hostref") / "host-reference.json"
    monkeypatch.setenv("EMBEDBENCH_HOST_REFERENCE", str(where))


# Every test module's tier (docs/development.md, "Test tiers": `make test-unit` runs `-m unit`):
#   unit         fast (the tier runs in well under a minute), never runs the harness
#   e2e          runs the harness (`embedbench run`, `run()`, the self-test, in process or
#                as `python -m embedbench`), or takes seconds end to end without it: the
#                seeded calibration simulations (test_intervals), a real busy core, a
#                CLI subprocess
#   notebook     executes the notebooks through papermill
#   integration  the real vLLM-Omni code in its CPU venv (scripts/vllm-omni-cpu-env.sh)
#   browser      the offline HTML in Debian's headless chromium (skipped without one)
# A test that uses the `small_run_dir` fixture (a harness run) is e2e wherever it lives; a
# test's own tier marker (`@pytest.mark.e2e`) overrides its module's.
TIERS = {
    "unit": [
        *("test_allocator.py", "test_checkpoint.py", "test_config.py", "test_contention.py"),
        *("test_diagnostics.py", "test_freshness.py", "test_gate.py", "test_gitsource.py"),
        *("test_hostlock.py", "test_ioguard.py", "test_isolation.py", "test_results.py"),
        *("test_paired_benchmark.py", "test_reference_target.py", "test_scenarios.py"),
        *("test_stats.py", "test_sysinfo.py", "test_timing.py", "test_validation.py"),
        *("test_blocks.py", "test_errors.py", "test_markdown.py", "test_readme_parameters.py"),
        *("test_layout.py", "test_probe.py", "test_nvml.py"),
        *("test_families.py", "test_qwen3_reference.py", "test_stability.py"),
        "test_neighbour.py",
        "test_host_reference.py",
        "test_sim.py",  # the simulated host: the pipeline in process, no real timing
        "test_sim_selftest.py",  # the self-test on the simulated host: seconds, no real timing
        "test_parentwatch.py",  # the parent meter on this process's own I/O: no run
        "test_preemption.py",  # the preempted share, on records built in memory
        "test_exiting.py",  # exit_now in a subprocess: no run
        "test_import_cost.py",  # subprocess imports only: no run
        "test_figures.py",  # runs built in memory: no harness run
        "test_interactive.py",  # the figures' tables and charts, from runs built in memory
        "test_prcomment.py",  # the PR comment of runs built in memory
        "test_limits.py",  # what a run does not establish, on runs built in memory
        "test_one_estimator.py",
        "test_outlier_workers.py",  # seeded simulations and in-memory rows: no harness run
        "test_makefile.py",  # make's own lines, papermill echoed: no run, no notebook
        "test_gpu_check.py",  # gpu_check.sh's core pick and report on fakes: no run
        "test_cli_docs.py",  # docs/cli.md against the parsers: no run
        "test_docs.py",  # links, fenced commands and make targets of README.md and docs/
        "test_ledger.py",  # one call's counted work on the replica and planted operators
        "test_work_report.py",  # work.json, its table, sentence and gate, built in memory
        "test_callgrind.py",  # callgrind's dumps, hand-written; the refusal without valgrind
        "test_bandwidth.py",  # the memory ceiling on a simulated run and a tiny copy; rates
        "test_work_figures.py",  # work against time and the operators, runs built in memory
    ],
    "e2e": [
        *("test_bad_inputs.py", "test_benchmarks_smoke.py", "test_cli.py", "test_interrupts.py"),
        "test_gpu_check_runs.py",  # benchmarks/gpu_check.sh: dry runs, on the CPU, in an image
        *("test_intervals.py", "test_report.py", "test_run_guards.py", "test_schema_compat.py"),
        *("test_selftest.py", "test_windows.py", "test_workers.py", "test_quiet_parent.py"),
        "test_interference.py",  # neighbours and bursts on the simulated host: seconds
        "test_torch_free.py",  # CLI subprocesses with torch blocked; its notebook test: notebook
        "test_paired_factory.py",  # a factory's callables in worker processes; refusals: unit
        "test_optional_deps.py",  # runs without platformdirs and jsonschema; the writer: unit
        "test_third_family.py",  # a test-only family: synthesized, run, reported, compared
        "test_promises.py",  # hundreds of seeded runs on the simulated host: about a minute
        "test_work_run.py",  # the ledger of real runs and pairs, its report and its gate
        "test_counts.py",  # --counts under valgrind, twice, on the small table: about a minute
    ],
    "notebook": ["test_notebooks.py"],
    "integration": ["test_vllm_omni_integration.py"],
    "browser": ["test_browser.py"],
}
MODULE_TIER = {module: tier for tier, modules in TIERS.items() for module in modules}
# `make test` spreads the tests over two processes (pytest-xdist, --dist loadscope): all
# the tests of a module run in one process, so that each module-scoped fixture (seeded
# simulations, the real code's checks, a browser, valgrind) is built once. Modules go out
# in collection order, each process taking the next when it is done, so the slowest
# modules are collected first (each 30 s or more on a 2-core machine): the processes
# then end together, rather than one finishing a long module alone.
SLOWEST_FIRST = (
    *("test_vllm_omni_integration.py", "test_benchmarks_smoke.py", "test_promises.py"),
    *("test_gpu_check_runs.py", "test_notebooks.py", "test_browser.py", "test_counts.py"),
    *("test_run_guards.py", "test_cli.py", "test_schema_compat.py", "test_torch_free.py"),
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Give every test exactly one tier marker: its own, else e2e for a harness run's
    fixture, else its module's (a module missing from TIERS is an error, not a guess);
    then put the modules of ``SLOWEST_FIRST`` first, in its order."""
    for item in items:
        module = item.path.name
        if any(m.name in TIERS for m in item.own_markers):
            continue
        if module not in MODULE_TIER:
            raise pytest.UsageError(
                f"tests/{module} has no tier: add it to TIERS in tests/conftest.py"
            )
        tier = "e2e" if "small_run_dir" in item.fixturenames else MODULE_TIER[module]
        item.add_marker(getattr(pytest.mark, tier))
    rank = {module: i for i, module in enumerate(SLOWEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))


@pytest.fixture(scope="session")
def small_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 152064 x 32 bf16 synthetic checkpoint (two shards + index), built once per session."""
    return synthetic.write_synthetic_checkpoint(
        tmp_path_factory.mktemp("ckpt") / "small", hidden_size=SMALL_HIDDEN
    )


@pytest.fixture(scope="session")
def small_run_dir(small_checkpoint: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A complete quick run (all six cases, 300 tokens, 6 blocks in 3 workers), small checkpoint."""
    from embedbench import RunConfig, run

    out = tmp_path_factory.mktemp("runs") / "quick"
    config = RunConfig(
        model=str(small_checkpoint),
        lengths=300,
        warmup=2,
        blocks=6,
        iterations=3,
        processes=3,
        output_dir=str(out),
        allow_busy=True,
    )
    run(config, progress=False, log=lambda _message: None)
    return out
