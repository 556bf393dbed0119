"""Refuse to measure code that no longer matches its file on disk (a reused kernel).

Python imports a module once per process. After a ``git checkout`` or an edit, a second
``run`` in the same process (a reused Jupyter kernel) would time the module it imported
before, while git names the new revision. :func:`check_modules` compiles each module's
source file as it is now and compares it with the live module: every function and
method the live module defines (found through the module's and its own classes'
namespaces, through decorators' ``__wrapped__``, properties, static and class methods)
is matched by qualified name with a compiled one and must have the same bytecode,
constants (nested code compared the same way), names, variables, flags and argument
layout. Line numbers are not compared, so comments and shifted lines do not count; a
docstring does (it is a constant). A live function missing from the file (removed or
renamed) or a function or class the file defines unconditionally that the live module
lacks (added) is stale too. A module inside the ``checkout`` work tree must also still
be the file that importing it now would load.

:func:`dependency_modules` finds the modules measured code depends on: those of the
classes in the given MROs and, following the global names of the given functions and
the attribute names their code resolves on those classes, those of the functions and
classes reached. Only modules compiled from a ``.py`` file by Python's own source
loader are compared (pytest's rewritten test modules, extensions and the standard
library are left out).
"""

from __future__ import annotations

import ast
import contextlib
import dis
import functools
import importlib
import importlib.machinery
import importlib.util
import inspect
import os
import sys
import time
import types
from collections.abc import Callable, Collection, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from embedbench.errors import StaleCodeError, one_line

__all__ = [
    "FreshnessReport",
    "check_modules",
    "dependency_modules",
    "functions_of",
    "imported_modules",
    "source_path",
]

# How many calls deep dependency_modules follows functions from the measured ones.
DEPTH = 3
# Differences named per module in the error message.
SHOWN = 3
_FUNCTION = inspect.CO_OPTIMIZED  # set on function code, unset on module and class bodies
_LAYOUT = ("co_argcount", "co_posonlyargcount", "co_kwonlyargcount", "co_flags")
_VARIABLES = ("co_varnames", "co_freevars", "co_cellvars")


@dataclass(frozen=True)
class FreshnessReport:
    """The modules compared with their files, how many functions, and how long it took."""

    modules: tuple[str, ...]
    functions: int
    seconds: float = field(compare=False)

    def to_json(self) -> dict[str, Any]:
        """Plain JSON values (for metadata.json)."""
        return {
            "checked_modules": list(self.modules),
            "functions_compared": self.functions,
            "seconds": round(self.seconds, 4),
        }


def source_path(module: types.ModuleType) -> str | None:
    """The ``.py`` file the standard source loader compiled ``module`` from, else None."""
    spec = getattr(module, "__spec__", None)
    if spec is None or not isinstance(spec.loader, importlib.machinery.SourceFileLoader):
        return None
    origin = spec.origin
    return origin if isinstance(origin, str) and origin.endswith(".py") else None


def _checkable(name: str) -> bool:
    if name.partition(".")[0] in sys.stdlib_module_names or name == "__main__":
        return False
    module = sys.modules.get(name)
    return module is not None and source_path(module) is not None


# ------------------------------------------------------------------------ code objects


def _qualname(code: types.CodeType, parent: str, parent_is_function: bool) -> str:
    """``co_qualname`` (3.11+), or the same name built from the parents (3.10)."""
    qualname = getattr(code, "co_qualname", None)
    if qualname is not None:
        return qualname
    if not parent:
        return code.co_name
    return f"{parent}.<locals>.{code.co_name}" if parent_is_function else f"{parent}.{code.co_name}"


def _children(code: types.CodeType) -> Iterator[types.CodeType]:
    return (c for c in code.co_consts if isinstance(c, types.CodeType))


def _names(code: types.CodeType) -> set[str]:
    """Every name ``code`` and its nested code load (globals and attributes alike)."""
    names = set(code.co_names)
    for child in _children(code):
        names |= _names(child)
    return names


def _const_difference(a: object, b: object) -> str | None:
    if isinstance(a, types.CodeType) and isinstance(b, types.CodeType):
        return _code_difference(a, b)
    if type(a) is not type(b):
        return "constants differ"
    if isinstance(a, tuple):
        assert isinstance(b, tuple)
        if len(a) != len(b):
            return "constants differ"
        return next((d for x, y in zip(a, b, strict=True) if (d := _const_difference(x, y))), None)
    if isinstance(a, (float, complex, frozenset)):  # -0.0 == 0.0; {1} == {True}
        same = repr(a) == repr(b) if not isinstance(a, frozenset) else _same_set(a, b)
        return None if same else "constants differ"
    return None if a == b else "constants differ"


