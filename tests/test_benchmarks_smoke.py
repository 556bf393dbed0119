"""Smoke test of benchmarks/: each script runs in --quick mode and prints a markdown table.

No timing is asserted: the scripts are run by hand for evidence (docs/PERFORMANCE.md);
this only checks that they still run against the package. Small tables (hidden 32) and
the conftest's small checkpoint keep the whole module at well under a minute.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "benchmarks"
TABLE_RULE = "| ---"


def _run(args: list[str], tmp_path: Path, timeout: float = 120) -> subprocess.CompletedProcess:
    # Own cache and host-lock directory: never collide with someone's real run.
    env = dict(
        os.environ,
        EMBEDBENCH_CACHE=str(tmp_path / "cache"),
        EMBEDBENCH_LOCK_DIR=str(tmp_path),
    )
    return subprocess.run(
        [sys.executable, *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


SCRIPTS = {
    "precision": ["--repeats", "2", "--hidden", "32"],
    "accuracy": ["--delays", "5", "--hidden", "32"],
    "overhead": ["--calls", "2000"],
    "loading": ["--hidden", "32", "--modes", "embedbench", "--caches", "cold"],
    "profile_cases": ["--hidden", "32", "--cases", "text", "interleaved"],
    "cli_startup": [],
}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_script_quick(name: str, tmp_path: Path) -> None:
    out = tmp_path / f"{name}.json"
    res = _run([str(BENCH / f"{name}.py"), "--quick", "--json", str(out), *SCRIPTS[name]], tmp_path)
    assert res.returncode == 0, res.stderr[-2000:]
    assert TABLE_RULE in res.stdout
    assert out.is_file()


@pytest.mark.slow
def test_walltime_quick(small_checkpoint: Path, tmp_path: Path) -> None:
    res = _run(
        [
            str(BENCH / "walltime.py"),
            "--quick",
            "--no-notebook",
            "--model",
            str(small_checkpoint),
            "--lengths",
            "1172",
            "--blocks",
            "6",
        ],
        tmp_path,
    )
    assert res.returncode == 0, res.stderr[-2000:]
    assert TABLE_RULE in res.stdout


def test_gpu_check_refuses_without_cuda(tmp_path: Path) -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("CUDA is available: the refusal path cannot be shown here")
    res = subprocess.run(
        ["bash", str(BENCH / "gpu_check.sh")],
        cwd=ROOT,
        env=dict(os.environ, PYTHON=sys.executable, OUT=str(tmp_path / "out")),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert res.returncode == 2
    assert "CUDA is not available" in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_lm_shim_quick(small_checkpoint: Path, tmp_path: Path) -> None:
    out = tmp_path / "lm_shim.json"
    res = _run(
        [
            str(BENCH / "lm_shim.py"),
            "--quick",
            "--json",
            str(out),
            "--",
            *("--model", str(small_checkpoint), "--cases", "text", "audio", "--allow-busy"),
        ],
        tmp_path,
    )
    assert res.returncode == 0, res.stderr[-2000:]
    assert TABLE_RULE in res.stdout
    runs = json.loads(out.read_text())["runs"]
    assert [r["shim"] for r in runs] == ["flat", "production"]
    assert all(r["embedding_class"].endswith("ReferenceVocabEmbedding") for r in runs)


def _gpu_check_python_snippets() -> list[str]:
    """The Python each `"$PYTHON" - <<'EOF'` heredoc of gpu_check.sh feeds the interpreter."""
    text = (BENCH / "gpu_check.sh").read_text()
    parts = re.split(r"<<'EOF'[^\n]*\n", text)[1:]
    return [part.split("\nEOF\n", 1)[0] for part in parts]


def test_gpu_check_python_steps_need_no_implicit_imports() -> None:
    """Run isolated (-I -S: no site, nothing pre-imported) as Python 3.12+ behaves, where
    `import importlib` alone leaves importlib.util unset (the crash of issue 15)."""
    snippets = _gpu_check_python_snippets()
    assert len(snippets) >= 3
    dependency_check = next(s for s in snippets if "find_spec" in s)
    res = subprocess.run(
        [sys.executable, "-I", "-S", "-c", dependency_check],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert res.returncode == 0, res.stderr
    for snippet in snippets:
        compile(snippet, "gpu_check.sh", "exec")


@pytest.mark.slow
def test_gpu_check_dry_run_on_the_cpu_and_a_rerun_is_refused(
    small_checkpoint: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    env = dict(os.environ, PYTHON=sys.executable, OUT=str(out), GPU_CHECK_DEVICE="cpu")
    flags = ["--model", str(small_checkpoint), "--cases", "text", "audio", "--allow-busy"]
    flags += ["--warmup", "2", "--blocks", "4", "--iterations", "3", "--processes", "2"]

    def check() -> subprocess.CompletedProcess:
        return subprocess.run(
            ["bash", str(BENCH / "gpu_check.sh"), *flags],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )

    first = check()
    assert first.returncode == 0, first.stderr[-2000:]
    report = (out / "gpu_check.md").read_text()
    assert "DRY RUN ON THE CPU" in report and "least busy allowed core" in report
    assert "#### The PR's table (" in report and "H100" in report and "| Audio |" in report
    written = (out / "run" / "metadata.json").read_bytes()

    again = check()
    assert again.returncode == 2
    assert again.stderr.strip().splitlines() == [
        f"gpu_check: {out / 'run'} exists from an earlier check; "
        "set OUT to a new folder (or remove that one)"
    ]
    assert (out / "run" / "metadata.json").read_bytes() == written  # nothing overwritten
