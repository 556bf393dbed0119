"""Smoke test of benchmarks/: each script runs in --quick mode and prints a markdown table.

No timing is asserted: the scripts are run by hand for evidence (docs/PERFORMANCE.md);
this only checks that they still run against the package. Small tables (hidden 32) and
the conftest's small checkpoint keep the whole module at well under a minute.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
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
    env["GPU_CHECK_PROBE_FLAGS"] = "--hidden 64 --tokens 300"
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
    for family in ("qwen2.5-omni", "qwen3-omni"):  # the probe ran first, for both families
        assert f"probe: {family}, cpu, 300 tokens, hidden 64, all cases ok" in report
    written = (out / "run" / "metadata.json").read_bytes()

    again = check()
    assert again.returncode == 2
    assert again.stderr.strip().splitlines() == [
        f"gpu_check: {out / 'run'} exists from an earlier check; "
        "set OUT to a new folder (or remove that one)"
    ]
    assert (out / "run" / "metadata.json").read_bytes() == written  # nothing overwritten


# What benchmarks/gpu_wheels.sh fetches: embedbench's needs beyond a typical CUDA image.
NOT_IN_A_GPU_IMAGE = ("platformdirs", "jsonschema", "attr", "referencing", "rpds")


def _gpu_image_python(tmp_path: Path) -> Path:
    """An interpreter that sees this venv's packages minus NOT_IN_A_GPU_IMAGE (and their
    dist-info), as a CUDA image with torch, numpy, pandas, ... but not those would."""
    site = Path(sysconfig.get_paths()["purelib"])
    image = tmp_path / "image-site"
    image.mkdir()
    for entry in site.iterdir():
        name = entry.name.lower().replace("-", "_")
        if entry.suffix == ".pth" or name.startswith(
            ("attrs", "__editable__", "embedbench", *NOT_IN_A_GPU_IMAGE)
        ):
            continue
        (image / entry.name).symlink_to(entry)
    wrapper = tmp_path / "python"
    base = getattr(sys, "_base_executable", sys.executable)
    # -S: the base interpreter's own site-packages stay out; PYTHONPATH is still read.
    wrapper.write_text(
        f'#!/bin/sh\nPYTHONPATH="${{PYTHONPATH:+$PYTHONPATH:}}{image}" exec {base} -S "$@"\n'
    )
    wrapper.chmod(0o755)
    return wrapper


@pytest.mark.slow
def test_gpu_check_installs_what_the_image_lacks_from_carried_wheels_offline(
    small_checkpoint: Path, tmp_path: Path
) -> None:
    """gpu_wheels.sh fetches the wheels (here, with an index); gpu_check.sh then runs on an
    image without platformdirs and jsonschema with no index (PIP_NO_INDEX=1) and imports
    them from a copy of that folder."""
    wheels = tmp_path / "fetched"
    fetch = subprocess.run(
        ["bash", str(BENCH / "gpu_wheels.sh"), "--dest", str(wheels)],
        env=dict(os.environ, PYTHON=sys.executable),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert fetch.returncode == 0, fetch.stderr[-2000:]
    fetched = sorted(p.name.split("-")[0].lower() for p in wheels.glob("*.whl"))
    assert {"platformdirs", "jsonschema", "referencing", "rpds_py"} <= set(fetched)
    assert not {"torch", "numpy", "pandas", "scipy"} & set(fetched)

    python = _gpu_image_python(tmp_path)
    probe = (
        "import importlib.util as u; "
        "print([m for m in ('jsonschema', 'platformdirs', 'torch') if u.find_spec(m)])"
    )
    seen = subprocess.run([str(python), "-c", probe], capture_output=True, text=True)
    assert seen.stdout.strip() == "['torch']", seen.stderr  # the image: torch, not the two

    checkout = tmp_path / "checkout"  # a copy of the checkout carrying .whl/
    shutil.copytree(
        ROOT,
        checkout,
        ignore=shutil.ignore_patterns(
            ".venv", ".cache", ".git", ".whl", "embedbench-results", "*.egg-info"
        ),
    )
    shutil.copytree(wheels, checkout / ".whl")
    out = tmp_path / "out"
    scratch = tmp_path / "tmp"  # TMPDIR: where the temporary install folder goes
    scratch.mkdir()
    env = dict(os.environ, PYTHON=str(python), OUT=str(out), GPU_CHECK_DEVICE="cpu")
    env.update(
        TMPDIR=str(scratch),
        PIP_NO_INDEX="1",
        PIP_INDEX_URL="http://127.0.0.1:9/none",
        PIP_FIND_LINKS="",
    )
    env.pop("PYTHONPATH", None)
    flags = ["--model", str(small_checkpoint), "--cases", "audio", "--allow-busy"]
    flags += ["--warmup", "2", "--blocks", "4", "--iterations", "3", "--processes", "2"]
    res = subprocess.run(
        ["bash", str(checkout / "benchmarks" / "gpu_check.sh"), *flags],
        cwd=checkout,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert res.returncode == 0, res.stderr[-3000:]
    report = (out / "gpu_check.md").read_text()
    assert "- dependencies: platformdirs jsonschema installed from .whl/" in report
    meta = json.loads((out / "run" / "metadata.json").read_text())
    assert meta["status"] == "complete" and meta["device"] == "cpu"
    assert not list(scratch.glob("embedbench-gpu-check-deps.*"))  # removed on exit


def test_gpu_check_stops_before_timing_when_the_probe_fails(tmp_path: Path) -> None:
    out = tmp_path / "out"
    env = dict(os.environ, PYTHON=sys.executable, OUT=str(out), GPU_CHECK_DEVICE="cpu")
    env["GPU_CHECK_PROBE_FLAGS"] = "--tokens 12"  # too short: the probe refuses it, exit 2
    res = subprocess.run(
        ["bash", str(BENCH / "gpu_check.sh"), "--allow-busy"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 2
    assert "the qwen2.5-omni probe failed (exit 2" in res.stderr
    assert "nothing was timed" in res.stderr
    assert not (out / "run").exists()


@pytest.mark.slow
def test_families_quick(tmp_path: Path) -> None:
    out = tmp_path / "families.json"
    flags = ["--", "--cases", "text", "interleaved", "--lengths", "300", "--allow-busy"]
    res = _run(
        [str(BENCH / "families.py"), "--quick", "--hidden", "64", "--json", str(out), *flags],
        tmp_path,
        timeout=300,
    )
    assert res.returncode == 0, res.stderr[-2000:]
    assert TABLE_RULE in res.stdout
    runs = json.loads(out.read_text())["runs"]
    assert [r["family"] for r in runs] == ["qwen2.5-omni", "qwen3-omni"]
    assert [r["embedding_shape"] for r in runs] == [[152064, 64], [152064, 64]]
