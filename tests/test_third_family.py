"""A third family is one module: a test-only one, registered, is synthesized, run on the
reference target, reported and compared like the built-in two."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import QUICK_DESIGN

from embedbench.cli import main
from embedbench.omni import checkpoint, families
from embedbench.omni.families import qwen25_omni
from embedbench.omni.targets.reference import build_reference_target
from embedbench.report import compare, gate, sections, tables
from embedbench.report.results import load_results

SUPPORT = Path(__file__).resolve().parent / "support"
HIDDEN = 8
CASES = "text,audio,interleaved"


@pytest.fixture(scope="module")
def third() -> Iterator[families.Family]:
    """The test's family, registered here and (through the environment) in the workers."""
    with pytest.MonkeyPatch.context() as mp:
        mp.syspath_prepend(str(SUPPORT))
        mp.setenv(families.ENVIRONMENT, "third_family")
        paths = [str(SUPPORT), os.environ.get("PYTHONPATH", "")]
        mp.setenv("PYTHONPATH", os.pathsep.join(p for p in paths if p))
        import third_family

        family = families.register(third_family.FAMILY)
        try:
            yield family
        finally:
            families.unregister(family.name)
            sys.modules.pop("third_family", None)


@pytest.fixture(scope="module")
def third_checkpoint(third: families.Family, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("third") / "ckpt"
    argv = ["synth-checkpoint", str(path), "--family", third.name, "--hidden", str(HIDDEN)]
    assert main(argv) == 0
    return path


@pytest.fixture(scope="module")
def third_run(third_checkpoint: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("third-run") / "out"
    argv = [
        *("run", "--model", str(third_checkpoint), *QUICK_DESIGN, "--processes", "1"),
        *("--cases", CASES, "--allow-busy", "--no-progress", "--output-dir", str(out)),
    ]
    assert main(argv) == 0
    return out


def test_the_registry_lists_it_after_the_built_in_families(third: families.Family):
    assert families.names()[-1] == third.name and len(families.names()) == 3
    assert families.get(third.name) is third and families.default() is qwen25_omni.FAMILY
    assert families.with_reference_table() is qwen25_omni.FAMILY
    with pytest.raises(ValueError, match="already registered"):
        families.register(third)


def test_synth_checkpoint_writes_its_layout_and_token_ids(
    third: families.Family, third_checkpoint: Path
):
    config = json.loads((third_checkpoint / "config.json").read_text())
    assert (config["model_type"], config["architectures"]) == ("test_omni", ["TestOmniModel"])
    assert config["embedbench_synthetic"]["family"] == third.name
    assert config["thinker_config"]["audio_token_index"] == 151640
    facts = checkpoint.read_thinker_facts(third_checkpoint)
    assert (facts.family, facts.family_source) == (third.name, "model_type")
    assert (facts.audio_token_id, facts.hidden_size) == (151640, HIDDEN)
    # The replica reads its own token id, not Qwen2.5-Omni's.
    table = checkpoint.load_embedding_table(checkpoint.locate_embedding(third_checkpoint, facts))
    target = build_reference_target(table, facts)
    assert target.family == third.name
    assert target.model.config.audio_token_index == 151640
    assert qwen25_omni.FAMILY.token_ids["audio_token_index"] == 151646


def test_run_on_the_reference_target_records_the_family(third: families.Family, third_run: Path):
    meta = json.loads((third_run / "metadata.json").read_text())
    assert (meta["family"], meta["family_source"]) == (third.name, "model_type")
    assert meta["target"] == "reference"
    rows = json.loads((third_run / "validation.json").read_text())
    rows = rows["rows"] if isinstance(rows, dict) else rows
    assert {r["case"] for r in rows} == set(CASES.split(","))
    for row in rows:
        assert row["ok"] and row["family"] == third.name, row
        assert row["calls"] == third.lookups(row["case"]), row
    assert main(["validate", str(third_run)]) == 0


def test_report_names_the_family_and_its_pr(third_run: Path, capsys, tmp_path: Path):
    capsys.readouterr()
    html = tmp_path / "report.html"
    assert main(["report", str(third_run), "--html", str(html)]) == 0
    out = capsys.readouterr().out
    assert "| Input | Before (μs) | After (μs) | Host latency reduction |" in out
    result = load_results(third_run)
    assert tables.headline(result).startswith(
        "Test-Omni embed_input_ids before/after (vLLM-Omni PR #0000)"
    )
    assert "Test-Omni embed_input_ids before/after (vLLM-Omni PR #0000)" in html.read_text()


def test_compare_sets_it_apart_from_qwen25_and_the_published_table(
    third_run: Path, small_run_dir: Path
):
    runs = compare.load_runs([str(third_run), str(small_run_dir)], include_reference=True)
    reference = compare.reference_results()
    assert [tables.family_label(r.metadata) for r in runs.values()] == [
        "Test-Omni",
        "Qwen2.5-Omni",
    ]
    by_family = compare.compare_tables(runs, reference)
    assert list(by_family) == ["Test-Omni", "Qwen2.5-Omni"]
    assert not any(c.startswith("PR: ") for c in by_family["Test-Omni"].columns)
    assert any(c.startswith("PR: ") for c in by_family["Qwen2.5-Omni"].columns)
    assert sections.comparison(runs, reference)
    outcomes = {name: gate.gate_results(r, 1000.0) for name, r in runs.items()}
    assert len(outcomes) == 2


@pytest.mark.parametrize(
    ("modules", "said"),
    [
        ("no_such_family_module", "cannot import family module 'no_such_family_module'"),
        ("json", "module 'json' defines no FAMILY"),
    ],
)
def test_a_bad_family_module_in_the_environment_is_refused_in_one_line(
    tmp_path: Path, modules: str, said: str
) -> None:
    import subprocess

    env = {**os.environ, families.ENVIRONMENT: modules}
    argv = ["synth-checkpoint", str(tmp_path / "ckpt"), "--hidden", str(HIDDEN)]
    res = subprocess.run(
        [sys.executable, "-m", "embedbench", *argv], capture_output=True, text=True, env=env
    )
    assert res.returncode == 2, res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and families.ENVIRONMENT in lines[0] and said in lines[0], lines
    assert not (tmp_path / "ckpt").exists()
