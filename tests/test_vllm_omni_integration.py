"""The vllm-omni target against real vLLM-Omni code, on CPU, and its one-line errors.

The real-code tests run in a separate venv built (once, cached under
``$EMBEDBENCH_CACHE``) by ``scripts/vllm-omni-cpu-env.sh``. They make a git repository
that looks like a vLLM-Omni checkout: the whole ``vllm_omni`` package of the 0.30.0
wheel in both commits, with the thinker file of 0.28.0 (baseline form, two lookups)
in the first commit and of 0.30.0 (fixed form, one lookup) in the second. The whole
package is there because ``--repo`` imports ``vllm_omni`` from the checkout, first on
``sys.path``, as on a developer's box: a repository holding only the thinker file
would leave ``vllm_omni`` to the installed package and never test that import. Only
the thinker differs between the commits, so the measured change is the PR's alone.
Both wheels are downloaded at test time into the cache, never committed.

Qwen3-Omni (PR #7573) gets its own repository built the same way: the 0.30.0
package with 0.28.0's Qwen3-Omni thinker in the first commit and 0.30.0's in the
second; a synthetic Qwen3-Omni checkpoint; its lookup counts, equal outputs and equal
DeepStack buffers, and the replica checked bit for bit against both real forms.

The error tests (bad repository, ref, file, class, method, source, missing vLLM)
need no vLLM: they run in this interpreter with a small fake checkout.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import types
import zipfile
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from helpers import QUICK, commit_all, git
from torch import nn

from embedbench.cases import expected_lookups
from embedbench.cli import main
from embedbench.config import LM_SHIMS
from embedbench.errors import EmbedbenchError
from embedbench.omni import synthetic
from embedbench.omni.families import qwen3_omni
from embedbench.omni.scenarios import CASES
from embedbench.omni.targets.reference import FlatLanguageModel
from embedbench.omni.targets.vllm_omni import (
    THINKER_CLASS,
    THINKER_PATH,
    VllmOmniImportError,
    vllm_language_model,
)

QWEN3_OMNI = qwen3_omni.NAME

# The real code's runs: every worker imports vLLM and builds both forms, so two workers
# (the fewest with a between-process interval) keep each run to its checks.
REAL_QUICK = [
    *("--lengths", "300", "--warmup", "2", "--blocks", "4", "--iterations", "3"),
    *("--processes", "2", "--allow-busy"),
]
# The same in one process: each worker process imports vLLM (seconds), and the tests
# other than the first need no more than one to check what they check.
REAL_ONE_PROCESS = [*REAL_QUICK[:-3], "--processes", "1", "--allow-busy"]

ROOT = Path(__file__).resolve().parents[1]
ENV_SCRIPT = ROOT / "scripts" / "vllm-omni-cpu-env.sh"
REPLICA_CHECK = ROOT / "tests" / "support" / "replica_check.py"
STALE_KERNEL = ROOT / "tests" / "support" / "stale_kernel.py"
BASELINE_VERSION = "0.28.0"
CANDIDATE_VERSION = "0.30.0"
VOCAB_EMBEDDING = "vllm.model_executor.layers.vocab_parallel_embedding.VocabParallelEmbedding"
QWEN2 = "vllm.model_executor.models.qwen2"
BUILD_TIMEOUT_S = 1500
RUN_TIMEOUT_S = 600


def _cannot_run(reason: str) -> None:
    """Skip on a developer's machine that cannot build the venv; fail in CI."""
    if os.environ.get("CI"):
        pytest.fail(reason)
    pytest.skip(reason)


# ------------------------------------------------------------------ the real-code venv


def relay_lines(stream, lines: list[str], terminal) -> None:
    """Each line of ``stream`` into ``lines`` and onto the terminal at once: flushed per
    line, so it shows when pytest's output goes to a file or a pipe (block-buffered)."""
    for line in stream:
        lines.append(line.rstrip("\n"))
        if terminal is not None:
            terminal.write_line(lines[-1])
            terminal.flush()


