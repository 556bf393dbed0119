"""The make targets a newcomer types: what they check first and what they print last.

make runs against this test's own Python (``VENV``, with ``setup`` marked done by ``-o``,
so no venv is built) and writes under the test's temporary directory only.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="needs GNU make")


def _make(target: str, tmp_path: Path, *overrides: str) -> subprocess.CompletedProcess:
    venv = Path(sys.prefix)
    return subprocess.run(
        [
            *("make", "-C", str(ROOT), "--no-print-directory", target),
            *("-o", str(venv / ".embedbench-installed")),  # setup: already done
            f"VENV={venv}",
            f"PY={sys.executable}",
            f"NB_OUT={tmp_path / 'notebooks'}",
            f"RESULTS={tmp_path / 'results'}",
            *overrides,
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_make_run_names_notebook_and_results_by_one_timestamp_and_ends_with_the_results(
    tmp_path,
):
    # papermill and nbconvert echo their command lines: what make would run, not a run.
    proc = _make("run", tmp_path, "PAPERMILL=echo papermill", "NBCONVERT=echo nbconvert")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    papermill = next(line for line in lines if line.startswith("papermill "))
    match = re.fullmatch(
        r"papermill notebooks/run\.ipynb (\S+)/run-(\d{8}T\d{6}Z)\.ipynb -p output_dir (\S+)",
        papermill,
    )
    assert match, papermill
    notebooks, stamp, results = match.groups()
    assert notebooks == str(tmp_path / "notebooks")
    assert results == str(tmp_path / "results" / stamp)
    assert lines[-1] == f"results: {results}"


def test_make_compare_checks_the_dirs_before_papermill_with_the_clis_line(tmp_path):
    run_like = tmp_path / "not-a-run"
    run_like.mkdir()
    missing = tmp_path / "omni-h100"
    proc = _make("compare", tmp_path, f"DIRS={run_like} {missing}")
    assert proc.returncode == 2
    cli = subprocess.run(
        [sys.executable, "-m", "embedbench", "validate", str(run_like)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert cli.returncode == 2
    first, *rest = proc.stderr.splitlines()
    assert (
        first
        == cli.stderr.strip()
        == (f"embedbench: error: results dir {run_like} has no metadata.json")
    )
    # make's own lines alone: its footer, and any warning of its own (e.g. clock skew); under
    # `make test` this make is a sub-make and names itself make[1]
    assert all(re.match(r"make(\[\d+\])?: ", line) for line in rest), rest
    assert "Traceback" not in proc.stderr + proc.stdout and "papermill" not in proc.stderr
    assert not (tmp_path / "notebooks").exists()  # no notebook, failed or not, left behind


def test_make_report_checks_its_dir_before_papermill_and_leaves_no_notebook(tmp_path):
    notebooks_dir = tmp_path / "results" / "notebooks"  # what a newcomer may pick by mistake
    notebooks_dir.mkdir(parents=True)
    proc = _make("report", tmp_path, f"DIR={notebooks_dir}")
    assert proc.returncode == 2
    first, *rest = proc.stderr.splitlines()
    assert first == f"embedbench: error: results dir {notebooks_dir} has no metadata.json"
    assert all(re.match(r"make(\[\d+\])?: ", line) for line in rest), rest
    assert "Traceback" not in proc.stderr + proc.stdout and "papermill" not in proc.stderr
    assert not (tmp_path / "notebooks").exists()
