"""Extension modules an import does not load: optional features, not broken environments.

A package ships modules its import never loads (numba's TBB threading layer, imported only
when that layer is chosen; CuPy's library modules, imported when first used). Which ones
`import TOP` loads is read statically (cudatx.discover.imports.import_closure): its
`__init__.py` and what that imports at module level, and theirs; an import under `try: ...
except ImportError` is optional. A module outside that closure that the package imports
lazily (in a function, a module `__getattr__`) and that cannot load is a feature not
installed: doctor says so in a note, never as an error. A module no code of its package
imports at all is one its users import themselves (`import lxml.etree`): it counts as the
package's own, and its failure is an error.

A module is judged where it is really imported. A top-level package shipped in another's
wheel and imported by it (a companion, cudatx.discover.imports.Companion: nvfuser in torch
2.0's wheel, cupy_backends in CuPy's) is replayed in its importer's process, after what that
import loaded (cudatx.scan), and counts as imported only where the importer's own closure
reaches it (`import torch` through torch/_prims_common, going into the companion): a bare
`import nvfuser` stands for no user's import. One rule for both: a module no top-level
closure reaches that fails is a note; so is a plan that breaks only such modules
(cudatx.planning.diff), which is no reason to call it unsafe.

Deviation: what an extension module imports as it initialises (Cython's cimports) is not
read; a module only such an import loads counts as one its users import.
"""

from __future__ import annotations

import json
import os
import re

from cudatx.analysis import frameworks
from cudatx.analysis.problems import short
from cudatx.cache import Stale, file_key, memo
from cudatx.discover.imports import Closure, import_closure, requires
from cudatx.environment import Environment
from cudatx.loader.process import LoadResult
from cudatx.models import Status

_MET = (Status.RESOLVED, Status.SYSTEM)
_CLOSURES: dict[tuple[str, str], Closure] = {}
_REQUIRED: dict[tuple[str, str, str], bool] = {}


def _requires(
    env: Environment, entry: str, top: str, dotted: str, follow: tuple[str, ...] = ()
) -> bool:
    """Whether `import TOP` imports `dotted` on every path (its closure's required part,
    going into the packages `follow` too), with the fewest files read
    (cudatx.discover.imports.requires); once per run, and across runs through the scan cache
    (valid while every file it read keeps its state)."""
    seen = (entry, "+".join((top, *follow)), dotted)
    found = _REQUIRED.get(seen)
    if found is None:
        closure = None if follow else _CLOSURES.get((entry, top))
        if closure is not None:
            found = dotted in closure.required
        else:
            found = memo(
                env.view.cache,
                "import required",
                os.path.join(entry, dotted),
                seen[1],
                lambda: requires(top, dotted, entry, env.view.real, follow=follow),
                load=_requires_from_json,
                dump=lambda told: json.dumps({"required": told[0], "files": told[1]}),
            )[0]
        _REQUIRED[seen] = found
    return found


def _requires_from_json(text: str) -> tuple[bool, tuple[tuple[str, str], ...]]:
    data = json.loads(text)
    files = tuple((str(p), str(s)) for p, s in data["files"])
    if not all(_state(p) == s for p, s in files):
        raise Stale  # a file it read has changed since: read again
    return bool(data["required"]), files


def _closure(env: Environment, entry: str, top: str) -> Closure:
    """import_closure, once per run, and across runs through the scan cache (valid while
    every file it read keeps its state)."""
    seen = (entry, top)
    found = _CLOSURES.get(seen)
    if found is not None:
        return found
    found = memo(
        env.view.cache,
        "import closure",
        os.path.join(entry, top),
        "",  # valid while every file it read keeps its state: checked by _closure_from_json
        lambda: import_closure(top, entry, env.view.real),
        load=_closure_from_json,
        dump=lambda closure: json.dumps(
            {
                "required": sorted(closure.required),
                "optional": sorted(closure.optional),
                "files": [list(f) for f in closure.files],
            }
        ),
    )
    _CLOSURES[seen] = found
    return found


def _closure_from_json(text: str) -> Closure:
    data = json.loads(text)
    files = tuple((str(p), str(s)) for p, s in data["files"])
    if not all(_state(p) == s for p, s in files):
        raise Stale  # a file it read has changed since: read again
    return Closure(frozenset(data["required"]), frozenset(data["optional"]), files)


def _state(path: str) -> str | None:
    try:
        return ":".join(file_key(os.stat(path)))
    except OSError:
        return None


def _module(
    env: Environment, path: str, suffixes: tuple[str, ...] | None = None
) -> tuple[str, str, str] | None:
    """(sys.path entry, top-level name, dotted module) of a module file: an extension
    module's, or with `suffixes` (".py",) a source file's."""
    suffixes = suffixes or tuple(sorted(env.target.extension_suffixes, key=len, reverse=True))
    entries = sorted((e for e in env.target.sys_path if e), key=len, reverse=True)
    entry = next((e for e in entries if path.startswith(os.path.join(e, ""))), None)
    suffix = next((s for s in suffixes if path.endswith(s)), None)
    if entry is None or suffix is None:
        return None
    dotted = path[len(entry) + 1 : -len(suffix)].replace("/", ".")
    return entry, dotted.split(".")[0], dotted