def _same_set(a: frozenset, b: object) -> bool:
    key = {(type(x), repr(x)) for x in a}
    return isinstance(b, frozenset) and key == {(type(x), repr(x)) for x in b}


def _code_difference(live: types.CodeType, disk: types.CodeType) -> str | None:
    """What differs between two code objects, ignoring line numbers; None when equal."""
    if live.co_code != disk.co_code:
        return "bytecode differs"
    if live.co_name != disk.co_name or _qualname(live, "", False) != _qualname(disk, "", False):
        return "names differ"
    if any(getattr(live, f) != getattr(disk, f) for f in _LAYOUT):
        return "arguments or flags differ"
    if live.co_names != disk.co_names:
        return "names differ"
    if any(getattr(live, f) != getattr(disk, f) for f in _VARIABLES):
        return "variables differ"
    if getattr(live, "co_exceptiontable", b"") != getattr(disk, "co_exceptiontable", b""):
        return "exception handlers differ"
    if len(live.co_consts) != len(disk.co_consts):
        return "constants differ"
    for a, b in zip(live.co_consts, disk.co_consts, strict=True):
        difference = _const_difference(a, b)
        if difference is not None:
            if isinstance(a, types.CodeType):
                return f"nested {a.co_name}: {difference}"
            return difference
    return None


@dataclass
class _Disk:
    """A module's file compiled now: every code object by qualified name, and the
    functions and classes defined at module or class level (container, name)."""

    codes: dict[str, list[types.CodeType]]
    defined: list[tuple[str, str]]


def _compile_file(path: str) -> _Disk:
    source = Path(path).read_bytes()
    module_code = compile(source, path, "exec", dont_inherit=True)
    disk = _Disk({}, [])

    def walk(code: types.CodeType, qualname: str, kind: str) -> None:
        for child in _children(code):
            child_name = _qualname(child, qualname, kind == "function")
            disk.codes.setdefault(child_name, []).append(child)
            if kind != "function" and not child.co_name.startswith("<"):
                disk.defined.append((qualname, child.co_name))
            walk(child, child_name, "function" if child.co_flags & _FUNCTION else "class")

    walk(module_code, "", "module")
    return disk


def _unconditional(path: str) -> set[str]:
    """Qualified names of defs and classes at module or class level outside any branch
    (and not deleted by a ``del`` at the same level)."""
    tree = ast.parse(Path(path).read_bytes(), path)
    found: set[str] = set()

    def walk(body: list[ast.stmt], prefix: str) -> None:
        for stmt in body:
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                found.add(prefix + stmt.name)
                if isinstance(stmt, ast.ClassDef):
                    walk(stmt.body, f"{prefix}{stmt.name}.")
            elif isinstance(stmt, ast.Delete):  # defined, used, then deleted on purpose
                found.difference_update(
                    prefix + t.id for t in stmt.targets if isinstance(t, ast.Name)
                )

    walk(tree.body, "")
    return found


# ------------------------------------------------------------------------ live functions


def _is(value: object, kinds: type | tuple[type, ...]) -> bool:
    """``isinstance`` by the real type: never asks a proxy for its ``__class__``."""
    return issubclass(type(value), kinds)


def functions_of(value: object) -> list[types.FunctionType]:
    """The Python functions behind a namespace entry: itself, what a static or class
    method, property, cached property or partial method holds, and what decorators wrap."""
    if _is(value, (staticmethod, classmethod, types.MethodType)):
        value = value.__func__
    if _is(value, property):
        return [f for part in (value.fget, value.fset, value.fdel) for f in functions_of(part)]
    if _is(value, (functools.cached_property, functools.partialmethod, functools.partial)):
        return functions_of(value.func)
    found: list[types.FunctionType] = []
    seen: set[int] = set()
    while callable(value) and id(value) not in seen:
        seen.add(id(value))
        if _is(value, types.FunctionType):
            found.append(value)
        try:
            value = inspect.getattr_static(value, "__wrapped__", None)
        except Exception:
            break
    return found


@functools.lru_cache(maxsize=1024)
def _real(path: str) -> str:
    return os.path.realpath(path)


def _same_file(a: str, b: str) -> bool:
    return a == b or _real(a) == _real(b)


