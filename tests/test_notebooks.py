"""The papermill notebooks: hygiene, execution, re-rendering, comparison, failures."""

import ast
import contextlib
import dataclasses
import io
import json
import logging
import os
import runpy
import shutil
import subprocess
import sys
import traceback
from pathlib import Path
from types import SimpleNamespace
from unittest import mock

import nbformat
import papermill as pm
import pytest
from papermill.cli import papermill as papermill_cli

from embedbench.config import CompareConfig, ReportConfig, RunConfig
from embedbench.omni.scenarios import CASES
from embedbench.report.results import RESULT_FILES, WORK

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
# Every field of a notebook's config class is one of its parameters (one list, config.py).
CONFIGS = {"run.ipynb": RunConfig, "report.ipynb": ReportConfig, "compare.ipynb": CompareConfig}
RUN_PARAMS = [f.name for f in dataclasses.fields(RunConfig)]
COMPARE_PARAMS = [f.name for f in dataclasses.fields(CompareConfig)]
PR_HEADER = "| Input | Before (μs) | After (μs) | Host latency reduction |"
SIZE_BUDGET = 4 * 1024 * 1024  # the executed run notebook, charts and PNGs (docs/interactive.md)
VEGALITE = "application/vnd.vegalite.v5+json"


def _outputs(nb) -> list:
    return [o for cell in nb.cells if cell.cell_type == "code" for o in cell.get("outputs", [])]


def _text(nb) -> str:
    parts = []
    for output in _outputs(nb):
        parts.append(output.get("text", ""))
        for key in ("text/plain", "text/html", "text/markdown"):
            parts.append(output.get("data", {}).get(key, ""))
    return "\n".join(parts)


def _execute(name: str, out: Path, **params):
    if name == "run.ipynb":
        params.setdefault("allow_busy", True)  # structure, not numbers: no quiet machine needed
    pm.execute_notebook(
        str(NOTEBOOKS / name),
        str(out),
        parameters=params,
        kernel_name="python3",
        progress_bar=False,
        cwd=str(out.parent),
        # Written once, when it ends: rewriting the whole notebook (megabytes of charts and
        # PNGs) after every cell took longer than the report's cells themselves.
        request_save_on_cell_execute=False,
    )
    return nbformat.read(out, as_version=4)


def _papermill(*args: str) -> subprocess.CompletedProcess:
    """papermill's command line, its own parsing of -p/-y and its exit status, run in this
    process: a subprocess would start an interpreter and import papermill again for each.
    An exception escaping it (a failed cell) is the exit status 1 Python gives it; stdout
    and papermill's log (stderr in its process) come back as a subprocess's would."""
    stdout, stderr = io.StringIO(), io.StringIO()
    log, root = logging.getLogger("papermill"), logging.getLogger()
    handler, level, root_state = logging.StreamHandler(stderr), log.level, root.handlers[:]
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    # Saved once, at the end; a cell that hangs fails, as a subprocess's timeout did.
    argv = [*args, "--no-request-save-on-cell-execute", "--no-progress-bar"]
    argv += ["--execution-timeout", "300"]
    captured = contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr)
    try:
        # The CLI sets a variable and configures logging: both are put back afterwards.
        with mock.patch.dict(os.environ), captured[0], captured[1]:
            papermill_cli.main(argv, prog_name="papermill")
    except SystemExit as exit_:
        returncode = exit_.code if isinstance(exit_.code, int) else int(exit_.code is not None)
    except Exception:  # what ends its process with status 1
        returncode = 1
        stderr.write(traceback.format_exc())
    finally:
        log.removeHandler(handler)
        log.setLevel(level)
        root.handlers[:] = root_state
    return subprocess.CompletedProcess(argv, returncode, stdout.getvalue(), stderr.getvalue())


def _assert_clean(nb) -> None:
    assert not [o for o in _outputs(nb) if o.output_type == "error"]


def _assert_charts_keep_their_pngs(nb, at_least: int) -> None:
    """Every interactive output carries the same figure's PNG and its alt text beside it
    (GitHub and nbviewer show only the PNG), and no HTML JupyterLab would prefer."""
    charts = [o for o in _outputs(nb) if VEGALITE in o.get("data", {})]
    assert len(charts) >= at_least
    for output in charts:
        assert set(output["data"]) == {VEGALITE, "image/png", "text/plain"}
        alt = output["metadata"]["image/png"]["alt"]
        assert len(alt) > 40 and output["data"][VEGALITE]["description"] == alt