def imported(env: Environment, root: str) -> bool | None:
    """Whether `import TOP` loads this root (an extension module, or a library its
    package's code loads by path), read statically; None where that cannot be told."""
    hand = [h for h in env.hand_loads if env.keys(h.path) == env.keys(root)]
    if hand:
        for load in hand:
            where = _module(env, load.by, (".py",))
            if where is None or not load.at_import or load.swallowed:
                continue
            entry, top, dotted = where
            if _requires(env, entry, top, dotted.removesuffix(".__init__")):
                return True
        return False
    where = _module(env, root)
    if where is None:
        return None
    entry, top, dotted = where
    companion = env.companion_of(root)
    if companion is not None:
        # Shipped in another package's wheel and imported by it (nvfuser by torch,
        # cupy_backends by cupy): loaded where that package's import reaches it, in its
        # process; no user's `import TOP` of its own stands for it.
        importer = os.path.basename(companion.importer)
        return _requires(env, entry, importer, dotted, follow=(top,))
    if _requires(env, entry, top, dotted):
        return True
    if dotted in _closure(env, entry, top).optional:
        return False
    # Outside the closure: optional where the package imports it lazily (in a function, a
    # module __getattr__); a module nothing of the package imports is one its users import
    # themselves (`import lxml.etree`), as much a part of it as its __init__.
    return not _lazily_imported(env, entry, top, dotted)


def _lazily_imported(env: Environment, entry: str, top: str, dotted: str) -> bool:
    """Whether some module of the package imports `dotted` (`from numba.np.ufunc import
    tbbpool`, `from . import _tbb`, `import a.b.mod`) anywhere: in a function, it runs
    when the feature is asked for."""
    leaf = re.escape(dotted.rpartition(".")[2].encode())
    pattern = re.compile(
        rb"^[ \t]*(?:import[ \t]+[\w.]*\b" + leaf + rb"\b"
        rb"|from[ \t]+[\w.]+[ \t]+import[ \t]+[^\n]*\b" + leaf + rb"\b)",
        re.M,
    )
    folder = os.path.join(entry, top)
    for base, _, names in os.walk(folder):
        for name in names:
            if not name.endswith(".py"):
                continue
            try:
                with open(env.view.real(os.path.join(base, name)), "rb") as handle:
                    if pattern.search(handle.read()):
                        return True
            except OSError:
                continue
    return False


def not_imported(env: Environment, load: LoadResult) -> bool:
    """A root that fails and that no import of its package loads: a feature not installed
    (or a framework's lazily imported module: cudatx.analysis.frameworks.unavailable)."""
    if load.ok:
        return False
    if frameworks.unavailable(env, load):
        return True
    if load.framework is not None or load.trace is not None or load.root == env.base.root:
        return False
    return imported(env, load.root) is False


def notes(env: Environment) -> list[str]:
    """Doctor's notes for the roots no import loads that do not load: "numba.np.ufunc.
    tbbpool (numba) is not loaded by `import numba`, and needs libtbb.so.12, which nothing
    installs"."""
    out: list[str] = []
    for load in env.loads:
        if load.framework is not None or not not_imported(env, load):
            continue
        said = _said(env, load)
        if said is not None:
            what, top, why = said
            out.append(f"{what} is not loaded by `import {top}`, and {why}")
    return out


def lost(env: Environment, load: LoadResult) -> str:
    """A plan's note for a root no import loads that a change stops loading (`env`: the
    environment after it)."""
    said = _said(env, load)
    what, top, why = said or (short(env, load.root), "", "does not load")
    return (
        f"{what} would no longer load: it {why}; `import {top}` does not load it (a feature "
        "lost, not counted)"
    )


def _said(env: Environment, load: LoadResult) -> tuple[str, str, str] | None:
    """(the module and its owners, the import that would load it, why it does not load)."""
    failing = next(
        (r for r in load.resolutions if r.status not in _MET and r.evidence.decisive), None
    )
    if failing is None:
        return None
    name = os.path.basename(failing.cause or failing.name)
    if failing.status is Status.NOT_FOUND and not env.owners.listing(name):
        why = f"needs {name}, which nothing installs"
    elif failing.missing and failing.detail:
        why = f"does not load: {failing.detail}"
    else:
        why = f"does not load: {name} {failing.status.value}"
    where = _module(env, load.root)
    top = where[1] if where else short(env, load.root).split("/")[0]
    companion = env.companion_of(load.root)
    if companion is not None:
        top = os.path.basename(companion.importer)
    owners = ", ".join(d.name for d in env.owners_of(load.root)) or "no distribution"
    what = where[2] if where else short(env, load.root)
    return f"{what} ({owners})", top, why