def _live_codes(module: types.ModuleType, path: str) -> dict[str, list[types.CodeType]]:
    """Code of every function the module (and its own classes) holds, compiled from ``path``."""
    found: dict[str, list[types.CodeType]] = {}
    seen: set[int] = set()

    def visit(value: object) -> None:
        if id(value) in seen:
            return
        seen.add(id(value))
        if _is(value, type):
            if value.__module__ == module.__name__:
                for member in list(vars(value).values()):
                    visit(member)
            return
        for function in functions_of(value):
            code = function.__code__
            if _same_file(code.co_filename, path):
                name = getattr(code, "co_qualname", None) or function.__qualname__
                found.setdefault(name, []).append(code)

    for value in list(vars(module).values()):
        visit(value)
    return found


def _container(module: types.ModuleType, qualname: str) -> object | None:
    """The live module (``""``) or class that ``qualname`` names, or None."""
    if "<" in qualname:
        return None
    value: object = module
    for part in qualname.split(".") if qualname else ():
        value = vars(value).get(part) if _is(value, (type, types.ModuleType)) else None
        if not _is(value, type) or getattr(value, "__module__", None) != module.__name__:
            return None  # not a class, or not this module's (a name bound to another's)
    return value


def _has_member(container: object, name: str) -> bool:
    if isinstance(container, types.ModuleType):
        return name in vars(container)
    assert isinstance(container, type)
    mangled = name
    if name.startswith("__") and not name.endswith("__"):
        mangled = f"_{container.__name__.lstrip('_')}{name}"
    return any(name in vars(k) or mangled in vars(k) for k in container.__mro__)


# ------------------------------------------------------------------------ the check


def _origin_problem(module: types.ModuleType, path: str, checkout: Path | None) -> str | None:
    """For a module in the work tree: is it still the file an import would load now?"""
    if checkout is None or not _inside(path, checkout):
        return None
    parent = module.__name__.rpartition(".")[0]
    search = list(getattr(sys.modules.get(parent), "__path__", None) or []) if parent else None
    spec = importlib.machinery.PathFinder.find_spec(module.__name__, search)
    now = getattr(spec, "origin", None)
    if now is None:
        return f"importing it now would not find it in the work tree {checkout}"
    if not _same_file(now, path):
        return f"importing it now would load {now}, not {path}"
    return None


def _inside(path: str, root: Path) -> bool:
    try:
        Path(_real(path)).relative_to(_real(str(root)))
    except ValueError:
        return False
    return True


def _module_problems(
    module: types.ModuleType, path: str, checkout: Path | None
) -> tuple[list[tuple[str, str]], int]:
    """What differs between the live module and its file, as (function, what) pairs
    (empty: fresh), and how many live functions were compared."""
    origin = _origin_problem(module, path, checkout)
    if origin is not None:
        return [("", origin)], 0
    try:
        disk = _compile_file(path)
    except OSError as exc:
        return [("", f"its file cannot be read now ({exc.strerror or type(exc).__name__})")], 0
    except (SyntaxError, ValueError) as exc:
        return [("", f"its file does not compile now ({one_line(exc)})")], 0
    live = _live_codes(module, path)
    problems: list[tuple[str, str]] = []
    for name, codes in live.items():
        candidates = disk.codes.get(name)
        if not candidates:
            problems.append((name, f"{name} is no longer in the file (removed or renamed)"))
            continue
        for code in codes:
            differences = [_code_difference(code, c) for c in candidates]
            if None not in differences:
                problems.append((name, f"{name}: {differences[-1]}"))
                break
    missing = []
    for container_name, name in disk.defined:
        container = _container(module, container_name)
        if container is not None and not _has_member(container, name):
            missing.append(f"{container_name}.{name}" if container_name else name)
    if missing:
        unconditional = _unconditional(path)
        problems += [(n, f"{n} is new in the file") for n in missing if n in unconditional]
    return problems, sum(len(codes) for codes in live.values())


