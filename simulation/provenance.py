"""The hash of the simulation code that shapes a run, part of every trace digest (torch-free).

Example::

    python -c "from simulation.provenance import source_hash, run_sources; print(source_hash(), run_sources())"

A digest hashes the modules of the ``simulation`` package that its kind's trainer module imports, directly or
through others, at module or function level (:func:`run_sources` with ``root``), itself included, except those
listed in :data:`NOT_RUN_SHAPING`, which cannot change a recorded number (the cache, the experiment table, whose
configs are digested field by field, file I/O, the memory guard, the sweep driver, the run events, which only say
when a run started and ended, the run keys, the table of run kinds, whose one run-shaping entry, the trainer of
each kind, every digest hashes by itself); the imports of a listed module are not followed. So a new kind's module
re-keys only its own traces, editing ``kinds/mlp.py`` re-keys the kinds whose trainers import it, and a module no
trainer imports with an ``import`` statement (one loaded by a string, say) is not hashed: a trainer imports what
shapes its runs. A new module a trainer imports counts by default, so forgetting to list it can only cost a
retrain, never a stale trace.

What is hashed is each module's syntax tree with docstrings removed (``ast.dump``): editing a comment, a
docstring or the layout of a file keeps every digest; editing code, even a constant, changes those that hash it.
The tree's text depends on the Python version, so another Python also re-keys the cache (as another torch
would change the numbers anyway).
"""

from __future__ import annotations

import ast
import functools
import hashlib
import json
import os
import sys
import tempfile
from pathlib import Path

__all__ = ["source_hash", "run_sources", "package_imports", "trainer_root", "NOT_RUN_SHAPING", "code_fingerprint"]

PACKAGE = Path(__file__).resolve().parent
# Files (paths relative to the package) that cannot change a recorded number; every __init__.py and __main__.py too.
NOT_RUN_SHAPING = frozenset({"__init__.py", "__main__.py", "atomic_io.py", "cache.py", "events.py", "experiments.py",
                             "memory.py", "runkeys.py", "runs.py", "seeds.py", "sweep.py"})


def _module_name(path: Path, package: Path) -> str:
    """``kinds/mlp.py`` -> ``"kinds.mlp"``: a module's dotted name inside ``package``."""
    return ".".join(path.relative_to(package).with_suffix("").parts)


def _hashed_modules(package: Path) -> dict[str, Path]:
    """``{dotted name inside package: file}`` of every module of ``package`` (its subpackages too) not in
    :data:`NOT_RUN_SHAPING`."""
    return {_module_name(p, package): p for p in sorted(package.rglob("*.py"))
            if "__pycache__" not in p.parts and p.name not in ("__init__.py", "__main__.py")
            and p.relative_to(package).as_posix() not in NOT_RUN_SHAPING}


def run_sources(package: Path = PACKAGE, root: str | None = None) -> list[Path]:
    """The modules whose code shapes a run, sorted by path: every module of ``package`` (subpackages included) not
    in :data:`NOT_RUN_SHAPING`, or with ``root`` (a dotted module name inside the package, ``"kinds.mlp"``) the part
    of them that ``root`` imports, directly or not (:func:`package_imports`), ``root`` included. ValueError for a
    ``root`` that is no module of the package."""
    hashed = _hashed_modules(package)
    if root is None:
        return sorted(hashed.values())
    if not package.joinpath(*root.split(".")).with_suffix(".py").is_file():
        raise ValueError(f"no module {root!r} in {package}")
    seen, todo = set(), [root]
    modules = set(hashed)
    while todo:
        name = todo.pop()
        if name in seen or name not in hashed:
            continue
        seen.add(name)
        todo.extend(_imports_of(hashed[name], package, name, modules))
    return sorted(hashed[name] for name in seen)


def package_imports(text: str, package: str = PACKAGE.name, module: str = "", modules: set[str] | None = None
                    ) -> set[str]:
    """Dotted names (inside ``package``) of the modules that the module ``text`` imports anywhere (module or
    function level): ``from .x import y``, ``from . import x``, ``from ..core.x import y`` (relative to ``module``,
    the importing module's dotted name inside the package, ``"kinds.mlp"``), ``from package.x import y``,
    ``import package.x``. ``from P import name`` counts ``P.name`` when that is one of ``modules`` (or, without
    ``modules``, when ``P`` is the package itself)."""
    here = module.split(".")[:-1] if module else []  # the importing module's subpackage, inside the package
    names = set()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                if node.level - 1 > len(here):  # above the package
                    continue
                base = here[: len(here) - (node.level - 1)]
                target = ".".join(base + (node.module.split(".") if node.module else []))
            elif (node.module or "").split(".")[0] == package:
                target = ".".join(node.module.split(".")[1:])
            else:
                continue
            for alias in node.names:
                sub = f"{target}.{alias.name}" if target else alias.name
                if (modules is not None and sub in modules) or (modules is None and not target):
                    names.add(sub)
                elif target:
                    names.add(target)
        elif isinstance(node, ast.Import):
            names.update(alias.name.split(".", 1)[1] for alias in node.names
                         if alias.name.startswith(f"{package}."))
    return names


