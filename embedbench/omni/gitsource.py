"""A method's source at a git revision, compiled against the live class.

``method_at_ref`` reads a file with ``git show REF:PATH``, finds one class's method
with ``ast`` and compiles it inside a factory function whose ``__class__`` argument
becomes the method's ``__class__`` cell, bound to the *live* class: zero-argument
``super()`` in the old method then resolves through the real MRO. The method runs in
a copy of the live module's globals, so it sees today's helpers without changing the
module. The code's filename names the ref and the path (``<git REF:PATH>``) and the
old source is registered with ``linecache``, so tracebacks show the historical lines.
``WORKTREE`` means the live class's own method, unchanged.

Git runs with an argument list (never a shell); a ref starting with ``-`` is refused.
Every failure is a :class:`GitSourceError` with a one-line message.
"""

from __future__ import annotations

import ast
import contextlib
import linecache
import os
import subprocess
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from embedbench.config import WORKTREE
from embedbench.errors import GitSourceError

__all__ = [
    "WORKTREE",
    "MethodSource",
    "check_method",
    "compile_method",
    "find_method_node",
    "head_commit",
    "is_dirty",
    "method_at_ref",
    "read_source",
    "repo_root",
    "resolve_ref",
]

_FACTORY = "__embedbench_factory__"
# Variables that would point git at another repository than the one asked for.
_GIT_ENV_DROP = ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY")


@dataclass(frozen=True)
class MethodSource:
    """A method taken from ``ref`` (``sha`` resolved; both ``WORKTREE``/None for the
    live method) and the filename its code carries."""

    function: Callable[..., Any]
    ref: str
    sha: str | None
    path: str
    filename: str


def _fail(message: str) -> GitSourceError:
    return GitSourceError(" ".join(message.split()))


def _first_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[0] if lines else ""


def _git(repo: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    env = {k: v for k, v in os.environ.items() if k not in _GIT_ENV_DROP}
    env["LC_ALL"] = "C"
    env["GIT_TERMINAL_PROMPT"] = "0"
    try:
        return subprocess.run(
            ["git", "-C", str(repo), *args],
            capture_output=True,
            env=env,
            check=False,
            stdin=subprocess.DEVNULL,
        )
    except FileNotFoundError:
        raise _fail("git is not installed (not found on PATH); install git") from None


def _check_ref_text(ref: str) -> str:
    text = str(ref).strip()
    if not text:
        raise _fail("empty git ref; pass a commit, branch or tag")
    if text.startswith("-"):
        raise _fail(f"git ref {text!r} starts with '-'; refused (it would read as an option)")
    return text


def repo_root(repo: str | Path) -> Path:
    """The top-level directory of the git work tree that contains ``repo``."""
    path = Path(repo).expanduser()
    if not path.exists():
        raise _fail(f"repository {path} does not exist; pass --repo a vLLM-Omni checkout")
    if not path.is_dir():
        raise _fail(f"repository {path} is a file, not a directory; pass a git checkout")
    proc = _git(path, "rev-parse", "--show-toplevel")
    if proc.returncode != 0:
        why = _first_line(proc.stderr.decode(errors="replace"))
        raise _fail(f"{path} is not a git repository ({why}); pass --repo a vLLM-Omni git checkout")
    return Path(proc.stdout.decode().strip())


def resolve_ref(repo: str | Path, ref: str) -> str:
    """The full commit SHA that ``ref`` names in ``repo``."""
    root = repo_root(repo)
    text = _check_ref_text(ref)
    proc = _git(root, "rev-parse", "--verify", "--quiet", "--end-of-options", f"{text}^{{commit}}")
    if proc.returncode != 0:
        raise _fail(
            f"unknown git ref {text!r} in {root}; if it is an upstream commit, fetch it first: "
            f"git -C {root} fetch origin {text}"
        )
    return proc.stdout.decode().strip()


def head_commit(repo: str | Path) -> str | None:
    """The SHA of HEAD, or None in a repository without commits."""
    proc = _git(repo_root(repo), "rev-parse", "--verify", "--quiet", "HEAD^{commit}")
    return proc.stdout.decode().strip() if proc.returncode == 0 else None


def is_dirty(repo: str | Path) -> bool:
    """True when tracked files differ from HEAD (``git status --porcelain``; untracked
    files, such as ``__pycache__`` or results, do not count)."""
    root = repo_root(repo)
    proc = _git(root, "status", "--porcelain", "--untracked-files=no")
    if proc.returncode != 0:
        why = _first_line(proc.stderr.decode(errors="replace"))
        raise _fail(f"git status failed in {root}: {why}")
    return bool(proc.stdout.strip())


def read_source(repo: str | Path, ref: str, path: str) -> tuple[str, str]:
    """``(sha, text)`` of ``path`` (relative to the repository root) at ``ref``."""
    root = repo_root(repo)
    sha = resolve_ref(root, ref)
    rel = Path(path).as_posix()
    proc = _git(root, "show", f"{sha}:{rel}")
    if proc.returncode != 0:
        raise _fail(
            f"{rel} does not exist at {ref} ({sha[:12]}) in {root}; "
            f"check the ref or the path of the file at that revision"
        )
    try:
        return sha, proc.stdout.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _fail(
            f"{rel} at {ref} ({sha[:12]}) is not UTF-8 text ({exc}); cannot compile it"
        ) from None


def find_method_node(
    source: str, class_name: str, method_name: str, *, where: str = "<source>"
) -> ast.FunctionDef | ast.AsyncFunctionDef:
    """The (last) definition of ``class_name.method_name`` at module level of ``source``."""
    tree = _parse(source, class_name, method_name, where)
    return _method_in_tree(tree, class_name, method_name, where)


def _parse(source: str, class_name: str, method_name: str, where: str) -> ast.Module:
    try:
        return ast.parse(source, filename=where)
    except SyntaxError as exc:
        raise _fail(
            f"{where} does not compile: {exc.msg} (line {exc.lineno}); cannot take "
            f"{class_name}.{method_name} from it"
        ) from None


def _method_in_tree(
    tree: ast.Module, class_name: str, method_name: str, where: str
) -> ast.FunctionDef | ast.AsyncFunctionDef:
    classes = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == class_name]
    if not classes:
        raise _fail(f"class {class_name} is not defined at module level in {where}")
    methods = [
        n
        for n in classes[-1].body
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == method_name
    ]
    if not methods:
        raise _fail(f"class {class_name} in {where} has no method {method_name}")
    return methods[-1]