@pytest.mark.parametrize("name", ["run.ipynb", "report.ipynb", "compare.ipynb"])
def test_notebooks_are_committed_stripped_with_python3_kernel(name):
    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    nbformat.validate(nb)
    assert nb.metadata.kernelspec.name == "python3"
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None
    tagged = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
    assert len(tagged) == 1
    source = "\n".join(c.source for c in nb.cells)
    assert "%matplotlib inline" in source
    assert "MPLBACKEND" not in source and "matplotlib.use" not in source


def test_library_never_switches_backend_or_shows():
    package = Path(__file__).resolve().parents[1] / "embedbench"
    for path in package.rglob("*.py"):
        text = path.read_text()
        assert "matplotlib.use(" not in text and "plt.show(" not in text, path
        assert "MPLBACKEND" not in text, path


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_parameters_are_the_config_fields_with_their_defaults(name):
    config_class = CONFIGS[name]
    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    cell = next(c for c in nb.cells if "parameters" in c.metadata.get("tags", []))
    lines = [line for line in cell.source.splitlines() if line.strip()]
    names = [line.split(":", 1)[0] for line in lines]
    params = dataclasses.fields(config_class)
    assert names == [f.name for f in params]
    defaults = config_class()
    for param, line in zip(params, lines, strict=True):
        value = ast.literal_eval(line.split("=", 1)[1].split("  #", 1)[0].strip())
        assert config_class(**{param.name: value}) == defaults, param.name
        assert line.endswith(f"  # {param.metadata['help']}")
    # Every parameter reaches the config class, which coerces and checks it.
    call = next(c.source for c in nb.cells if f"config = {config_class.__name__}(" in c.source)
    assert all(f"{name}={name}" in call for name in names)


@pytest.fixture(scope="module")
def default_run(small_checkpoint, tmp_path_factory):
    """The run notebook at its default design (50 warm-ups, 20 x 20, 1172 tokens, all six
    cases) on the small-hidden checkpoint: executed once, for the tests below that check
    different things about it."""
    where = tmp_path_factory.mktemp("default-run")
    out_dir = where / "results"
    nb = _execute(
        "run.ipynb", where / "run.ipynb", model=str(small_checkpoint), output_dir=str(out_dir)
    )
    return SimpleNamespace(path=where / "run.ipynb", out_dir=out_dir, nb=nb)


@pytest.fixture(scope="module")
def default_report(default_run):
    """The report notebook re-rendering the default run's results, executed once."""
    path = default_run.path.with_name("report.ipynb")
    nb = _execute("report.ipynb", path, results_dir=str(default_run.out_dir))
    return SimpleNamespace(path=path, nb=nb)


@pytest.fixture(scope="module")
def cli_run(small_checkpoint, tmp_path_factory):
    """The run notebook through papermill's CLI, given ``args`` and a quick design (one
    case, one warm-up, two calls a block), executed once per distinct ``args``: the tests
    that check different things about one execution share it."""
    done = {}

    def execute(*args: str) -> SimpleNamespace:
        if args not in done:
            where = tmp_path_factory.mktemp("cli-run")
            proc = _papermill(
                *(str(NOTEBOOKS / "run.ipynb"), str(where / "out.ipynb"), *args),
                *("-p", "model", str(small_checkpoint), "-y", "cases: [text]"),
                *("-p", "warmup", "1", "-p", "iterations", "2", "-p", "allow_busy", "True"),
                *("-p", "output_dir", str(where / "results")),
            )
            done[args] = SimpleNamespace(proc=proc, out=where / "out.ipynb", dir=where / "results")
        return done[args]

    return execute


# A list from -y and blocks alone (the processes they allow): one run for both tests.
LIST_AND_BLOCKS_ALONE = ("-y", "lengths: [512, 1172]", "-p", "blocks", "4")


@pytest.mark.parametrize(
    "name, params, fragment",
    [
        ("run.ipynb", RUN_PARAMS, "embedded synthetic default"),
        ("compare.ipynb", COMPARE_PARAMS, "allowed slowdown in percent"),
    ],
)
def test_help_notebook_documents_every_parameter(name, params, fragment):
    proc = _papermill("--help-notebook", str(NOTEBOOKS / name))
    assert proc.returncode == 0, proc.stderr
    assert "Unable to parse" not in proc.stderr
    for param in params:
        line = next(
            (ln for ln in proc.stdout.splitlines() if ln.strip().startswith(f"{param}:")), None
        )
        assert line is not None, param
        assert "(default" in line
    assert fragment in proc.stdout


