"""The report side runs without torch (docs/development.md, "Layout"): a GPU box's
results re-rendered on a laptop.

The subprocesses below put ``tests/support/notorch`` first on PYTHONPATH: its
``sitecustomize`` makes ``import torch`` fail as it would where torch is not installed,
and (with ``EMBEDBENCH_NOTORCH_CHECK``) says at exit whether torch got in anyway and
which imports of it were refused.
"""

import os
import subprocess
import sys
import zipfile
from pathlib import Path
from unittest import mock

import nbformat
import papermill as pm
import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTORCH = ROOT / "tests" / "support" / "notorch"
NOTEBOOKS = ROOT / "notebooks"
# Every module of the report package (and what it reaches in the harness), plus the
# front-end modules a re-render on a laptop imports.
REPORT_MODULES = (
    *(f"embedbench.report.{p.stem}" for p in sorted((ROOT / "embedbench" / "report").glob("*.py"))),
    "embedbench.cli",
    "embedbench.cases",
    "embedbench.config",
)
# The last cell of a notebook run here: proves the kernel had the blocker and no torch.
CHECK_CELL = """\
import sys

import sitecustomize

assert any(type(f).__name__ == "_NoTorch" for f in sys.meta_path), "blocker not installed"
assert "torch" not in sys.modules, "torch imported"
assert not sitecustomize._REFUSED, f"tried to import {sitecustomize._REFUSED}"
print("TORCH-FREE-OK")
"""


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(NOTORCH), env.get("PYTHONPATH")]))
    env["EMBEDBENCH_NOTORCH_CHECK"] = "1"
    return env


def _run(args: list[str], **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, *args],
        capture_output=True,
        text=True,
        env=_env(),
        cwd=str(ROOT),
        timeout=300,
        **kwargs,
    )


def _assert_torch_free(proc: subprocess.CompletedProcess) -> None:
    assert "Traceback" not in proc.stderr, proc.stderr
    assert "notorch: checked" in proc.stderr, proc.stderr  # the blocker was active
    assert "notorch: torch imported" not in proc.stderr, proc.stderr
    assert "notorch: refused" not in proc.stderr, proc.stderr  # nothing even tried


def test_blocker_refuses_torch():
    proc = _run(["-c", "import torch"])
    assert proc.returncode == 1 and "blocked by tests/support/notorch" in proc.stderr
    assert "notorch: refused torch" in proc.stderr


def test_report_side_modules_import_without_torch():
    """A fresh interpreter, no blocker: importing the report side leaves torch out."""
    code = (
        "import sys\n"
        f"for name in {REPORT_MODULES!r}:\n"
        "    __import__(name)\n"
        "from embedbench import RunConfig, load_results\n"
        "heavy = sorted({'torch', 'tqdm', 'safetensors'} & set(sys.modules))\n"
        "assert not heavy, heavy\n"
        "print('ok')\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=str(ROOT)
    )
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr


def test_cli_start_up_imports_no_heavy_module():
    """``--help`` and usage errors need only the argument table: no pandas, scipy, numpy."""
    code = (
        "import sys\n"
        "import embedbench.cli\n"
        "heavy = {'torch', 'tqdm', 'pandas', 'scipy', 'numpy', 'matplotlib', 'jsonschema'}\n"
        "print(sorted(heavy & {m.split('.')[0] for m in sys.modules}))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=str(ROOT)
    )
    assert proc.returncode == 0 and proc.stdout.strip() == "[]", (proc.stdout, proc.stderr)


@pytest.mark.parametrize(
    "argv",
    [["--help"], ["run", "--help"], ["run", "--blocks", "7"], ["report"]],
    ids=["help", "run-help", "bad-blocks", "missing-dir"],
)
def test_cli_answers_without_torch(argv):
    proc = _run(["-m", "embedbench", *argv])
    _assert_torch_free(proc)
    if "--help" in argv:
        assert proc.returncode == 0 and "usage: embedbench" in proc.stdout
    else:
        assert proc.returncode == 2
        lines = [ln for ln in proc.stderr.splitlines() if not ln.startswith("notorch:")]
        assert len(lines) == 1 and "error" in lines[0], proc.stderr


def test_report_validate_gate_run_without_torch(small_run_dir, tmp_path):
    out, comment = tmp_path / "report.html", tmp_path / "comment.md"
    argv = ["-m", "embedbench", "report", str(small_run_dir), "--html", str(out)]
    report = _run([*argv, "--pr-comment", str(comment)])
    _assert_torch_free(report)
    assert report.returncode == 0, report.stderr
    assert "| Input | Before (μs) | After (μs) | Host latency reduction |" in report.stdout
    assert out.stat().st_size > 10_000 and "<img" in out.read_text()
    assert "<details>" in comment.read_text() and (tmp_path / "comment-forest.png").is_file()
    with zipfile.ZipFile(tmp_path / "comment.zip") as bundle:
        assert "report.html" in bundle.namelist()  # the HTML written beside it
    # An existing comment is never replaced silently: one line, exit 2, nothing printed.
    again = _run(["-m", "embedbench", "report", str(small_run_dir), "--pr-comment", str(comment)])
    lines = [ln for ln in again.stderr.splitlines() if not ln.startswith("notorch:")]
    assert again.returncode == 2 and again.stdout == ""
    assert len(lines) == 1 and "already exists; pass --overwrite" in lines[0], again.stderr

    validate = _run(["-m", "embedbench", "validate", str(small_run_dir)])
    _assert_torch_free(validate)
    assert validate.returncode == 0 and validate.stdout.startswith("ok: ")

    # A noisy quick run may prove a case slower than 0 %; 1000 % never fails on that.
    gate = _run(["-m", "embedbench", "gate", str(small_run_dir), "--max-slowdown", "1000"])
    _assert_torch_free(gate)
    assert gate.returncode == 0 and gate.stdout.startswith("gate: pass"), gate.stdout


def _execute_without_torch(name: str, tmp_path: Path, **params) -> nbformat.NotebookNode:
    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    nb.cells.append(nbformat.v4.new_code_cell(CHECK_CELL))
    source, out = tmp_path / f"in-{name}", tmp_path / f"out-{name}"
    nbformat.write(nb, source)
    # papermill in this process, its kernel in one of its own that inherits the blocking
    # PYTHONPATH (a papermill subprocess would import papermill again for each notebook).
    # Written once, when it ends: rewriting the notebook after every cell costs seconds.
    with mock.patch.dict(os.environ, _env()):
        pm.execute_notebook(
            str(source),
            str(out),
            parameters=params,
            kernel_name="python3",
            progress_bar=False,
            request_save_on_cell_execute=False,
            cwd=str(ROOT),
            execution_timeout=300,
        )
    executed = nbformat.read(out, as_version=4)
    errors = [
        o
        for cell in executed.cells
        if cell.cell_type == "code"
        for o in cell.get("outputs", [])
        if o.output_type == "error"
    ]
    assert not errors, errors
    assert "TORCH-FREE-OK" in "".join(o.get("text", "") for o in executed.cells[-1].outputs)
    return executed


@pytest.mark.notebook
def test_report_and_compare_notebooks_run_without_torch(small_run_dir, tmp_path):
    report = _execute_without_torch("report.ipynb", tmp_path, results_dir=str(small_run_dir))
    assert any("image/png" in o.get("data", {}) for c in report.cells for o in c.get("outputs", []))
    _execute_without_torch(
        "compare.ipynb",
        tmp_path,
        results_dirs=[str(small_run_dir)],
        include_reference=True,
        max_slowdown_pct=1000,
    )