def _filename(ref: str, sha: str, path: str) -> str:
    label = ref if ref == sha else f"{ref}={sha[:12]}"
    return f"<git {label}:{path}>"


def check_method(repo: str | Path, ref: str, path: str, class_name: str, method_name: str) -> str:
    """Check that ``class_name.method_name`` exists and parses at ``ref``; return its SHA.

    Needs no live class, so a bad repository, ref, path or method fails before
    anything is imported or loaded.
    """
    sha, source = read_source(repo, ref, path)
    find_method_node(source, class_name, method_name, where=_filename(ref, sha, path))
    return sha


def compile_method(
    source: str,
    *,
    live_class: type,
    method_name: str,
    filename: str,
    module_globals: Mapping[str, Any],
) -> Callable[..., Any]:
    """Compile ``live_class.method_name`` from ``source`` with ``__class__`` = ``live_class``.

    The method keeps its original line numbers; ``source`` is registered with
    ``linecache`` under ``filename``. Its globals are a copy of ``module_globals``.
    """
    name = live_class.__name__
    tree = _parse(source, name, method_name, filename)
    node = _method_in_tree(tree, name, method_name, filename)
    futures = [
        stmt
        for stmt in tree.body
        if isinstance(stmt, ast.ImportFrom) and stmt.module == "__future__"
    ]
    factory_fields: dict[str, Any] = {
        "name": _FACTORY,
        "args": ast.arguments(
            posonlyargs=[],
            args=[ast.arg(arg="__class__")],
            kwonlyargs=[],
            kw_defaults=[],
            defaults=[],
        ),
        "body": [node, ast.Return(value=ast.Name(id=node.name, ctx=ast.Load()))],
        "decorator_list": [],
        "returns": None,
        "lineno": node.lineno,
        "col_offset": 0,
        "end_lineno": node.end_lineno,
        "end_col_offset": node.end_col_offset,
    }
    if "type_params" in ast.FunctionDef._fields:
        factory_fields["type_params"] = []
    module = ast.Module(body=[*futures, ast.FunctionDef(**factory_fields)], type_ignores=[])
    ast.fix_missing_locations(module)
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    namespace = dict(module_globals)
    try:
        code = compile(module, filename, "exec", dont_inherit=True)
        exec(code, namespace)
        function = namespace.pop(_FACTORY)(live_class)
    except Exception as exc:
        detail = _first_line(str(exc)) or type(exc).__name__
        raise _fail(
            f"{name}.{method_name} from {filename} does not compile against the live "
            f"module: {type(exc).__name__}: {detail}"
        ) from None
    if not callable(function):
        raise _fail(f"{name}.{method_name} from {filename} is not callable")
    with contextlib.suppress(AttributeError, TypeError):
        function.__qualname__ = f"{live_class.__qualname__}.{method_name}"
    return function


def method_at_ref(
    repo: str | Path,
    ref: str,
    path: str,
    live_class: type,
    method_name: str,
) -> MethodSource:
    """``live_class.method_name`` as it was at ``ref`` (``WORKTREE``: as it is now)."""
    if ref == WORKTREE:
        function = live_class.__dict__.get(method_name)
        if function is None:
            raise _fail(f"class {live_class.__qualname__} in the work tree has no {method_name}")
        code = getattr(function, "__code__", None)
        filename = code.co_filename if code is not None else "<worktree>"
        return MethodSource(function, WORKTREE, None, path, filename)
    sha, source = read_source(repo, ref, path)
    filename = _filename(_check_ref_text(ref), sha, Path(path).as_posix())
    function = compile_method(
        source,
        live_class=live_class,
        method_name=method_name,
        filename=filename,
        module_globals=vars(sys.modules[live_class.__module__]),
    )
    return MethodSource(function, ref, sha, Path(path).as_posix(), filename)