def test_run_report_and_compare_notebooks(default_run, default_report, small_run_dir, tmp_path):
    out_dir, nb = default_run.out_dir, default_run.nb
    _assert_clean(nb)
    pngs = [o for o in _outputs(nb) if "image/png" in o.get("data", {})]
    assert len(pngs) >= 4
    text = _text(nb)
    assert PR_HEADER in text
    table = text[text.index(PR_HEADER) :].splitlines()[: 2 + len(CASES)]
    assert len(table) == 2 + len(CASES) and all(line.startswith("| ") for line in table)
    assert sorted(p.name for p in out_dir.iterdir()) == sorted([*RESULT_FILES, WORK])
    summary = json.loads((out_dir / "summary.json").read_text())
    assert {r["case"] for r in summary} == set(CASES) and all(r["blocks"] == 20 for r in summary)
    assert all(r["workers"] == 5 for r in summary)  # the default design: 5 worker processes
    _assert_charts_keep_their_pngs(nb, at_least=5)  # forest, paired, per block, per call, canary
    # Progress as a few stderr lines: no widget for papermill to save frozen, no redraws.
    assert not [
        o for o in _outputs(nb) if "application/vnd.jupyter.widget-view+json" in o.get("data", {})
    ]
    progress = [line for line in _text(nb).splitlines() if line.startswith("embedbench: ")]
    assert progress[-1].startswith("embedbench: 100 % of ") and len(progress) <= 10
    assert "\r" not in _text(nb)
    assert default_run.path.stat().st_size <= SIZE_BUDGET

    rendered = default_report.nb
    _assert_clean(rendered)
    assert table == _text(rendered)[_text(rendered).index(PR_HEADER) :].splitlines()[: len(table)]
    assert len([o for o in _outputs(rendered) if "image/png" in o.get("data", {})]) >= 4
    _assert_charts_keep_their_pngs(rendered, at_least=5)

    compared = _execute(
        "compare.ipynb",
        tmp_path / "compare.ipynb",
        results_dirs=[str(out_dir), str(small_run_dir)],
        include_reference=True,
        max_slowdown_pct=100,
    )
    _assert_clean(compared)
    text = _text(compared)
    assert "PR #7477 (NVIDIA H100 80GB)" in text and "104.32" in text
    for run_name in (out_dir.name, small_run_dir.name):  # the gate's lines, as the CLI prints
        assert f"{run_name}: gate: pass, 6 cases, none slower beyond 100.00 %" in text
    assert len([o for o in _outputs(compared) if "image/png" in o.get("data", {})]) == 1


