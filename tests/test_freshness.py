"""The freshness check: a module edited on disk after import is refused, in one line.

Each test imports a small module from a temporary directory under a fresh name, edits
its file, and checks again in this same process, as a reused notebook kernel would.
"""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
import textwrap
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType

import pytest
from helpers import QUICK_DESIGN

from embedbench import measure as measure_module
from embedbench.cli import main
from embedbench.errors import StaleCodeError
from embedbench.harness import freshness
from embedbench.report.results import RESULT_FILES

ROOT = Path(__file__).resolve().parents[1]

SOURCE = '''\
"""A module under test."""


def helper(x):
    return x + 1


class Shim:
    def embed(self, ids):
        return helper(ids) * 2

    @property
    def size(self):
        return 3

    @staticmethod
    def build():
        return [i for i in range(3)]


if False:

    def never():  # defined in a branch not taken: not an addition
        return 0


def _once():
    return 1


VALUE = _once()
del _once  # defined, used and deleted: not an addition either
'''

Importer = Callable[..., ModuleType]


@pytest.fixture
def load(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Importer]:
    """Write ``files`` (relative path: text) under a fresh package and import ``module``."""
    names: list[str] = []
    monkeypatch.syspath_prepend(str(tmp_path))

    def importer(files: dict[str, str], module: str = "mod") -> ModuleType:
        package = f"fresh_{uuid.uuid4().hex[:12]}"
        (tmp_path / package).mkdir()
        (tmp_path / package / "__init__.py").write_text("")
        for relative, text in files.items():
            path = tmp_path / package / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        names.append(package)
        importlib.invalidate_caches()
        return importlib.import_module(f"{package}.{module}")

    yield importer
    for name in [n for n in sys.modules if n.split(".")[0] in names]:
        del sys.modules[name]


def _edit(module: ModuleType, old: str, new: str) -> None:
    path = Path(module.__file__)
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new))


def _stale(module: ModuleType, **kwargs: object) -> str:
    with pytest.raises(StaleCodeError) as caught:
        freshness.check_modules([module.__name__], **kwargs)
    message = str(caught.value)
    assert "\n" not in message, message
    assert message.startswith(f"stale code: module {module.__name__} changed on disk"), message
    assert "restart the kernel (or Python process)" in message, message
    return message


def test_an_unchanged_module_is_fresh_with_a_branch_not_taken_and_a_deleted_helper(load):
    module = load({"mod.py": SOURCE})
    report = freshness.check_modules([module.__name__, "not.loaded.anywhere"])
    assert report.modules == (module.__name__,)
    # helper, Shim.embed, Shim.size, Shim.build (its list comprehension is nested code)
    assert report.functions == 4
    assert report.to_json()["checked_modules"] == [module.__name__]


EDITS = {
    "function body": ("return x + 1", "return x - 1", "helper: bytecode differs"),
    "method constant": ("* 2", "* 3", "Shim.embed: constants differ"),
    "property": ("return 3", "return 4", "Shim.size: constants differ"),
    "nested comprehension": ("range(3)", "range(4)", "Shim.build: constants differ"),
    "argument": ("def helper(x):", "def helper(x, y=0):", "helper: arguments or flags differ"),
}


@pytest.mark.parametrize("edit", sorted(EDITS))
def test_code_edited_on_disk_after_import_is_stale_in_one_line(edit, load):
    module = load({"mod.py": SOURCE})
    old, new, fragment = EDITS[edit]
    _edit(module, old, new)
    message = _stale(module)
    assert f"({module.__file__}: {fragment})" in message, message


def test_an_added_function_or_method_is_stale(load):
    module = load({"mod.py": SOURCE})
    _edit(module, "class Shim:\n", "class Shim:\n    def extra(self):\n        pass\n\n")
    Path(module.__file__).write_text(
        Path(module.__file__).read_text() + "\n\ndef added():\n    pass\n"
    )
    message = _stale(module)
    assert "Shim.extra is new in the file" in message and "added is new in the file" in message


def test_a_removed_or_renamed_function_is_stale(load):
    module = load({"mod.py": SOURCE})
    _edit(module, "def helper(x):", "def helper2(x):")
    message = _stale(module)
    assert "helper is no longer in the file (removed or renamed)" in message
    assert "helper2 is new in the file" in message


def test_comments_blank_lines_and_shifted_code_are_fresh_because_line_numbers_are_not_compared(
    load,
):
    module = load({"mod.py": SOURCE})
    shifted = SOURCE.replace('"""A module under test."""', '"""A module under test."""\n# a\n\n')
    shifted = shifted.replace(
        "        return helper(ids) * 2", "        # why\n\n        return helper(ids) * 2  # note"
    )
    Path(module.__file__).write_text(shifted)
    assert freshness.check_modules([module.__name__]).modules == (module.__name__,)


def test_bytecode_specialized_by_many_calls_still_matches_the_file(load):
    module = load({"mod.py": SOURCE})
    shim = module.Shim()
    for i in range(5000):  # the adaptive interpreter quickens hot code in place
        shim.embed(i)
    freshness.check_modules([module.__name__])