def trainer_root(trainer: str, package: str = PACKAGE.name) -> str | None:
    """The module of ``package`` holding ``trainer`` (``"simulation.kinds.mlp:run"`` -> ``"kinds.mlp"``), whose
    imports :func:`source_hash` follows; None for a trainer elsewhere (then every run-shaping module is hashed)."""
    module = trainer.partition(":")[0]
    head, _, rest = module.partition(".")
    return rest if head == package and rest else None


def code_fingerprint(text: str) -> str:
    """The code of one module without comments, docstrings or layout, as text (``ast.dump``)."""
    tree = ast.parse(text)
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and body
                and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
                and isinstance(body[0].value.value, str)):
            node.body = body[1:] or [ast.Pass()]
    return ast.dump(tree, annotate_fields=False)


@functools.cache
def source_hash(package: Path = PACKAGE, root: str | None = None) -> str:
    """16 hex chars of SHA-256 over the name and the SHA-256 of :func:`code_fingerprint` of every
    :func:`run_sources` file (of ``root``'s imports when given).

    Each file's fingerprint and imports are kept in a small memo keyed by the file's bytes (:func:`_memo_path`,
    beside Python's own bytecode), so a process that rendered one scene does not parse the package again: a memo
    entry is only ever read for the same bytes it was made from, a memo that cannot be read or written is ignored."""
    h = hashlib.sha256()
    for path in run_sources(package, root):
        name = path.relative_to(package).as_posix()
        h.update(name.encode() + b"\0" + _fingerprint_of(path, package).encode() + b"\0")
    _save_memo(package)
    return h.hexdigest()[:16]


MEMO_ENTRIES = 2000  # the memo keeps at most this many entries of each table (the newest)


def _memo_path(package: Path) -> Path:
    """``<package>/__pycache__/provenance.<cache tag>.json``: beside the bytecode, per Python (``ast.dump``'s
    text differs between versions)."""
    return package / "__pycache__" / f"provenance.{sys.implementation.cache_tag}.json"


@functools.cache
def _memo(package: Path) -> dict[str, dict]:
    """The memo of ``package`` as read once per process: ``{"fingerprints": {bytes sha: fingerprint sha},
    "imports": {key: [module, ...]}}``; empty when missing or unreadable."""
    memo: dict[str, dict] = {"fingerprints": {}, "imports": {}}
    try:
        data = json.loads(_memo_path(package).read_text(encoding="utf-8"))
        for table in memo:
            if isinstance(data.get(table), dict):
                memo[table] = {k: v for k, v in data[table].items()
                               if isinstance(k, str) and (isinstance(v, str) if table == "fingerprints"
                                                           else isinstance(v, list) and all(isinstance(m, str) for m in v))}
    except (OSError, ValueError, AttributeError):
        pass
    return memo


_DIRTY: set[Path] = set()  # the packages whose memo this process added to


def _fingerprint_of(path: Path, package: Path) -> str:
    """SHA-256 (hex) of :func:`code_fingerprint` of ``path``'s code, from the memo when its bytes were seen."""
    data = path.read_bytes()
    key = hashlib.sha256(data).hexdigest()
    table = _memo(package)["fingerprints"]
    if key not in table:
        table[key] = hashlib.sha256(code_fingerprint(data.decode("utf-8")).encode()).hexdigest()
        _DIRTY.add(package)
    return table[key]


def _imports_of(path: Path, package: Path, module: str, modules: set[str]) -> set[str]:
    """:func:`package_imports` of the file ``path`` (the module ``module``), from the memo when seen."""
    data = path.read_bytes()
    key = hashlib.sha256(b"\0".join([data, module.encode(), *sorted(m.encode() for m in modules)])).hexdigest()
    table = _memo(package)["imports"]
    if key not in table:
        table[key] = sorted(package_imports(data.decode("utf-8"), package.name, module, modules))
        _DIRTY.add(package)
    return set(table[key])


def _save_memo(package: Path) -> None:
    """Write the memo back (atomically: a temporary file, then ``os.replace``) when this process added to it;
    nothing when the folder cannot be written (an install in a read-only place)."""
    if package not in _DIRTY:
        return
    _DIRTY.discard(package)
    memo = _memo(package)
    out = {table: dict(list(entries.items())[-MEMO_ENTRIES:]) for table, entries in memo.items()}
    target = _memo_path(package)
    try:
        target.parent.mkdir(exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".provenance-", suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(out, f)
            os.replace(tmp, target)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    except OSError:
        pass
