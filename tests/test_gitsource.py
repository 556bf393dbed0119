"""gitsource: a method at a git ref, compiled against the live class, and its errors."""

from __future__ import annotations

import importlib.util
import sys
import traceback
from pathlib import Path
from types import MethodType, ModuleType

import pytest
from helpers import git

from embedbench.errors import EmbedbenchError, GitSourceError
from embedbench.omni import gitsource

PATH = "pkg/greeter.py"

OLD = '''\
"""Greeter, old form."""


class Base:
    def greet(self, name):
        return f"hello {name}"


class Greeter(Base):
    def greet(self, name):
        # old: goes through the parent, then decorates
        return super().greet(name) + " (old)"

    def fail(self):
        raise RuntimeError("old failure")
'''

NEW = '''\
"""Greeter, new form."""


class Base:
    def greet(self, name):
        return f"hello {name}"


class Greeter(Base):
    def greet(self, name):
        return super().greet(name).upper()

    def fail(self):
        raise RuntimeError("new failure")
'''


def _commit(repo: Path, files: dict[str, str], message: str) -> str:
    for rel, text in files.items():
        target = repo / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message)
    return git(repo, "rev-parse", "HEAD")


def _load(path: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def repo(tmp_path: Path) -> tuple[Path, str, str]:
    """A repository with OLD in the first commit and NEW in the second (checked out)."""
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q")
    first = _commit(root, {PATH: OLD, "README": "x\n"}, "old")
    second = _commit(root, {PATH: NEW}, "new")
    return root, first, second


@pytest.fixture
def live(repo, request) -> ModuleType:
    root, _, _ = repo
    name = f"embedbench_test_greeter_{request.node.name.replace('[', '_').replace(']', '_')}"
    module = _load(root / PATH, name)
    yield module
    sys.modules.pop(name, None)


def test_old_method_resolves_zero_argument_super_through_the_live_class(repo, live):
    root, first, _ = repo
    source = gitsource.method_at_ref(root, first, PATH, live.Greeter, "greet")
    assert source.sha == first
    instance = live.Greeter()
    assert MethodType(source.function, instance)("ada") == "hello ada (old)"
    # The live method is untouched and still the new form.
    assert instance.greet("ada") == "HELLO ADA"
    cell = source.function.__closure__[source.function.__code__.co_freevars.index("__class__")]
    assert cell.cell_contents is live.Greeter
    assert source.function.__qualname__ == "Greeter.greet"


def test_old_method_runs_in_a_copy_of_the_live_globals(repo, live):
    root, first, _ = repo
    source = gitsource.method_at_ref(root, first, PATH, live.Greeter, "greet")
    assert source.function.__globals__ is not vars(live)
    assert source.function.__globals__["Base"] is live.Base
    assert "__embedbench_factory__" not in source.function.__globals__
    assert "__embedbench_factory__" not in vars(live)


def test_worktree_means_the_live_method(repo, live):
    root, _, _ = repo
    source = gitsource.method_at_ref(root, gitsource.WORKTREE, PATH, live.Greeter, "greet")
    assert source.function is live.Greeter.__dict__["greet"]
    assert source.sha is None


def test_ref_names_are_resolved_like_shas(repo, live):
    root, first, second = repo
    assert gitsource.resolve_ref(root, "HEAD~1") == first
    assert gitsource.resolve_ref(root, first[:10]) == first
    source = gitsource.method_at_ref(root, "HEAD~1", PATH, live.Greeter, "greet")
    assert source.sha == first
    assert source.filename == f"<git HEAD~1={first[:12]}:{PATH}>"
    assert gitsource.head_commit(root) == second


def test_traceback_shows_the_historical_source_line(repo, live):
    root, first, _ = repo
    source = gitsource.method_at_ref(root, first, PATH, live.Greeter, "fail")
    assert source.filename == f"<git {first}:{PATH}>"
    with pytest.raises(RuntimeError) as info:
        MethodType(source.function, live.Greeter())()
    text = "".join(traceback.format_exception(info.value))
    assert f'File "<git {first}:{PATH}>", line 15, in fail' in text
    assert 'raise RuntimeError("old failure")' in text


def test_dirty_state_tracks_tracked_files_only(repo):
    root, _, _ = repo
    assert gitsource.is_dirty(root) is False
    (root / "untracked.txt").write_text("results\n")
    assert gitsource.is_dirty(root) is False
    (root / "README").write_text("changed\n")
    assert gitsource.is_dirty(root) is True


def test_check_method_needs_no_live_class(repo):
    root, first, _ = repo
    assert gitsource.check_method(root, first, PATH, "Greeter", "greet") == first


def test_subdirectory_of_a_repo_is_accepted(repo):
    root, first, _ = repo
    assert gitsource.repo_root(root / "pkg") == root.resolve()
    assert gitsource.check_method(root / "pkg", first, PATH, "Greeter", "greet") == first


# ------------------------------------------------------------------------------ errors


def _one_line(error: pytest.ExceptionInfo[GitSourceError]) -> str:
    message = str(error.value)
    assert isinstance(error.value, EmbedbenchError)
    assert "\n" not in message and message
    return message


def test_not_a_git_repository(tmp_path):
    plain = tmp_path / "plain"
    plain.mkdir()
    with pytest.raises(GitSourceError) as info:
        gitsource.resolve_ref(plain, "HEAD")
    assert "is not a git repository" in _one_line(info)


def test_missing_repository(tmp_path):
    with pytest.raises(GitSourceError) as info:
        gitsource.repo_root(tmp_path / "nope")
    assert "does not exist" in _one_line(info)


def test_unknown_ref_says_how_to_fetch_it(repo):
    root, _, _ = repo
    sha = "01a2f93256975c7ff9565c5414b0fe0225bc4765"
    with pytest.raises(GitSourceError) as info:
        gitsource.resolve_ref(root, sha)
    assert f"git -C {root.resolve()} fetch origin {sha}" in _one_line(info)


@pytest.mark.parametrize("ref", ["-h", "--output=/tmp/x", "-"])
def test_option_like_refs_are_refused(repo, ref):
    root, _, _ = repo
    with pytest.raises(GitSourceError) as info:
        gitsource.resolve_ref(root, ref)
    assert "starts with '-'" in _one_line(info)


def test_file_missing_at_ref(repo, live):
    root, first, _ = repo
    with pytest.raises(GitSourceError) as info:
        gitsource.method_at_ref(root, first, "pkg/other.py", live.Greeter, "greet")
    assert "pkg/other.py does not exist at" in _one_line(info)


def test_class_missing_at_ref(repo):
    root, first, _ = repo
    with pytest.raises(GitSourceError) as info:
        gitsource.check_method(root, first, PATH, "Stranger", "greet")
    assert "class Stranger is not defined" in _one_line(info)


def test_method_missing_at_ref(repo, live):
    root, first, _ = repo
    with pytest.raises(GitSourceError) as info:
        gitsource.method_at_ref(root, first, PATH, live.Greeter, "wave")
    assert "has no method wave" in _one_line(info)


def test_method_that_does_not_compile(repo, live):
    root, _, _ = repo
    broken = _commit(root, {PATH: NEW.replace("def fail(self):", "def fail(self)")}, "broken")
    with pytest.raises(GitSourceError) as info:
        gitsource.method_at_ref(root, broken, PATH, live.Greeter, "greet")
    message = _one_line(info)
    assert "does not compile" in message and "line 13" in message


def test_method_whose_definition_fails_against_the_live_module(repo, live):
    root, _, _ = repo
    live_def = "def greet(self, name):\n        return super()"
    assert NEW.count(live_def) == 1
    text = NEW.replace(live_def, "def greet(self, name: Gone):\n        return super()")
    sha = _commit(root, {PATH: text}, "annotation names a removed helper")
    with pytest.raises(GitSourceError) as info:
        gitsource.method_at_ref(root, sha, PATH, live.Greeter, "greet")
    assert "NameError" in _one_line(info)


def test_worktree_method_missing(repo, live):
    root, _, _ = repo
    with pytest.raises(GitSourceError) as info:
        gitsource.method_at_ref(root, gitsource.WORKTREE, PATH, live.Greeter, "wave")
    assert "has no wave" in _one_line(info)