def test_a_deleted_file_is_stale(load):
    module = load({"mod.py": SOURCE})
    Path(module.__file__).unlink()
    assert "its file cannot be read now" in _stale(module)


def test_the_measured_function_is_named_first(load):
    module = load({"mod.py": SOURCE})
    _edit(module, "return x + 1", "return x - 1")
    _edit(module, "* 2", "* 3")
    message = _stale(module, named_first={"Shim.embed"})
    assert message.index("Shim.embed:") < message.index("helper:"), message


def test_a_checkout_module_that_an_import_would_now_take_elsewhere_is_stale(load, tmp_path):
    module = load({"mod.py": SOURCE})
    package = Path(module.__file__).parent
    (package / "mod").mkdir()  # a package of the same name now shadows mod.py
    (package / "mod" / "__init__.py").write_text(SOURCE)
    freshness.check_modules([module.__name__])  # outside a checkout: only the code counts
    message = _stale(module, checkout=tmp_path)
    assert f"importing it now would load {package / 'mod' / '__init__.py'}" in message


def test_modules_not_compiled_by_the_source_loader_are_skipped():
    # This test module was rewritten by pytest's assertion rewriter: not comparable.
    assert freshness.source_path(sys.modules[__name__]) is None
    assert freshness.check_modules([__name__, "sys", "json"]).modules == ("json",)


def test_dependency_modules_follow_the_mro_global_names_and_local_imports(load):
    shim = (
        "import json\nfrom .base import Base\nfrom .tags import tag\n\n\n"
        "class Shim(Base):\n    def embed(self, x):\n"
        "        return self.merge(tag(json.dumps(x)))\n"
    )
    files = {
        "base.py": "class Base:\n    def merge(self, x):\n        from .helpers import scatter\n"
        "        return scatter(x)\n",
        "helpers.py": "def scatter(x):\n    return x\n",
        "tags.py": "def tag(x):\n    return x\n",
        "mod.py": shim,
    }
    module = load(files)
    package = module.__name__.rpartition(".")[0]
    found = freshness.dependency_modules([module.Shim], [module.Shim().embed])
    # helpers is not imported until merge first runs: then it is imported fresh.
    assert set(found) == {f"{package}.{name}" for name in ("mod", "base", "tags")}
    module.Shim().embed(1)
    found = freshness.dependency_modules([module.Shim], [module.Shim().embed])
    assert set(found) == {f"{package}.{name}" for name in ("mod", "base", "tags", "helpers")}


def test_the_reference_target_is_fresh_in_a_fresh_process():
    script = textwrap.dedent(
        """
        import json
        from helpers import TOKEN_IDS, seeded_table
        from embedbench import measure
        from embedbench.omni.targets.reference import build_reference_target
        facts = TOKEN_IDS
        facts.hidden_size = 8
        target = build_reference_target(seeded_table(8), facts)
        report = measure.check_fresh(target)
        print(json.dumps(report.to_json()))
        """
    )
    proc = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        cwd=ROOT / "tests",
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    for module in (
        "embedbench.omni.targets.reference",
        "torch.nn.modules.module",
        "embedbench.harness.timing",
    ):
        assert module in report["checked_modules"], report
    # How long the check takes is real timing (docs/archive/PERFORMANCE-2026-11.md,
    # "Stale-code check cost"): recorded, never judged here.
    assert report["functions_compared"] > 0 and report["seconds"] >= 0, report


@pytest.mark.e2e
def test_a_stale_target_module_refuses_the_run_before_writing(
    load, small_checkpoint, tmp_path, monkeypatch, capsys
):
    module = load({"mod.py": SOURCE})
    build = measure_module.build_target

    def target_with_module(*args: object, **kwargs: object):
        target = build(*args, **kwargs)
        target.modules = (*target.modules, module.__name__)
        return target

    monkeypatch.setattr(measure_module, "build_target", target_with_module)
    _edit(module, "* 2", "* 3")
    out = tmp_path / "out"
    argv = [
        *("run", "--model", str(small_checkpoint), *QUICK_DESIGN, "--processes", "1"),
        *("--cases", "text", "--allow-busy", "--no-progress", "--output-dir", str(out)),
    ]
    assert main(argv) == 2
    err = capsys.readouterr().err  # a busy-core warning (--allow-busy) may come first
    errors = [line for line in err.splitlines() if line.startswith("embedbench:")]
    assert len(errors) == 1 and "Traceback" not in err, err
    assert errors[0].startswith(f"embedbench: error: stale code: module {module.__name__}"), err
    assert not out.exists()  # as every refusal: no output directory at all


def test_a_run_records_its_freshness_checks(small_run_dir):
    meta = json.loads((small_run_dir / "metadata.json").read_text())
    fresh = meta["code_fresh"]
    assert "embedbench.omni.targets.reference" in fresh["checked_modules"]
    assert "embedbench.runner" in fresh["parent"]["checked_modules"]
    assert fresh["functions_compared"] > 0 and fresh["seconds"] >= 0
    assert all("code_fresh_s" in worker for worker in meta["workers"])
    assert set(RESULT_FILES) <= {p.name for p in small_run_dir.iterdir()}