@pytest.mark.unit
def test_the_build_progress_lines_are_flushed_one_by_one():
    class Terminal:
        def __init__(self) -> None:
            self.calls: list[str] = []

        def write_line(self, line: str) -> None:
            self.calls.append(f"write {line}")

        def flush(self) -> None:
            self.calls.append("flush")

    terminal, lines = Terminal(), []
    relay_lines(iter(["step 1\n", "step 2\n"]), lines, terminal)
    assert lines == ["step 1", "step 2"]
    assert terminal.calls == ["write step 1", "flush", "write step 2", "flush"]
    relay_lines(iter(["quiet\n"]), lines, None)  # no terminal (plugin disabled): kept only
    assert lines[-1] == "quiet"


@pytest.fixture(scope="module")
def omni_python(pytestconfig: pytest.Config) -> Path:
    """The python of the vLLM-Omni CPU venv (built on first use, then reused).

    The script's progress lines go to the terminal as they come, past pytest's output
    capture: the first build takes a minute or two and should not look like a hang.
    """
    if shutil.which("git") is None or shutil.which("flock") is None:
        _cannot_run("git and flock are needed to build the vLLM-Omni CPU venv")
    env = {**os.environ, "PYTHON": sys.executable}
    terminal = pytestconfig.pluginmanager.get_plugin("terminalreporter")
    lines: list[str] = []

    def relay(stream) -> None:
        relay_lines(stream, lines, terminal)

    proc = subprocess.Popen(
        ["bash", str(ENV_SCRIPT)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        stdin=subprocess.DEVNULL,
    )
    reader = threading.Thread(target=relay, args=(proc.stderr,), daemon=True)
    reader.start()
    if terminal is not None:
        terminal.write_line("")  # the progress lines start on a line of their own
    try:
        proc.wait(timeout=BUILD_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        _cannot_run(f"scripts/vllm-omni-cpu-env.sh took over {BUILD_TIMEOUT_S} s")
    finally:
        reader.join(timeout=10)
    with proc.stdout:  # one line, the venv's python: pip's output goes to the build log
        stdout = proc.stdout.read()
    if proc.returncode != 0:
        tail = " | ".join(lines[-4:])
        _cannot_run(f"the vLLM-Omni CPU venv could not be built (no network?): {tail}")
    return Path(stdout.strip().splitlines()[-1])


def _wheel(python: Path, version: str) -> Path:
    """The vllm-omni wheel of ``version``, downloaded once into the cache."""
    cache = synthetic.synthetic_cache_dir() / "vllm-omni-wheels"
    found = sorted(cache.glob(f"vllm_omni-{version}-*.whl"))
    if found:
        return found[0]
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache) as tmp:
        proc = subprocess.run(
            [
                str(python),
                *("-m", "pip", "download", "--no-deps", "--only-binary=:all:"),
                *("--disable-pip-version-check", "-d", tmp, f"vllm-omni=={version}"),
            ],
            capture_output=True,
            text=True,
            timeout=RUN_TIMEOUT_S,
        )
        downloaded = sorted(Path(tmp).glob(f"vllm_omni-{version}-*.whl"))
        if proc.returncode != 0 or not downloaded:
            tail = " | ".join(proc.stderr.strip().splitlines()[-3:])
            _cannot_run(f"cannot download vllm-omni=={version}: {tail}")
        target = cache / downloaded[0].name
        os.replace(downloaded[0], target)
    return target


def _checkout_like(
    python: Path, tmp_path_factory: pytest.TempPathFactory, thinker_path: str
) -> dict[str, str]:
    """The 0.30.0 package with 0.28.0's ``thinker_path`` in commit 1, 0.30.0's in commit 2."""
    baseline_wheel = _wheel(python, BASELINE_VERSION)
    candidate_wheel = _wheel(python, CANDIDATE_VERSION)
    repo = tmp_path_factory.mktemp("vllm-omni-checkout")
    with zipfile.ZipFile(candidate_wheel) as wheel:
        members = [n for n in wheel.namelist() if n.startswith("vllm_omni/")]
        wheel.extractall(repo, members)
        fixed = wheel.read(thinker_path)
    with zipfile.ZipFile(baseline_wheel) as wheel:
        baseline = wheel.read(thinker_path)
    assert baseline != fixed
    (repo / ".gitignore").write_text("__pycache__/\n")
    git(repo, "init", "-q")
    thinker = repo / thinker_path
    thinker.write_bytes(baseline)
    first = commit_all(repo, f"thinker of vllm-omni {BASELINE_VERSION}")
    thinker.write_bytes(fixed)
    second = commit_all(repo, f"thinker of vllm-omni {CANDIDATE_VERSION}")
    return {"repo": str(repo), "first": first, "second": second}


@pytest.fixture(scope="module")
def omni_repo(omni_python: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """A checkout-like repository: 0.28.0's thinker in commit 1, 0.30.0's in commit 2."""
    return _checkout_like(omni_python, tmp_path_factory, THINKER_PATH)


@pytest.fixture(scope="module")
def qwen3_repo(omni_python: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The same for Qwen3-Omni: 0.28.0's Qwen3-Omni thinker, then 0.30.0's."""
    return _checkout_like(omni_python, tmp_path_factory, qwen3_omni.FAMILY.thinker_path)


@pytest.fixture(scope="module")
def qwen3_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A synthetic Qwen3-Omni checkpoint: the published vocab and token ids, 32 wide."""
    return synthetic.write_synthetic_checkpoint(
        tmp_path_factory.mktemp("q3") / "ckpt", hidden_size=32, family=QWEN3_OMNI
    )


def _run_omni(python: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [str(python), *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=RUN_TIMEOUT_S,
        stdin=subprocess.DEVNULL,
    )


def _load_json(directory: Path, name: str) -> object:
    return json.loads((directory / name).read_text())


def test_real_thinker_baseline_from_git_candidate_from_checkout(
    omni_python, omni_repo, small_checkpoint, tmp_path
):
    out = tmp_path / "out"
    proc = _run_omni(
        omni_python,
        "-m",
        "embedbench",
        "run",
        "--target",
        "vllm-omni",
        "--repo",
        omni_repo["repo"],
        "--baseline-ref",
        omni_repo["first"],
        "--model",
        str(small_checkpoint),
        *REAL_QUICK,
        "--output-dir",
        str(out),
        "--no-progress",
    )
    assert proc.returncode == 0, proc.stderr[-3000:]

    validation = _load_json(out, "validation.json")
    assert {row["case"] for row in validation} == set(CASES)
    for row in validation:
        expected = (
            {"baseline": 1, "fixed": 1} if row["case"] == "text" else {"baseline": 2, "fixed": 1}
        )
        assert row["calls"] == expected, row
        assert row["torch_equal"] is True and row["ok"] is True, row

    meta = _load_json(out, "metadata.json")
    assert meta["target"] == "vllm-omni" and meta["status"] == "complete"
    assert meta["refs"] == {
        "baseline_sha": omni_repo["first"],
        "candidate_ref": "WORKTREE",
        "candidate_sha": omni_repo["second"],
    }
    assert meta["baseline_ref"] == omni_repo["first"]
    assert meta["checkout"] == omni_repo["second"] and meta["dirty"] is False
    assert meta["vllm"] == "0.30.0"
    assert meta["versions"]["vllm-omni"] == CANDIDATE_VERSION
    assert meta["transformers"].startswith(("5.13.", "5.14."))
    info = meta["target_info"]
    assert info["thinker_file"] == str(Path(omni_repo["repo"]) / THINKER_PATH)
    assert info["code_filenames"]["baseline"].startswith(f"<git {omni_repo['first']}:")
    assert info["modality_tag"] == "vllm.multimodal.utils.set_mm_embedding_modality"
    # The default shim: the PR script's flat language model around vLLM's own embedding.
    assert meta["lm_shim"] == "flat" == meta["config"]["lm_shim"]
    # Each fact once: refs, work-tree state, versions and shim live at top level only.
    assert not {"refs", "dirty", "versions", "lm_shim", "candidate_ref", "device"} & set(info)
    assert "vllm_omni_module" in meta["versions"]  # the target's own, hoisted
    assert info["embedding_class"] == VOCAB_EMBEDDING
    assert info["language_model_class"] == "embedbench.omni.targets.reference.FlatLanguageModel"
    assert info["language_model"] == (
        "FlatLanguageModel.embed_input_ids -> VocabParallelEmbedding (TP=1)"
    )
    # The freshness check covers every class on the lookup chain, vLLM's layer too.
    assert VOCAB_EMBEDDING.rsplit(".", 1)[0] in meta["code_fresh"]["checked_modules"]
    summary = _load_json(out, "summary.json")
    assert all(row["valid"] and row["blocks"] == 4 for row in summary)  # REAL_QUICK


def test_real_thinker_candidate_from_a_git_ref(omni_python, omni_repo, small_checkpoint, tmp_path):
    out = tmp_path / "out"
    proc = _run_omni(
        omni_python,
        "-m",
        "embedbench",
        "run",
        "--target",
        "vllm-omni",
        "--repo",
        omni_repo["repo"],
        "--baseline-ref",
        "HEAD~1",
        "--candidate-ref",
        "HEAD",
        "--cases",
        "text",
        "interleaved",
        "--lm-shim",
        "production",
        "--model",
        str(small_checkpoint),
        *REAL_ONE_PROCESS,
        "--output-dir",
        str(out),
        "--no-progress",
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    calls = {row["case"]: row["calls"] for row in _load_json(out, "validation.json")}
    assert calls == {
        "text": {"baseline": 1, "fixed": 1},
        "interleaved": {"baseline": 2, "fixed": 1},
    }
    meta = _load_json(out, "metadata.json")
    refs = meta["refs"]
    assert refs["baseline_sha"] == omni_repo["first"]
    assert refs["candidate_ref"] == "HEAD" and refs["candidate_sha"] == omni_repo["second"]
    # The served chain: vLLM's own Qwen2ForCausalLM -> Qwen2Model -> VocabParallelEmbedding.
    info = meta["target_info"]
    assert meta["lm_shim"] == "production" == meta["config"]["lm_shim"]
    assert info["language_model_class"] == f"{QWEN2}.Qwen2ForCausalLM"
    assert info["embedding_class"] == VOCAB_EMBEDDING
    assert info["language_model"] == (
        "Qwen2ForCausalLM.embed_input_ids -> Qwen2Model.embed_input_ids "
        "-> VocabParallelEmbedding (TP=1)"
    )
    checked = meta["code_fresh"]["checked_modules"]
    assert QWEN2 in checked and VOCAB_EMBEDDING.rsplit(".", 1)[0] in checked


# Per shim: the real classes a lookup must pass through, with the counting hooks'
# calls for one audio call (baseline: two lookups, fixed: one).
REAL_PATH = {
    "flat": ["VocabParallelEmbedding.forward"],
    "production": [
        "Qwen2ForCausalLM.embed_input_ids",
        "Qwen2Model.embed_input_ids",
        "VocabParallelEmbedding.forward",
    ],
}


def _replica_reports(python: Path, repo: dict[str, str], model: Path) -> dict[str, dict]:
    """tests/support/replica_check.py for every shim in one process (vLLM's import is
    most of its time): each shim's report, and the check's exit code under ``"rc"``."""
    proc = _run_omni(
        python,
        str(REPLICA_CHECK),
        *("--repo", repo["repo"], "--baseline-ref", repo["first"], "--model", str(model)),
        *("--lengths", "300", "1172", "--lm-shim", *LM_SHIMS),
    )
    # vLLM logs to stdout on import: the reports are the last lines, one per shim.
    lines = proc.stdout.strip().splitlines()
    assert len(lines) >= len(LM_SHIMS), proc.stderr[-3000:]
    reports = [json.loads(line) for line in lines[-len(LM_SHIMS) :]]
    assert [r["real"]["lm_shim"] for r in reports] == list(LM_SHIMS), reports
    return {"rc": proc.returncode, **{r["real"]["lm_shim"]: r for r in reports}}


@pytest.fixture(scope="module")
def replica_reports(omni_python, omni_repo, small_checkpoint) -> dict[str, dict]:
    """The replica check of Qwen2.5-Omni, both shims."""
    return _replica_reports(omni_python, omni_repo, small_checkpoint)


@pytest.fixture(scope="module")
def qwen3_replica_reports(omni_python, qwen3_repo, qwen3_checkpoint) -> dict[str, dict]:
    """The replica check of Qwen3-Omni, both shims."""
    return _replica_reports(omni_python, qwen3_repo, qwen3_checkpoint)


@pytest.mark.parametrize("lm_shim", LM_SHIMS)
def test_replica_matches_the_real_classes_bit_for_bit(replica_reports, lm_shim):
    report = replica_reports[lm_shim]
    wrong = [row for row in report["rows"] if not row["ok"]]
    assert replica_reports["rc"] == 0 and not wrong, wrong
    assert {row["case"] for row in report["rows"]} >= set(CASES)
    assert len(report["rows"]) == 2 * 2 * (len(CASES) + 3)
    # Same call depth: one lookup enters the same Python functions through both targets.
    assert report["call_depth"]["same"] is True, report["call_depth"]
    assert report["table_shared"] is True
    assert report["real"]["lm_shim"] == lm_shim
    assert report["real"]["embedding_class"] == VOCAB_EMBEDDING
    for variant, lookups in (("baseline", 2), ("fixed", 1)):
        path = report["real_path"][variant]
        assert path == {"lookups": lookups, "hooks": dict.fromkeys(REAL_PATH[lm_shim], lookups)}
    _assert_same_ledgers(report, "qwen2.5-omni")


def _assert_same_ledgers(report: dict, family: str) -> None:
    """The real target counts the same work per call as the replica (work.json's ledger:
    operators, their bytes, allocations, syncs) in every case and length, and each form
    runs its family's lookups."""
    rows = [row for row in report["rows"] if row["case"] in CASES]
    assert rows and all(row["ledgers"]["vllm-omni"] is not None for row in rows)
    different = [
        (row["case"], row["tokens"], row["variant"], row["ledgers"])
        for row in rows
        if not row["ledger_same"]
    ]
    assert not different, different[:2]
    for row in rows:
        lookups = row["ledgers"]["vllm-omni"]["ops"].get("aten.embedding", 0)
        assert lookups == expected_lookups(family, row["case"])[row["variant"]], row


QWEN3_THINKER = f"{qwen3_omni.FAMILY.thinker_module}.{qwen3_omni.FAMILY.thinker_class}"
# Qwen3-Omni's served chain: vLLM's Qwen3MoeForCausalLM -> Qwen3MoeModel.
QWEN3_REAL_PATH = {
    "flat": ["VocabParallelEmbedding.forward"],
    "production": [
        "Qwen3MoeForCausalLM.embed_input_ids",
        "Qwen3MoeModel.embed_input_ids",
        "VocabParallelEmbedding.forward",
    ],
}
VISION_CASES = {"image", "video", "mixed", "interleaved"}


def test_qwen3_real_thinker_baseline_from_git_candidate_from_checkout(
    omni_python, qwen3_repo, qwen3_checkpoint, tmp_path
):
    """The family (from config.json, docs/families.md) picks Qwen3-Omni's class and path; the
    counts of PR #7573, equal outputs and equal DeepStack buffers on the real code."""
    out = tmp_path / "out"
    proc = _run_omni(
        omni_python,
        *("-m", "embedbench", "run", "--target", "vllm-omni", "--repo", qwen3_repo["repo"]),
        *("--baseline-ref", qwen3_repo["first"], "--model", str(qwen3_checkpoint)),
        *REAL_ONE_PROCESS,
        *("--output-dir", str(out), "--no-progress"),
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    validation = _load_json(out, "validation.json")
    assert {row["case"] for row in validation} == set(CASES)
    for row in validation:
        assert row["calls"] == expected_lookups(QWEN3_OMNI, row["case"]), row
        assert row["torch_equal"] is True and row["ok"] is True, row
        assert row["deepstack_equal"] is True, row
        assert row["compared"] == ["output", "deepstack_buffer"], row
    meta = _load_json(out, "metadata.json")
    assert meta["family"] == QWEN3_OMNI and meta["family_source"] == "model_type"
    assert meta["refs"]["baseline_sha"] == qwen3_repo["first"]
    assert meta["checkout"] == qwen3_repo["second"] and meta["dirty"] is False
    info = meta["target_info"]
    assert info["thinker_class"] == QWEN3_THINKER
    assert info["source_path"] == qwen3_omni.FAMILY.thinker_path
    assert info["deepstack_visual_indexes"] == [8, 16, 24]
    assert info["code_filenames"]["baseline"].startswith(f"<git {qwen3_repo['first']}:")
    assert all(row["valid"] for row in _load_json(out, "summary.json"))


@pytest.mark.parametrize("lm_shim", LM_SHIMS)
def test_qwen3_replica_matches_the_real_classes_bit_for_bit(qwen3_replica_reports, lm_shim):
    """The output and the DeepStack buffer of every call, both forms, both shims."""
    report = qwen3_replica_reports[lm_shim]
    wrong = [row for row in report["rows"] if not row["ok"]]
    assert qwen3_replica_reports["rc"] == 0 and not wrong, wrong
    assert report["family"] == QWEN3_OMNI
    assert len(report["rows"]) == 2 * 2 * (len(CASES) + 3)
    for row in report["rows"]:
        assert row["equal"] and row["deepstack_equal"], row
        if row["case"] in CASES:
            assert (
                row["calls"]["vllm-omni"]
                == expected_lookups(QWEN3_OMNI, row["case"])[row["variant"]]
            ), row
            assert row["deepstack_stored"] == (row["case"] in VISION_CASES), row
    assert report["call_depth"]["same"] is True, report["call_depth"]
    assert report["table_shared"] is True
    for variant, lookups in (("baseline", 2), ("fixed", 1)):
        path = report["real_path"][variant]
        assert path == {
            "lookups": lookups,
            "hooks": dict.fromkeys(QWEN3_REAL_PATH[lm_shim], lookups),
        }
    _assert_same_ledgers(report, QWEN3_OMNI)


def test_a_reused_kernel_refuses_to_measure_the_old_thinker_after_a_checkout(
    omni_python, omni_repo, small_checkpoint, tmp_path
):
    """One process (a reused notebook kernel) runs at the second commit (fixed form), the
    work tree is checked out at the first (baseline form), and every way of running again
    in that process refuses before measuring: the loaded thinker is not the file now."""
    clone = tmp_path / "checkout"  # a clone: the shared fixture's work tree stays put
    subprocess.run(["git", "clone", "-q", omni_repo["repo"], str(clone)], check=True)
    outputs = tmp_path / "out"
    run_args = [
        *("--target", "vllm-omni", "--repo", str(clone)),
        *("--baseline-ref", omni_repo["first"], "--model", str(small_checkpoint)),
        *QUICK,
        *("--processes", "1", "--cases", "text", "interleaved"),
    ]
    proc = _run_omni(
        omni_python,
        str(STALE_KERNEL),
        *("--other-ref", omni_repo["first"], "--outputs", str(outputs), "--"),
        *run_args,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout.strip().splitlines()[-1])

    first = report["first"]
    assert first["status"] == "complete"
    assert first["checkout"] == omni_repo["second"]
    assert first["calls"]["interleaved"] == {"baseline": 2, "fixed": 1}
    thinker = THINKER_PATH.removesuffix(".py").replace("/", ".")
    fresh = first["code_fresh"]
    for checked in (fresh["checked_modules"], fresh["parent"]["checked_modules"]):
        assert "embedbench.measure" in checked
    for module in (thinker, "vllm.model_executor.models.interfaces", "embedbench.omni.gitsource"):
        assert module in fresh["checked_modules"], fresh
    assert fresh["seconds"] >= 0 and fresh["functions_compared"] > 100, fresh  # time: recorded

    for way in ("second", "workers", "measure_share"):
        error = report[way]
        assert error["type"] == "StaleCodeError", (way, error)
        message = error["message"]
        assert "\n" not in message and "restart the kernel" in message, message
        assert f"module {thinker} changed on disk" in message, message
        assert f"{THINKER_CLASS}.embed_input_ids: bytecode differs" in message, message
    assert report["measure_share"]["events"] == []  # refused before "ready"
    cli = report["cli"]
    assert cli["exit_code"] == 2, cli
    assert cli["stderr"].startswith("embedbench: error: stale code:"), cli
    assert cli["stderr"].count("\n") == 1 and "Traceback" not in cli["stderr"], cli
    # Nothing is left under the new HEAD's name: as every refusal, no output dir at all.
    assert sorted(p.name for p in outputs.iterdir()) == ["first"]


# ------------------------------------------------------------- one-line errors (no vLLM)

FAKE_THINKER = f"""\
from vllm.config import VllmConfig  # not installed in the test venv


class {THINKER_CLASS}:
    def embed_input_ids(self, input_ids, multimodal_embeddings=None, *, is_multimodal=None):
        return super().embed_input_ids(input_ids)
"""


@pytest.fixture
def fake_repo(tmp_path: Path) -> dict[str, str]:
    """Commits: no thinker; no class; no method; a syntax error; a good one (HEAD)."""
    repo = tmp_path / "checkout"
    repo.mkdir()
    git(repo, "init", "-q")
    (repo / "README.md").write_text("fake vLLM-Omni checkout\n")
    refs = {"repo": str(repo), "no_file": commit_all(repo, "no thinker")}
    thinker = repo / THINKER_PATH
    thinker.parent.mkdir(parents=True)
    package = thinker.parent
    while package != repo:
        (package / "__init__.py").write_text("")
        package = package.parent
    thinker.write_text("class SomethingElse:\n    pass\n")
    refs["no_class"] = commit_all(repo, "no thinker class")
    thinker.write_text(f"class {THINKER_CLASS}:\n    def forward(self):\n        pass\n")
    refs["no_method"] = commit_all(repo, "no embed_input_ids")
    thinker.write_text(FAKE_THINKER.replace("multimodal_embeddings=None, *", "*, *"))
    refs["syntax"] = commit_all(repo, "does not compile")
    thinker.write_text(FAKE_THINKER)
    refs["good"] = commit_all(repo, "good")
    return refs


def _refused(capsys, argv: list[str], out: Path) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("embedbench: error:"), err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert not out.exists()
    return err


def _omni_argv(repo: str, ref: str, model: Path, out: Path, *extra: str) -> list[str]:
    return [
        "run",
        "--target",
        "vllm-omni",
        "--repo",
        repo,
        "--baseline-ref",
        ref,
        "--model",
        str(model),
        *QUICK,
        "--output-dir",
        str(out),
        *extra,
    ]


ERRORS = {
    "not a git repository": (None, "is not a git repository"),
    "unknown ref": ("01a2f93256975c7ff9565c5414b0fe0225bc4765", "fetch origin 01a2f932569"),
    "file missing at ref": ("no_file", f"{THINKER_PATH} does not exist at"),
    "class missing at ref": ("no_class", f"class {THINKER_CLASS} is not defined"),
    "method missing at ref": ("no_method", "has no method embed_input_ids"),
    "method does not compile": ("syntax", "does not compile"),
}


@pytest.mark.parametrize("name", sorted(ERRORS))
def test_bad_repo_or_ref_is_one_line_before_anything_loads(
    name, fake_repo, small_checkpoint, tmp_path, capsys
):
    ref_key, fragment = ERRORS[name]
    repo = fake_repo["repo"]
    if ref_key is None:
        repo = str(tmp_path / "not-a-repo")
        Path(repo).mkdir()
        ref = "HEAD"
    else:
        ref = fake_repo.get(ref_key, ref_key)
    out = tmp_path / "out"
    err = _refused(capsys, _omni_argv(repo, ref, small_checkpoint, out), out)
    assert fragment in err, err


def test_option_like_ref_is_refused(fake_repo, small_checkpoint, tmp_path, capsys):
    out = tmp_path / "out"
    argv = _omni_argv(fake_repo["repo"], "HEAD", small_checkpoint, out)
    at = argv.index("--baseline-ref")
    argv[at : at + 2] = ["--baseline-ref=--output=/tmp/x"]
    err = _refused(capsys, argv, out)
    assert "must not start with '-'" in err


def test_a_qwen3_checkpoint_reads_the_qwen3_thinker_from_git(fake_repo, tmp_path, capsys):
    """The family picks the path: a checkout without Qwen3-Omni's thinker is refused for
    a Qwen3-Omni checkpoint, in one line naming that path."""
    model = synthetic.write_synthetic_checkpoint(tmp_path / "q3", hidden_size=8, family=QWEN3_OMNI)
    out = tmp_path / "out"
    err = _refused(capsys, _omni_argv(fake_repo["repo"], fake_repo["good"], model, out), out)
    assert f"{qwen3_omni.FAMILY.thinker_path} does not exist at" in err, err


def test_candidate_ref_is_checked_too(fake_repo, small_checkpoint, tmp_path, capsys):
    out = tmp_path / "out"
    argv = _omni_argv(
        fake_repo["repo"], fake_repo["good"], small_checkpoint, out, "--candidate-ref", "nope"
    )
    assert "git -C" in _refused(capsys, argv, out)


class _FakeVocabParallelEmbedding(nn.Module):
    """Stands in for vLLM's layer: makes its own weight, as the real one does."""

    def __init__(self, vocab: int, hidden: int, params_dtype=None, *, disable_tp=False):
        super().__init__()
        assert disable_tp is True and params_dtype == torch.bfloat16
        self.weight = nn.Parameter(torch.empty(vocab, hidden, dtype=params_dtype), False)
        self.built_on = self.weight.device.type

    def forward(self, input_: torch.Tensor) -> torch.Tensor:
        return F.embedding(input_.long(), self.weight)


def _fake_vllm_layer(monkeypatch, layer_class: type) -> None:
    """A ``vllm.model_executor.layers.vocab_parallel_embedding`` holding ``layer_class``."""
    name = VOCAB_EMBEDDING.rsplit(".", 1)[0]
    parts = name.split(".")
    for depth in range(1, len(parts) + 1):
        monkeypatch.setitem(sys.modules, ".".join(parts[:depth]), types.ModuleType("fake"))
    sys.modules[name].VocabParallelEmbedding = layer_class


def test_flat_shim_shares_the_table_with_vllms_layer(monkeypatch):
    _fake_vllm_layer(monkeypatch, _FakeVocabParallelEmbedding)
    table = torch.randn(64, 8).to(torch.bfloat16)
    language_model = vllm_language_model(table, "flat")
    assert isinstance(language_model, FlatLanguageModel)
    layer = language_model.embed_tokens
    assert layer.built_on == "meta"  # its own weight never took memory
    assert layer.weight.data_ptr() == table.data_ptr() and not layer.weight.requires_grad
    ids = torch.tensor([3, 0, 63], dtype=torch.int32)
    assert torch.equal(language_model.embed_input_ids(ids), table[ids.long()])
    with pytest.raises(ValueError, match="unknown lm_shim 'deep'; choose from flat, production"):
        vllm_language_model(table, "deep")


def test_vllm_layer_that_cannot_be_built_is_one_line(monkeypatch):
    class Broken(_FakeVocabParallelEmbedding):
        def __init__(self, *args, **kwargs):
            raise AssertionError("no current vLLM config\nsecond line")

    _fake_vllm_layer(monkeypatch, Broken)
    with pytest.raises(EmbedbenchError) as info:
        vllm_language_model(torch.zeros(64, 8, dtype=torch.bfloat16), "production")
    message = str(info.value)
    assert "\n" not in message and "VocabParallelEmbedding(64, 8" in message
    assert "no current vLLM config" in message and "--target reference" in message


@pytest.mark.skipif(
    importlib.util.find_spec("vllm") is not None, reason="needs an interpreter without vLLM"
)
def test_vllm_layer_not_importable_is_one_line():
    with pytest.raises(VllmOmniImportError, match="VocabParallelEmbedding is not importable"):
        vllm_language_model(torch.zeros(64, 8, dtype=torch.bfloat16), "flat")


@pytest.mark.skipif(
    importlib.util.find_spec("vllm") is not None, reason="needs an interpreter without vLLM"
)
def test_vllm_omni_not_importable_says_which_import_and_how_to_install(
    fake_repo, small_checkpoint, tmp_path
):
    out = tmp_path / "out"
    argv = _omni_argv(fake_repo["repo"], fake_repo["good"], small_checkpoint, out)
    proc = subprocess.run(
        [sys.executable, "-m", "embedbench", *argv],
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S,
        cwd=ROOT,
    )
    assert proc.returncode == 2, proc.stderr
    # A busy machine adds --allow-busy's warning lines; the refusal is the other line.
    lines = [ln for ln in proc.stderr.splitlines() if not ln.startswith("warning: busy")]
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert "vllm-omni is not importable" in lines[0]
    assert "ModuleNotFoundError: No module named 'vllm'" in lines[0]
    assert "pip install vllm-omni" in lines[0]
    assert "scripts/vllm-omni-cpu-env.sh" in lines[0]
    assert not out.exists()


@pytest.mark.skipif(
    importlib.util.find_spec("vllm_omni") is not None,
    reason="needs an interpreter without vllm-omni installed",
)
def test_no_repo_and_no_installed_vllm_omni(small_checkpoint, tmp_path, capsys):
    out = tmp_path / "out"
    argv = _omni_argv("x", "HEAD", small_checkpoint, out)
    del argv[argv.index("--repo") : argv.index("--repo") + 2]
    err = _refused(capsys, argv, out)
    assert "vllm-omni is not importable" in err and "--repo" in err