def check_modules(
    modules: Iterable[str | types.ModuleType],
    *,
    checkout: str | Path | None = None,
    named_first: Collection[str] = (),
) -> FreshnessReport:
    """Compare each loaded module with its source file now; raise ``StaleCodeError`` (one
    line: the module, what differs, restart) when any differs.

    Names not loaded, and modules not compiled from source by the standard loader, are
    skipped. Modules inside ``checkout`` must also still resolve to the same file. The
    message names differences of functions in ``named_first`` (qualified names, such as
    the measured method's) before the others.
    """
    started = time.perf_counter()
    root = Path(checkout) if checkout is not None else None
    if root is not None:
        importlib.invalidate_caches()  # directory listings cached before a git checkout
    checked: list[str] = []
    stale: list[str] = []
    functions = 0
    for item in dict.fromkeys(modules):
        module = sys.modules.get(item) if isinstance(item, str) else item
        path = source_path(module) if module is not None else None
        if module is None or path is None or module.__name__ in checked:
            continue
        problems, count = _module_problems(module, path, root)
        checked.append(module.__name__)
        functions += count
        if problems:
            problems.sort(key=lambda problem: problem[0] not in named_first)
            more = f"; and {len(problems) - SHOWN} more" if len(problems) > SHOWN else ""
            shown = "; ".join(text for _, text in problems[:SHOWN])
            stale.append(f"module {module.__name__} changed on disk ({path}: {shown}{more})")
    if stale:
        raise StaleCodeError(
            f"stale code: {' | '.join(stale)} since this Python process imported it "
            f"(git checkout or edit), so it would measure the old code; restart the "
            f"kernel (or Python process) and run again"
        )
    return FreshnessReport(tuple(checked), functions, time.perf_counter() - started)


# ------------------------------------------------------------------------ dependencies


def _local_imports(code: types.CodeType, package: str | None) -> list[tuple[str, tuple]]:
    """``(module, names)`` of every import statement inside ``code`` (and nested code),
    relative ones resolved against ``package``."""
    found: list[tuple[str, tuple]] = []
    consts: list[object] = []
    for instruction in dis.get_instructions(code):
        if instruction.opname == "LOAD_CONST":
            consts = [*consts[-1:], instruction.argval]
        elif instruction.opname == "IMPORT_NAME" and len(consts) == 2:
            level, names = consts
            name = "." * level + instruction.argval if isinstance(level, int) else ""
            with contextlib.suppress(ImportError, ValueError):
                name = importlib.util.resolve_name(name, package) if level else name
                found.append((name, tuple(names or ())))
        if instruction.opname != "LOAD_CONST":
            consts = []
    for child in _children(code):
        found += _local_imports(child, package)
    return found


def dependency_modules(
    classes: Iterable[type], functions: Iterable[Callable[..., Any]]
) -> list[str]:
    """The checkable modules that code of ``functions`` on instances of ``classes`` runs.

    The modules of every class in the classes' MROs; then, from each function (at most
    ``DEPTH`` calls deep), its own module, the modules of the classes and functions its
    global names refer to or its own ``import`` statements import, and of the methods
    its attribute names resolve to on those MROs.
    """
    mro = list(dict.fromkeys(k for cls in classes for k in cls.__mro__))
    found: dict[str, None] = dict.fromkeys(k.__module__ for k in mro)
    queue = [(f, 0) for fn in functions for f in functions_of(fn)]
    seen: set[int] = set()

    def refer(value: object, level: int) -> None:
        if _is(value, types.ModuleType):
            found[getattr(value, "__name__", "")] = None
        elif _is(value, type):
            found[getattr(value, "__module__", "")] = None
        elif value is not None:
            queue.extend((f, level + 1) for f in functions_of(value))

    while queue:
        function, level = queue.pop(0)
        code = function.__code__
        if id(code) in seen:
            continue
        seen.add(id(code))
        found[function.__module__] = None
        if level >= DEPTH:
            continue
        namespace = function.__globals__
        for name in sorted(_names(code)):
            if not _is(namespace.get(name), types.ModuleType):
                refer(namespace.get(name), level)
            for k in mro:
                if name in vars(k):
                    refer(vars(k)[name], level)
        for module_name, names in _local_imports(code, namespace.get("__package__")):
            module = sys.modules.get(module_name)
            found[module_name] = None
            for name in names if module is not None else ():
                refer(vars(module).get(name) or sys.modules.get(f"{module_name}.{name}"), level)
    return [name for name in found if name and _checkable(name)]


def imported_modules(names: Iterable[str], *, package: str) -> list[str]:
    """``names`` and the modules of ``package`` that their namespaces refer to (modules,
    and the modules of functions and classes imported from them), those loaded."""
    found: dict[str, None] = {}
    prefix = package + "."
    for name in names:
        module = sys.modules.get(name)
        if module is None:
            continue
        found[name] = None
        for value in vars(module).values():
            if _is(value, types.ModuleType):
                other = value.__name__
            elif _is(value, (type, types.FunctionType)):
                other = value.__module__
            else:
                continue
            if isinstance(other, str) and (other == package or other.startswith(prefix)):
                found[other] = None
    return [name for name in found if _checkable(name)]
