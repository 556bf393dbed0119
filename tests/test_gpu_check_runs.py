"""Smoke tests of benchmarks/gpu_check.sh on a machine without CUDA: the refusal, the
Python its steps feed the interpreter, the dry run on the CPU, in the stand-in GPU image
(another Python, no network) and with carried wheels, and its one-line refusals.

No timing is asserted: the dry runs check files, fields and exit codes only.
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

from embedbench.report import schema

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "benchmarks"


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
# with the line each probe prints when every case passes. The dry runs that check how
# dependencies are installed run one case in one worker (each worker imports torch).
DRY_RUN_DESIGN = ["--allow-busy", "--warmup", "2", "--blocks", "4", "--iterations", "3"]
DRY_RUN_DESIGN += ["--processes", "2"]
DRY_RUN_FLAGS = ["--cases", "audio", *DRY_RUN_DESIGN[:-2], "--processes", "1"]
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
    report, deps = _dry_run_from(checkout, small_checkpoint, env, out)
    installed = deps.split("into a temporary folder: ")[1].split(";")[0].split()
    assert {"platformdirs", "jsonschema", "attrs", "referencing", "rpds_py"} <= set(installed)
    assert "this Python has them: typing_extensions" in deps  # torch's: not shadowed
    assert "platformdirs and jsonschema importable" in deps
    assert "- schema check: passed: " in report  # the carried jsonschema checked the files
    meta = json.loads((out / "run" / "metadata.json").read_text())
    assert meta["status"] == "complete" and meta["device"] == "cpu"
    assert not list(scratch.glob("embedbench-gpu-check-deps.*"))  # removed on exit


def _dry_run_from(checkout: Path, model: Path, env: dict[str, str], out: Path) -> tuple[str, str]:
    """The dry run of ``checkout``'s own gpu_check.sh (``env`` without PYTHONPATH: only the
    image's packages and what the check installs), which must pass: gpu_check.md, written
    under ``out``, and its dependencies line."""
    env = {k: v for k, v in env.items() if k != "PYTHONPATH"}
    script = str(checkout / "benchmarks" / "gpu_check.sh")
    res = subprocess.run(
        ["bash", script, "--model", str(model), *DRY_RUN_FLAGS],
        cwd=checkout,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert res.returncode == 0, res.stderr[-3000:]
    report = (out / "gpu_check.md").read_text()
    return report, _line(report, "- dependencies:")


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
    report, deps = _dry_run_from(wheels.parent, small_checkpoint, env, out)
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
