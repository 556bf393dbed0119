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
import tempfile
import time
import zipfile
from pathlib import Path

import pytest
from helpers import bench_module

from embedbench.report import schema

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
    "canary_shapes": ["--trials", "2"],
    "neighbour_effect": ["--seconds", "2"],
    "host_reference": ["--pairs", "2", "--processes", "1", "--reads", "20", "--hidden", "32"],
    "sim_promises": [],
    "sim_thresholds": [],
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


def _fake_wheel(folder: Path, name: str, files: dict[str, str]) -> Path:
    """A pure-Python wheel ``name-99.0`` holding ``files`` (path: text), as pip installs it."""
    folder.mkdir(parents=True, exist_ok=True)
    wheel = folder / f"{name}-99.0-py3-none-any.whl"
    info = f"{name}-99.0.dist-info"
    meta = {
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: 99.0\n",
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
        "Tag: py3-none-any\n",
    }
    entries = {**files, **meta}
    record = "".join(f"{path},,\n" for path in [*entries, f"{info}/RECORD"])
    with zipfile.ZipFile(wheel, "w") as archive:
        for path, text in {**entries, f"{info}/RECORD": record}.items():
            archive.writestr(path, text)
    return wheel


def test_gpu_check_python_steps_need_no_implicit_imports(tmp_path: Path) -> None:
    """Run isolated (-I -S: no site, nothing pre-imported) as Python 3.12+ behaves, where
    `import importlib` alone leaves importlib.util unset. The wheel step names the wheels
    with a module this Python lacks, then the others (which must not be installed)."""
    snippets = _gpu_check_python_snippets()
    assert len(snippets) >= 3
    dependency_check = next(s for s in snippets if "for m in sys.argv[1:]" in s)
    res = subprocess.run(
        [sys.executable, "-I", "-S", "-c", dependency_check, "json", "no_such_module_here"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert res.returncode == 0 and res.stdout == "no_such_module_here\n", res.stderr
    wheels = tmp_path / "whl"
    _fake_wheel(wheels, "json_bait", {"json/__init__.py": "raise ImportError"})
    _fake_wheel(wheels, "absent_dist", {"absent_mod/__init__.py": "", "json.py": ""})
    _fake_wheel(wheels, "compiled", {"fast_mod.cpython-312-x86_64-linux-gnu.so": ""})
    wheel_step = next(s for s in snippets if "zipfile" in s)
    res = subprocess.run(
        [sys.executable, "-I", "-S", "-c", wheel_step, str(wheels)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines() == ["absent_dist compiled", "json_bait"]
    for snippet in snippets:
        compile(snippet, "gpu_check.sh", "exec")


# The dry runs' design (a few tiny blocks in 2 workers) and the probe on a small table,
# with the line each probe prints when every case passes.
DRY_RUN_DESIGN = ["--allow-busy", "--warmup", "2", "--blocks", "4", "--iterations", "3"]
DRY_RUN_DESIGN += ["--processes", "2"]
DRY_RUN_FLAGS = ["--cases", "audio", *DRY_RUN_DESIGN]
DRY_RUN_PROBE_FLAGS = "--hidden 64 --tokens 300"
PROBE_OK = "probe: {family}, cpu, 300 tokens, hidden 64, all cases ok"
# The lines of gpu_check.md that end with a step's elapsed seconds.
GPU_CHECK_STEPS = ("- device (torch):", "- pinned core:", "- dependencies:")
GPU_CHECK_STEPS += ("- probe qwen2.5-omni:", "- probe qwen3-omni:", "- embedbench run:")
GPU_CHECK_STEPS += ("- gpu_check_report.py:",)


@pytest.mark.slow
def test_gpu_check_dry_run_on_the_cpu_and_a_rerun_is_refused(
    small_checkpoint: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    env = dict(os.environ, PYTHON=sys.executable, OUT=str(out), GPU_CHECK_DEVICE="cpu")
    env["GPU_CHECK_PROBE_FLAGS"] = DRY_RUN_PROBE_FLAGS
    flags = ["--model", str(small_checkpoint), "--cases", "text", "audio", *DRY_RUN_DESIGN]

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
        assert PROBE_OK.format(family=family) in report
    # Every step says how long it took.
    for step in GPU_CHECK_STEPS:
        line = next(ln for ln in report.splitlines() if ln.startswith(step))
        assert re.search(r"\(\d+\.\d s[);]", line), line
    assert re.search(r"the whole check: \d+\.\d s$", report.rstrip()), report[-300:]
    # The sync count's label in the probe and the per-case table; the schema line.
    assert report.count("syncs torch reports (a lower bound)") == 3, report
    assert "| Audio | 1172 | n/a | n/a | n/a (not CUDA) |" in report
    assert "- schema check: passed: metadata.json, micro-raw.json" in report
    written = (out / "run" / "metadata.json").read_bytes()
    files = [p.relative_to(out) for p in out.rglob("*") if p.is_file()]
    assert 4 <= len(files) <= 8, files  # at most 8 result files come back from a GPU box, ...
    assert max(len(f.parts) for f in files) <= 2, files  # ... none below OUT/run/ (2 allowed)

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


def _fetch_wheels(dest: Path, python_version: str | None = None) -> list[str]:
    """gpu_wheels.sh into dest (with an index, as on the machine that prepares the box);
    the distribution names it fetched, checked to be what an image lacks and no more."""
    version = ["--python-version", python_version] if python_version else []
    fetch = subprocess.run(
        ["bash", str(BENCH / "gpu_wheels.sh"), "--dest", str(dest), *version],
        env=dict(os.environ, PYTHON=sys.executable),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert fetch.returncode == 0, fetch.stderr[-2000:]
    fetched = sorted(p.name.split("-")[0].lower() for p in dest.glob("*.whl"))
    assert {"platformdirs", "jsonschema", "referencing", "rpds_py"} <= set(fetched)
    assert not {"torch", "numpy", "pandas", "scipy"} & set(fetched)
    return fetched


def _checkout_with_wheels(dest: Path, wheels: Path) -> Path:
    """A copy of this checkout (no venv, cache or git) carrying a fresh copy of wheels as .whl/."""
    shutil.copytree(
        ROOT,
        dest,
        ignore=shutil.ignore_patterns(
            ".venv", ".cache", ".git", ".whl", "embedbench-results", "*.egg-info"
        ),
    )
    shutil.copytree(wheels, dest / ".whl")
    return dest


@pytest.mark.slow
def test_gpu_check_installs_what_the_image_lacks_from_carried_wheels_offline(
    small_checkpoint: Path, tmp_path: Path
) -> None:
    """gpu_wheels.sh fetches the wheels (here, with an index); gpu_check.sh then runs on an
    image without platformdirs and jsonschema with no index (PIP_NO_INDEX=1) and imports
    them from a copy of that folder."""
    wheels = tmp_path / "fetched"
    _fetch_wheels(wheels)

    python = _gpu_image_python(tmp_path)
    probe = (
        "import importlib.util as u; "
        "print([m for m in ('jsonschema', 'platformdirs', 'torch') if u.find_spec(m)])"
    )
    seen = subprocess.run([str(python), "-c", probe], capture_output=True, text=True)
    assert seen.stdout.strip() == "['torch']", seen.stderr  # the image: torch, not the two

    checkout = _checkout_with_wheels(tmp_path / "checkout", wheels)
    out = tmp_path / "out"
    scratch = tmp_path / "tmp"  # TMPDIR: where the temporary install folder goes
    scratch.mkdir()
    env = dict(os.environ, PYTHON=str(python), OUT=str(out), GPU_CHECK_DEVICE="cpu")
    env.update(
        TMPDIR=str(scratch),
        PIP_NO_INDEX="1",
        PIP_INDEX_URL="http://127.0.0.1:9/none",
        PIP_FIND_LINKS="",
        GPU_CHECK_PROBE_FLAGS=DRY_RUN_PROBE_FLAGS,
    )
    env.pop("PYTHONPATH", None)
    script = str(checkout / "benchmarks" / "gpu_check.sh")
    res = subprocess.run(
        ["bash", script, "--model", str(small_checkpoint), *DRY_RUN_FLAGS],
        cwd=checkout,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert res.returncode == 0, res.stderr[-3000:]
    report = (out / "gpu_check.md").read_text()
    deps = _line(report, "- dependencies:")
    installed = deps.split("into a temporary folder: ")[1].split(";")[0].split()
    assert {"platformdirs", "jsonschema", "attrs", "referencing", "rpds_py"} <= set(installed)
    assert "this Python has them: typing_extensions" in deps  # torch's: not shadowed
    assert "platformdirs and jsonschema importable" in deps
    assert "- schema check: passed: " in report  # the carried jsonschema checked the files
    meta = json.loads((out / "run" / "metadata.json").read_text())
    assert meta["status"] == "complete" and meta["device"] == "cpu"
    assert not list(scratch.glob("embedbench-gpu-check-deps.*"))  # removed on exit


def _line(report: str, start: str) -> str:
    """The one line of gpu_check.md that starts with ``start``."""
    return next(line for line in report.splitlines() if line.startswith(start))


# The one-line notes of a check on an image without platformdirs and jsonschema.
NO_OPTIONAL_NOTES = (
    "platformdirs absent (not needed: the cache is EMBEDBENCH_CACHE)",
    "jsonschema absent (the run's files go without their schema check: see schema check below)",
)


@pytest.mark.slow
def test_gpu_check_installs_from_carried_wheels_only_what_the_image_lacks(
    small_checkpoint: Path, tmp_path: Path
) -> None:
    """Offline, fake wheels: numpy's and typing_extensions' would break the run if they
    shadowed the image's own; platformdirs' is missing there, so it alone is installed.
    No jsonschema is carried: the run goes without the schema check, and says so."""
    python = _gpu_image_python(tmp_path)
    wheels = tmp_path / "checkout" / ".whl"
    shutil.copytree(
        ROOT,
        wheels.parent,
        ignore=shutil.ignore_patterns(".venv", ".cache", ".git", ".whl", "*.egg-info"),
    )
    bait = "raise ImportError('the carried wheel shadowed the image package')\n"
    _fake_wheel(wheels, "numpy", {"numpy/__init__.py": bait})
    _fake_wheel(wheels, "typing_extensions", {"typing_extensions.py": bait})
    cache_dir = "def user_cache_dir(name):\n    return '/nonexistent/' + name\n"
    _fake_wheel(wheels, "platformdirs", {"platformdirs/__init__.py": cache_dir})
    out = tmp_path / "out"
    env = dict(os.environ, PYTHON=str(python), OUT=str(out), GPU_CHECK_DEVICE="cpu")
    env.update(PIP_NO_INDEX="1", GPU_CHECK_PROBE_FLAGS=DRY_RUN_PROBE_FLAGS)
    env.pop("PYTHONPATH", None)
    script = str(wheels.parent / "benchmarks" / "gpu_check.sh")
    res = subprocess.run(
        ["bash", script, "--model", str(small_checkpoint), *DRY_RUN_FLAGS],
        cwd=wheels.parent,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert res.returncode == 0, res.stderr[-3000:]
    report = (out / "gpu_check.md").read_text()
    deps = _line(report, "- dependencies:")
    assert "into a temporary folder: platformdirs;" in deps, deps
    assert "not installed from .whl/, this Python has them: numpy typing_extensions" in deps
    assert "platformdirs absent" not in deps and NO_OPTIONAL_NOTES[1] in deps
    assert _line(report, "- schema check:") == f"- schema check: {schema.SKIPPED_LINE}"
    assert "| Audio (1172 tokens) |" in report
    meta = json.loads((out / "run" / "metadata.json").read_text())
    assert meta["status"] == "complete" and meta["versions"]["numpy"] != "99.0"


# A root folder with another Python, its own torch and neither platformdirs nor jsonschema:
# .ci/gpu_image.sh builds one (Debian trixie: Python 3.13, Debian's torch); CI sets this.
GPU_IMAGE = os.environ.get("EMBEDBENCH_GPU_IMAGE", "")
needs_gpu_image = pytest.mark.skipif(
    not GPU_IMAGE,
    reason="EMBEDBENCH_GPU_IMAGE unset (bash .ci/gpu_image.sh DIR builds one, as root; CI does)",
)


def _in_image(
    image: Path, command: str, env: dict[str, str], timeout: float = 600
) -> subprocess.CompletedProcess:
    """command run by bash inside image (chroot) with only env set, /proc mounted, and no
    network at all: a fresh network namespace has no interface but a downed loopback."""
    assignments = [f"{key}={value}" for key, value in env.items()]
    enter = 'mount -t proc proc "$1/proc" && exec chroot "$@"'
    inside = ["/usr/bin/env", "-i", "PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/root"]
    inside += ["LANG=C.UTF-8", *assignments, "bash", "-c", command]
    return subprocess.run(
        ["unshare", "--net", "--mount", "sh", "-c", enter, "sh", str(image), *inside],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _image_facts(image: Path) -> tuple[str, str]:
    """The image's Python and torch versions, checked to be another Python than this one,
    with neither platformdirs nor jsonschema and no network."""
    assert (image / "usr" / "bin" / "python3").exists(), f"{image} is not an image root"
    facts = _in_image(
        image,
        'python3 -c "import importlib.util as u, platform, socket, torch; '
        "print(platform.python_version(), torch.__version__, "
        "[m for m in ('platformdirs', 'jsonschema') if u.find_spec(m)] == []); "
        "socket.create_connection(('151.101.0.223', 443), timeout=3)\"",
        {},
        timeout=120,
    )
    assert "Network is unreachable" in facts.stderr, facts.stderr[-2000:]  # really offline
    python_version, torch_version, lacks_both = facts.stdout.split()
    assert python_version.split(".")[:2] != sys.version.split(".")[:2]  # another Python
    assert lacks_both == "True"  # as on the lent H200 image: neither package
    return python_version, torch_version


def _check_in_image(
    image: Path, small_checkpoint: Path, wheels: Path | None
) -> tuple[subprocess.CompletedProcess, str, dict]:
    """The exact script run in ``image`` on a copy of this checkout (carrying ``wheels`` as
    .whl/, or no .whl/ at all): its result, gpu_check.md and the run's metadata."""
    work = Path(tempfile.mkdtemp(prefix="embedbench-dry-run-", dir=image / "tmp"))
    try:
        shutil.copytree(
            ROOT,
            work / "checkout",
            ignore=shutil.ignore_patterns(
                ".venv", ".cache", ".git", ".whl", "embedbench-results", "*.egg-info"
            ),
        )
        if wheels is not None:
            shutil.copytree(wheels, work / "checkout" / ".whl")
        shutil.copytree(small_checkpoint, work / "model")
        inside = Path("/") / work.relative_to(image)
        env = {
            "PYTHON": "python3",
            "OUT": f"{inside}/out",
            "GPU_CHECK_DEVICE": "cpu",
            "PIP_NO_INDEX": "1",
            "TMPDIR": str(inside),
            "EMBEDBENCH_CACHE": f"{inside}/cache",
            "GPU_CHECK_PROBE_FLAGS": DRY_RUN_PROBE_FLAGS,  # one argument of env -i
        }
        flags = " ".join(["--model", f"{inside}/model", *DRY_RUN_FLAGS])
        res = _in_image(image, f"bash {inside}/checkout/benchmarks/gpu_check.sh {flags}", env)
        assert res.returncode == 0, res.stderr[-3000:]
        report = (work / "out" / "gpu_check.md").read_text()
        meta = json.loads((work / "out" / "run" / "metadata.json").read_text())
        assert not list(work.glob("embedbench-gpu-check-deps.*"))  # removed on exit
        return res, report, meta
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _assert_measured_in_image(report: str, meta: dict, python: str, torch_version: str) -> None:
    for family in ("qwen2.5-omni", "qwen3-omni"):
        assert PROBE_OK.format(family=family) in report
    assert "| Audio (1172 tokens) |" in report and "| Audio (4096 tokens) |" in report
    assert meta["status"] == "complete" and meta["device"] == "cpu"
    assert meta["versions"]["python"] == python  # measured by the image's Python
    assert meta["torch"] == torch_version  # with the image's torch, untouched


@pytest.mark.slow
@needs_gpu_image
def test_gpu_check_dry_run_in_the_bare_image_with_no_wheels_and_no_network(
    small_checkpoint: Path,
) -> None:
    """The lent image's situation: its own Python and torch, neither platformdirs nor
    jsonschema, no .whl/ and no network. The check runs, prints the table, and says in
    one line each what is absent and that the files went without their schema check."""
    image = Path(GPU_IMAGE)
    python_version, torch_version = _image_facts(image)
    _, report, meta = _check_in_image(image, small_checkpoint, wheels=None)
    deps = _line(report, "- dependencies:")
    assert all(note in deps for note in NO_OPTIONAL_NOTES), deps
    assert "no .whl/ carried, nothing installed" in deps, deps
    assert _line(report, "- schema check:") == f"- schema check: {schema.SKIPPED_LINE}"
    assert meta["schema_check"] == schema.SKIPPED_LINE
    _assert_measured_in_image(report, meta, python_version, torch_version)


@pytest.mark.slow
@needs_gpu_image
def test_gpu_check_dry_run_in_another_python_image_with_no_network(
    small_checkpoint: Path, tmp_path: Path
) -> None:
    """The .whl/ path, for an image that lacks more: the wheels gpu_wheels.sh fetched for
    that image's Python (3.13 in trixie) install offline, and only those it lacks."""
    image = Path(GPU_IMAGE)
    python_version, torch_version = _image_facts(image)
    major_minor = ".".join(python_version.split(".")[:2])
    wheels = tmp_path / "fetched"
    fetched = _fetch_wheels(wheels, major_minor)
    cp = "cp" + major_minor.replace(".", "")
    assert any(f"-{cp}-" in p.name for p in wheels.glob("rpds_py-*.whl")), fetched
    _, report, meta = _check_in_image(image, small_checkpoint, wheels)
    deps = _line(report, "- dependencies:")
    installed = deps.split("into a temporary folder: ")[1].split(";")[0].split()
    assert {"platformdirs", "jsonschema", "referencing", "rpds_py"} <= set(installed), deps
    assert "platformdirs and jsonschema importable" in deps
    assert meta["schema_check"].startswith("passed: ")
    _assert_measured_in_image(report, meta, python_version, torch_version)


def test_gpu_check_names_the_probe_that_timed_out_and_times_nothing(tmp_path: Path) -> None:
    """The Qwen3-Omni probe replaced by a sleep (a hang in CUDA start-up, say): the check
    stops at its limit with 124 and one line naming it; the first probe's line stays."""
    python = tmp_path / "python"
    python.write_text(  # the first probe a quick pass, so that only the second one waits
        "#!/bin/sh\n"
        'case " $* " in *" probe "*" --family qwen2.5-omni "*) echo stand-in; exit 0 ;; esac\n'
        'case " $* " in *" probe "*" --family qwen3-omni "*) exec sleep 60 ;; esac\n'
        f'exec {sys.executable} "$@"\n'
    )
    python.chmod(0o755)
    out = tmp_path / "out"
    env = dict(os.environ, PYTHON=str(python), OUT=str(out), GPU_CHECK_DEVICE="cpu")
    env.update(GPU_CHECK_PROBE_FLAGS="--hidden 16 --tokens 300", GPU_CHECK_PROBE_TIMEOUT="3")
    started = time.monotonic()
    res = subprocess.run(
        ["bash", str(BENCH / "gpu_check.sh"), "--allow-busy"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 124, res.stderr[-2000:]
    assert res.stderr.strip().splitlines()[-1] == (
        "gpu_check: the qwen3-omni probe timed out after 3 s (GPU_CHECK_PROBE_TIMEOUT); "
        "nothing was timed"
    )
    assert time.monotonic() - started < 55  # stopped at the limit, not after the sleep
    report = (out / "gpu_check.md").read_text()
    assert re.search(r"- probe qwen2\.5-omni: exit 0 \(\d+\.\d s\)", report)
    # The step's own time is real timing: never under the limit, and said in the line.
    stopped = re.search(r"- probe qwen3-omni: exit 124 \((\d+\.\d) s\)", report)
    assert stopped and float(stopped[1]) >= 3.0, report[-500:]
    assert not (out / "run").exists()


def test_gpu_check_refuses_a_timeout_that_is_not_whole_seconds(tmp_path: Path) -> None:
    res = subprocess.run(
        ["bash", str(BENCH / "gpu_check.sh")],
        cwd=ROOT,
        env=dict(os.environ, PYTHON=sys.executable, GPU_CHECK_PROBE_TIMEOUT="1.5"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert res.returncode == 2
    assert res.stderr.strip().splitlines() == [
        "gpu_check: GPU_CHECK_PROBE_TIMEOUT must be a whole number of seconds, got '1.5'"
    ]


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
def test_between_runs_quick(small_checkpoint: Path, tmp_path: Path) -> None:
    """The live path: two quick runs back to back (its reduced design must be a valid run)."""
    flags = ["--quick", "--runs", "2", "--keep", str(tmp_path / "kept")]
    extra = ["--", "--model", str(small_checkpoint), "--cases", "audio", "--allow-busy"]
    res = _run([str(BENCH / "between_runs.py"), *flags, *extra], tmp_path, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    assert "| Audio |" in res.stdout and "SD ÷ within-run SE" in res.stdout
    assert len(list((tmp_path / "kept").glob("run*/summary.json"))) == 2


def _kept_run(where: Path, workers: list[float]) -> None:
    """A kept run directory as between_runs.py --keep leaves it, one case (audio)."""
    where.mkdir(parents=True)
    mean = sum(workers) / len(workers)
    row = {
        "case": "audio",
        "label": "Audio",
        "reduction_pct": mean,
        "reduction_ci95_pct": [mean - 1.0, mean + 1.0],
        "worker_reduction_pct": workers,
    }
    (where / "summary.json").write_text(json.dumps([row]))
    (where / "metadata.json").write_text(
        json.dumps({"processes": len(workers), "start_time": 100.0, "end_time": 130.0})
    )


def test_between_runs_pools_kept_sets_and_reports_calibration(tmp_path: Path) -> None:
    """--from analyses kept runs of two sets as one; the calibration column is the
    between-run SD over the RMS of each run's own standard error, with its F-test p."""
    import numpy as np
    from scipy import stats

    sets = {
        "a": [[40.0, 42.0, 41.0], [44.0, 43.0, 45.0]],
        "b": [[39.0, 41.5, 40.0], [46.0, 44.5, 45.5]],
    }
    for name, runs in sets.items():
        for i, workers in enumerate(runs):
            _kept_run(tmp_path / name / f"run{i:02d}", workers)
    res = _run(
        [str(BENCH / "between_runs.py"), "--from", str(tmp_path / "a"), str(tmp_path / "b")],
        tmp_path,
    )
    assert res.returncode == 0, res.stderr[-2000:]
    workers = [np.array(w) for runs in sets.values() for w in runs]
    means = np.array([w.mean() for w in workers])
    within = np.mean([w.var(ddof=1) / len(w) for w in workers])
    ratio = float(np.sqrt(means.var(ddof=1) / within))
    p = float(stats.f.sf(ratio**2, len(means) - 1, sum(len(w) - 1 for w in workers)))
    assert ratio > 2 and p < 0.01  # these runs differ far more than their workers do
    row = next(line for line in res.stdout.splitlines() if line.startswith("| Audio |"))
    assert f"| {ratio:.2f} (p {p:.2f}) |" in row, row
    assert "4 runs kept under" in res.stdout and "analysed together" in res.stdout

    empty = tmp_path / "empty"
    empty.mkdir()
    bad = _run([str(BENCH / "between_runs.py"), "--from", str(empty)], tmp_path)
    assert bad.returncode == 2
    assert bad.stderr.strip() == f"between_runs: no kept runs (run*/summary.json) under {empty}"


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


@pytest.mark.slow
def test_interference_quick_counts_labels_and_reanalyses_kept_runs(
    small_checkpoint: Path, tmp_path: Path
) -> None:
    """The live path with a real neighbour (quiet, then the toggled hog), then --from."""
    kept = tmp_path / "kept"
    flags = ["--quick", "--pairs", "1", "--keep", str(kept), "--side-by-side", "1"]
    extra = ["--", "--model", str(small_checkpoint), "--cases", "text", "--allow-busy"]
    res = _run([str(BENCH / "interference.py"), *flags, *extra], tmp_path, timeout=400)
    assert res.returncode == 0, res.stderr[-2000:]
    for heading in ("#### Detection", "#### Unlabelled runs", "#### Every run"):
        assert heading in res.stdout
    assert "#### embedbench and pyperf on known pairs" in res.stdout
    assert re.search(r"\| same \| [^|]+ \| embedbench \| [01] / 1 \|", res.stdout)
    assert (kept / "side_by_side.json").is_file()
    assert "| quiet | 1 |" in res.stdout and "| hog on/off 3 s | 1 |" in res.stdout
    assert "Canary cost: at most" in res.stdout
    assert sorted(p.read_text() for p in kept.glob("run*.condition")) == [
        "hog on/off 3 s",
        "quiet",
    ]
    again = _run([str(BENCH / "interference.py"), "--from", str(kept)], tmp_path)
    assert again.returncode == 0, again.stderr[-2000:]
    assert "| quiet | 1 |" in again.stdout
    replayed = _run([str(BENCH / "host_reference.py"), "--replay", str(kept)], tmp_path)
    assert replayed.returncode == 0, replayed.stderr[-2000:]
    assert "| 5 % | quiet | 1 |" in replayed.stdout
    assert "#### embedbench and pyperf on known pairs" in again.stdout


@pytest.mark.parametrize(
    ("printed", "verdict", "reduction"),
    [
        (
            "Mean +- std dev: [a] 2.41 ms +- 0.71 ms -> [b] 1.83 ms +- 0.12 ms: 1.32x faster\n"
            "Not significant!",
            "no detectable difference",
            24.07,
        ),
        (
            "Mean +- std dev: [a] 950 us +- 10 us -> [b] 1.00 ms +- 0.01 ms: 1.05x slower",
            "slower",
            -5.26,
        ),
        (
            "Mean +- std dev: [a] 1.00 ms +- 0.01 ms -> [b] 900 us +- 9 us: 1.11x faster",
            "faster",
            10.0,
        ),
    ],
)
def test_pyperf_compare_to_output_gives_its_verdict_and_reduction(printed, verdict, reduction):
    got_verdict, got_reduction = bench_module("side_by_side").compare_to_verdict(printed)
    assert got_verdict == verdict
    assert got_reduction == pytest.approx(reduction, abs=0.01)


def test_pyperf_compare_to_output_without_a_verdict_is_an_error():
    with pytest.raises(ValueError, match="no verdict"):
        bench_module("side_by_side").compare_to_verdict(
            "Benchmark hidden because not significant (1): x"
        )


def test_side_by_side_scores_right_verdicts_per_pair_and_tool():
    sbs = bench_module("side_by_side")
    tries = [
        {
            "tool": "embedbench",
            "pair": "blake2b",
            "verdict": "faster",
            "reduction_pct": 4.9,
            "ci95_pct": [2.0, 7.0],
            "wall_s": 10.0,
        },
        {
            "tool": "embedbench",
            "pair": "blake2b",
            "verdict": "no detectable difference",
            "reduction_pct": 1.0,
            "ci95_pct": [-1.0, 3.0],
            "wall_s": 12.0,
        },
        {
            "tool": "pyperf",
            "pair": "same",
            "verdict": "slower",
            "reduction_pct": -3.0,
            "ci95_pct": None,
            "wall_s": 30.0,
        },
    ]
    scored = sbs.score(tries)
    assert scored[("blake2b", "embedbench")]["right"] == 1
    assert scored[("blake2b", "embedbench")]["tries"] == 2
    assert scored[("same", "pyperf")]["right"] == 0
    text = sbs.table(tries)
    assert "| blake2b |" in text and "| 1 / 2 |" in text and "| 0 / 1 |" in text
    assert "4.9 % [2.0, 7.0] faster" in text and "11.0" in text


def test_canary_ab_alternates_which_arm_goes_first():
    order = bench_module("canary_ab").arm_order(3)
    assert order == ["on", "off", "off", "on", "on", "off"]


def test_canary_ab_sd_test_tells_equal_from_different_spreads():
    ab = bench_module("canary_ab")
    wide, narrow = [0.0, 4.0, -4.0, 8.0, -8.0, 2.0], [0.0, 0.1, -0.1, 0.2, -0.2, 0.05]
    assert ab.sd_ratio_p(wide, narrow) < 0.01
    assert ab.sd_ratio_p(narrow, wide) < 0.01
    assert ab.sd_ratio_p(wide, [2 * x for x in wide[::-1]]) > 0.05


@pytest.mark.slow
def test_canary_ab_quick_runs_both_arms_and_reanalyses(small_checkpoint: Path, tmp_path: Path):
    kept = tmp_path / "kept"
    flags = ["--quick", "--keep", str(kept)]
    extra = ["--", "--model", str(small_checkpoint), "--cases", "text", "--allow-busy"]
    res = _run([str(BENCH / "canary_ab.py"), *flags, *extra], tmp_path, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    assert "#### Canary on against off, per case" in res.stdout and "| Text |" in res.stdout
    assert re.search(r"\| on \| 1 \|", res.stdout) and re.search(r"\| off \| 1 \|", res.stdout)
    assert sorted(p.read_text() for p in kept.glob("run*.arm")) == ["off", "on"]
    off_dir = next(p.with_suffix("") for p in kept.glob("run*.arm") if p.read_text() == "off")
    assert json.loads((off_dir / "metadata.json").read_text()).get("host_probes") in (None, [])
    again = _run([str(BENCH / "canary_ab.py"), "--from", str(kept)], tmp_path)
    assert again.returncode == 0, again.stderr[-2000:]
    assert "#### Wall time" in again.stdout


@pytest.mark.slow
def test_checkout_ab_runs_two_checkouts_in_turn_and_reanalyses_them(
    small_checkpoint: Path, tmp_path: Path
) -> None:
    kept = tmp_path / "ab"
    design = ["--model", str(small_checkpoint), "--lengths", "300", "--cases", "text"]
    design += ["--blocks", "4", "--iterations", "5", "--warmup", "2", "--allow-busy"]
    flags = ["--quick", "--arm", f"a={ROOT}", "--arm", f"b={ROOT}", "--keep", str(kept)]
    res = _run([str(BENCH / "checkout_ab.py"), *flags, "--", *design], tmp_path, timeout=400)
    assert res.returncode == 0, res.stderr[-2000:]
    assert sorted(p.name for p in kept.iterdir()) == ["run00-a", "run01-b"]
    assert "| a | text | 1 |" in res.stdout and "| b | text | 1 |" in res.stdout
    again = _run([str(BENCH / "checkout_ab.py"), "--from", str(kept)], tmp_path)
    assert again.returncode == 0 and "| a | text | 1 |" in again.stdout
    one = _run([str(BENCH / "checkout_ab.py"), "--arm", f"a={ROOT}"], tmp_path)
    assert one.returncode == 2 and "give two --arm" in one.stderr
    assert "Traceback" not in one.stderr


def test_interference_alternates_only_the_neighbours_asked_for(tmp_path: Path) -> None:
    interference = bench_module("interference")
    kinds = interference.neighbour_kinds("toggled, always")
    assert kinds == (interference.TOGGLED, interference.ALWAYS)
    assert interference.schedule(3, kinds) == [
        *(interference.QUIET, interference.TOGGLED, interference.QUIET),
        *(interference.ALWAYS, interference.QUIET, interference.TOGGLED),
    ]
    # Quiet runs first build the host's quiet reference.
    assert interference.schedule(1, kinds, warm=2) == [interference.QUIET] * 3 + [
        interference.TOGGLED
    ]
    assert interference.neighbour_kinds(None) == interference.NEIGHBOURS
    res = _run([str(BENCH / "interference.py"), "--neighbours", "hog,spin"], tmp_path)
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert res.stderr.strip().splitlines() == [
        "interference.py: unknown --neighbours hog; use a comma-separated list of "
        "toggled, always, bursts, spin"
    ]


def test_the_canary_cost_counts_every_read_the_canary_makes() -> None:
    interference = bench_module("interference")
    from embedbench.harness.canary import PROBE_COPIES, ROW_SETS

    records = [{"canary_us_start": 100.0, "canary_us_end": 200.0}, {"canary_us_start": 50.0}]
    probes = [
        {"worker": 0, "median_us": 10.0, "samples_us": [10.0] * 16, "pace_us": 2.0},
        {"worker": 0, "median_us": 30.0, "samples_us": [30.0] * 16, "attempts": 3},
        {"worker": 1, "median_us": 20.0, "samples_us": [20.0] * 16, "pace_us": 1.0},
    ]
    edges = 350.0
    reads = 160.0 + (480.0 + 30.0 * PROBE_COPIES * 2) + 320.0
    pace = 2.0 * PROBE_COPIES + 1.0 * PROBE_COPIES
    warm = ROW_SETS * (10.0 + 20.0)  # each worker's first probe sets its warm reads' time
    seconds = interference.canary_seconds({"host_probes": probes}, records)
    assert seconds == pytest.approx((edges + reads + pace + warm) / 1e6)


def _kept_position_run(where: Path, workers: int, level: float, stall: float | None) -> None:
    """A kept run as worker_position.py --keep leaves it: text, two blocks per worker,
    calls at ``level`` µs; with ``stall``, worker 0's first call takes that long."""
    where.mkdir(parents=True)
    records = []
    for worker in range(workers):
        for block in range(2):
            for position, variant in enumerate(("baseline", "fixed")):
                samples = [[level, level, level] for _ in range(10)]
                if stall and worker == 0 and block == 0 and variant == "baseline":
                    samples[0] = [stall, stall, stall]
                start = 1000.0 + worker * 10 + block * 2 + position
                records.append(
                    {
                        "case": "text",
                        "tokens": 300,
                        "variant": variant,
                        "block": worker * 2 + block,
                        "worker": worker,
                        "samples_us": samples,
                        "wall_start": start,
                        "minor_faults": 2051 if samples[0][0] == stall else 0,
                    }
                )
    parent = {"measuring_s": 1.0, "cpu_s": 0.01, "written_bytes": 0, "other_read_bytes": 0}
    meta = {
        "processes": workers,
        "workers": [{"worker": w, "parent_while_measuring": parent} for w in range(workers)],
    }
    (where / "metadata.json").write_text(json.dumps(meta))
    (where / "micro-raw.json").write_text(json.dumps(records))


def test_worker_position_reads_kept_pairs_and_counts_first_block_stalls(tmp_path: Path) -> None:
    kept = tmp_path / "kept"
    for index, (workers_us, single_us) in enumerate([(110.0, 100.0), (121.0, 110.0)]):
        _kept_position_run(kept / f"pair{index:02d}-workers", 3, workers_us, stall=2000.0)
        _kept_position_run(kept / f"pair{index:02d}-single", 1, single_us, stall=None)
    module = bench_module("worker_position")
    pairs = module._kept_pairs(kept)
    stalls = module.stall_counts([p["workers"] for p in pairs])
    assert stalls["counts"]["first"] == [2, 120, 2, 12]  # one slow, faulted call per run
    assert stalls["counts"]["other"] == [0, 120, 0, 12]
    (text_baseline, _fixed) = module.level_rows(pairs)
    assert text_baseline["ratio_pct"] == pytest.approx(10.0)  # 110/100 and 121/110
    assert text_baseline["agree"] is False  # the runs differ less (SD ~7 %) than the modes
    res = _run([str(BENCH / "worker_position.py"), "--from", str(kept)], tmp_path)
    assert res.returncode == 0, res.stderr[-2000:]
    assert "| workers | first block | 2 / 120 | 2 / 12 |" in res.stdout
    assert "#### The parent while workers measured" in res.stdout
    empty = tmp_path / "empty"
    empty.mkdir()
    bad = _run([str(BENCH / "worker_position.py"), "--from", str(empty)], tmp_path)
    assert bad.returncode == 2
    assert bad.stderr.strip().startswith("worker_position: no kept pairs")
