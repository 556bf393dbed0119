"""The measuring path without platformdirs and jsonschema, as on the bare GPU image.

The subprocesses put ``tests/support/bare_image`` first on PYTHONPATH: its
``sitecustomize`` makes both imports fail (workers inherit it). ``run``, ``probe`` and
``report`` work there and say what was skipped; ``validate`` refuses in one line.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from embedbench.report import schema
from embedbench.report.results import ResultsWriter

ROOT = Path(__file__).resolve().parents[1]
BARE = ROOT / "tests" / "support" / "bare_image"
SMALL_RUN = ["--lengths", "300", "--cases", "text", "audio", "--warmup", "2"]
SMALL_RUN += ["--blocks", "4", "--iterations", "3", "--processes", "2", "--allow-busy"]


def _bare(args: list[str], tmp_path: Path) -> subprocess.CompletedProcess:
    env = {key: value for key, value in os.environ.items() if key != "EMBEDBENCH_CACHE"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(BARE), env.get("PYTHONPATH")]))
    env["XDG_CACHE_HOME"] = str(tmp_path / "xdg")
    return subprocess.run(
        [sys.executable, *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=str(ROOT),
        timeout=300,
    )


def test_the_blocker_hides_both_packages(tmp_path: Path) -> None:
    code = "import importlib\nfor m in ('platformdirs', 'jsonschema'):\n"
    code += "    try:\n        importlib.import_module(m)\n    except ImportError:\n"
    code += "        print(m, 'absent')\n"
    res = _bare(["-c", code], tmp_path)
    assert res.stdout.split("\n")[:2] == ["platformdirs absent", "jsonschema absent"], res.stderr


def test_run_probe_report_without_them_and_validate_refuses(
    small_checkpoint: Path, tmp_path: Path
) -> None:
    out = tmp_path / "run"
    flags = ["--model", str(small_checkpoint), "--output-dir", str(out), "--no-progress"]
    res = _bare(["-m", "embedbench", "run", *flags, *SMALL_RUN], tmp_path)
    assert res.returncode == 0, res.stderr[-3000:]
    meta = json.loads((out / "metadata.json").read_text())
    assert meta["status"] == "complete"
    assert meta["schema_check"] == schema.SKIPPED_LINE  # one line: what was skipped, and why
    assert "\n" not in schema.SKIPPED_LINE and "pip install 'jsonschema" in schema.SKIPPED_LINE

    report = _bare(["-m", "embedbench", "report", str(out)], tmp_path)
    assert report.returncode == 0, report.stderr[-3000:]
    assert "| Audio |" in report.stdout
    assert report.stderr.strip().splitlines() == [
        "embedbench: note: jsonschema is not installed, so the results were read without "
        "their schema check (pip install 'jsonschema>=4.18')"
    ]

    validate = _bare(["-m", "embedbench", "validate", str(out)], tmp_path)
    assert validate.returncode == 2 and not validate.stdout
    assert validate.stderr.strip().splitlines() == [
        "embedbench: error: checking results against their schema needs jsonschema, which is "
        "not installed here; pip install 'jsonschema>=4.18'"
    ]

    # Where jsonschema is installed, the same directory passes its check.
    checked = subprocess.run(
        [sys.executable, "-m", "embedbench", "validate", str(out)],
        capture_output=True,
        text=True,
        cwd=str(ROOT),
        timeout=120,
    )
    assert checked.returncode == 0 and checked.stdout.startswith("ok: "), checked.stderr

    probe = _bare(["-m", "embedbench", "probe", "--hidden", "16", "--tokens", "300"], tmp_path)
    assert probe.returncode == 0, probe.stderr[-3000:]
    assert probe.stdout.startswith("probe: qwen2.5-omni, cpu, 300 tokens, hidden 16, all cases ok")


def test_a_run_with_jsonschema_records_that_its_files_passed(small_run_dir: Path) -> None:
    meta = json.loads((small_run_dir / "metadata.json").read_text())
    assert meta["schema_check"].startswith(
        "passed: metadata.json, micro-raw.json, validation.json, summary.json, work.json "
        "match their schema"
    )


@pytest.mark.unit
def test_the_writer_names_the_first_bad_field_or_says_it_skipped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    writer = ResultsWriter(tmp_path / "run", {"status": "running"})
    writer.add_records([{"case": "timer"}])
    assert writer.schema_check() == (
        "failed: metadata.json(top level): 'warmup' is a required property"
    )
    monkeypatch.setitem(sys.modules, "jsonschema", None)  # import raises ImportError
    assert not schema.available()
    assert writer.schema_check() == schema.SKIPPED_LINE