def test_compare_include_reference_false_from_the_papermill_cli_excludes_it(
    small_run_dir, tmp_path
):
    # papermill passes `-p include_reference false` as the string "false" (only "False" is
    # converted), which the notebook once took as true.
    copy = tmp_path / "copy"
    shutil.copytree(small_run_dir, copy)
    out = tmp_path / "compare.ipynb"
    proc = _papermill(
        *(str(NOTEBOOKS / "compare.ipynb"), str(out)),
        *("-y", f"results_dirs: [{small_run_dir}, {copy}]"),
        *("-p", "include_reference", "false", "-p", "max_slowdown_pct", "100"),
        *("-p", "allow_mixed_windows", "no", "--cwd", str(tmp_path)),
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    compared = nbformat.read(out, as_version=4)
    _assert_clean(compared)
    text = _text(compared)
    # The reference is named wherever it is shown (its numbers alone could be a run's:
    # this run's interval once read [-104.32, +104.32], the PR's Audio before).
    assert "PR #7477" not in text
    for run_name in (small_run_dir.name, copy.name):
        assert f"{run_name}: gate: pass, 6 cases, none slower beyond 100.00 %" in text


@pytest.mark.parametrize(
    "args",
    [
        LIST_AND_BLOCKS_ALONE,
        ("-p", "lengths", "[512, 1172]", "-p", "blocks", "2", "-p", "processes", "1"),
    ],
    ids=["yaml-list", "string"],
)
def test_papermill_cli_accepts_list_and_string_lengths(cli_run, args):
    run = cli_run(*args)
    assert run.proc.returncode == 0, run.proc.stderr[-2000:]
    summary = json.loads((run.dir / "summary.json").read_text())
    assert sorted(r["tokens"] for r in summary) == [512, 1172]


def test_run_notebook_with_blocks_alone_takes_the_processes_they_allow(cli_run):
    run = cli_run(*LIST_AND_BLOCKS_ALONE)  # -p blocks 4, processes unset
    assert run.proc.returncode == 0, run.proc.stderr[-2000:]
    nb = nbformat.read(run.out, as_version=4)
    _assert_clean(nb)
    text = _text(nb)
    assert "2 worker processes, not 5: --blocks 4 allows at most 2" in text  # the run's log
    assert "2 (unset, derived)" in text  # the parameters table
    metadata = json.loads((run.dir / "metadata.json").read_text())
    assert (metadata["processes"], metadata["processes_source"]) == (2, "derived")
    summary = json.loads((run.dir / "summary.json").read_text())
    assert [r["workers"] for r in summary] == [2, 2]  # each length's row


@pytest.mark.parametrize(
    "param, value, ename, fragment",
    [
        ("model", "no-such-model", "CheckpointError", "no-such-model"),
        ("lengths", "[512, 1172x]", "ConfigError", "lengths must be an integer"),
        ("lengths", "200", "ConfigError", ">= 300"),
    ],
    ids=["missing-model", "bad-lengths-string", "short-length"],
)
def test_a_bad_parameter_fails_papermill_with_the_one_line_message(
    tmp_path, param, value, ename, fragment
):
    out = tmp_path / "failed.ipynb"
    if param == "model":
        value = str(tmp_path / value)
    proc = _papermill(
        *(str(NOTEBOOKS / "run.ipynb"), str(out), "-p", param, value),
        *("-p", "output_dir", str(tmp_path / "results")),
    )
    assert proc.returncode != 0
    nb = nbformat.read(out, as_version=4)
    errors = [o for o in _outputs(nb) if o.output_type == "error"]
    assert len(errors) == 1
    assert errors[0].ename == ename
    assert fragment in errors[0].evalue and "\n" not in errors[0].evalue
    assert not (tmp_path / "results").exists()


def test_committed_notebooks_match_their_source_script(capsys):
    # The script's own --check, in this process (which imports what it imports already).
    script = runpy.run_path(str(NOTEBOOKS.parent / "scripts" / "build_notebooks.py"))
    assert script["main"](["--check"]) == 0, capsys.readouterr().out


def test_the_readmes_html_path_loads_nothing_from_the_network(default_report, tmp_path):
    """docs/usage.md's nbconvert line (and make's) on an executed notebook: no remote script."""
    import re
    import shlex

    root = NOTEBOOKS.parent
    usage = (root / "docs" / "usage.md").read_text(encoding="utf-8")
    [line] = [ln for ln in usage.splitlines() if ln.startswith("jupyter nbconvert --to html")]
    argv = shlex.split(line.split("#")[0])
    assert argv[-1].endswith(".ipynb") and "--template-file" in argv
    template = argv[argv.index("--template-file") + 1]
    makefile = (root / "Makefile").read_text(encoding="utf-8")
    assert f"--template-file {template}" in makefile  # make run/report/compare: the same

    executed = tmp_path / "report.ipynb"  # the report of the default run, executed once
    _assert_clean(default_report.nb)
    shutil.copy(default_report.path, executed)
    proc = subprocess.run(
        [sys.executable, "-m", "jupyter", *argv[1:-1], str(executed)],
        capture_output=True,
        text=True,
        cwd=root,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "Alternative text is missing" not in proc.stderr  # every figure carries its own
    page = executed.with_suffix(".html").read_text(encoding="utf-8")
    assert PR_HEADER in page and 'src="data:image/png;base64,' in page
    assert page.count('class="eb-spec"') >= 5 and page.count('t.version="5.33.0"') == 1
    markup = re.sub(r"<script>.*?</script>", "", page, flags=re.S)  # not the inlined JS's
    images = re.findall(r"<img [^>]*>", markup)
    assert len(images) >= 4 and all(re.search(r'alt="[^"]{40,}"', i) for i in images)
    remote = re.findall(r"""(?:src|href)\s*=\s*["']?(?:https?:)?//""", page, flags=re.I)
    assert not remote, remote
    assert not re.search(r"""import\s*\(\s*["']https?://""", page)  # no module import
    assert "cdnjs" not in page and "require.min.js" not in page and "mathjax" not in page.lower()
