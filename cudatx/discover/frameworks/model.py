"""What a framework reader says a framework loads by hand: frozen values, and their JSON
for the scan cache (cudatx.discover.frameworks)."""

from __future__ import annotations

from typing import Any

from cudatx.models import Frozen


class HandLoad(Frozen, kw_only=False):
    """One library a framework loads by hand before the library that needs it.

    `search` says where `folders` are: "package" (under the first sys.path entry holding the
    folder's package, as `importlib.import_module("nvidia.cu13").__path__[0]` finds it: JAX),
    "beside" (under the framework package's own site folder: onnxruntime's `..`), "site"
    (under each site folder in turn, folder by folder: cuda-pathfinder), "path" (`folders`
    are absolute, or relative to the site folder, and each is tried as it is: CuPy's own
    `_environment.py`). In each folder the `names` are tried in order (a name may be a glob:
    the first match in sorted order is taken, as cuda-pathfinder does); with `by_name`, a
    bare dlopen of each name follows where no folder holds one; with `reuse_loaded`, a name
    already loaded ends the search (cuda-pathfinder's check_if_already_loaded_from_elsewhere).
    `bare`, where it is not empty, is what the bare dlopens and the check for a copy already
    loaded try instead of `names` (cuda-pathfinder before 1.4 looks for `lib<name>.so*` in a
    folder, but dlopens its sonames).
    """

    names: tuple[str, ...]
    folders: tuple[str, ...]
    search: str
    required: bool  # a failure makes the framework's load fail; else it is swallowed
    by_name: bool = False
    reuse_loaded: bool = False
    bare: tuple[str, ...] = ()

    @property
    def sonames(self) -> tuple[str, ...]:
        """The names a bare dlopen tries."""
        return self.bare or self.names


class Open(Frozen, kw_only=False):
    """A library opened by bare name at run time: the name its build opens (one of `build`:
    the first a RECORD here lists, else the first; JAX's CUDA 12 plugins were built against
    cuDNN 8 before 0.4.29, 9 since), then the names tried where that one does not load
    (`then`: TSL's GetCuptiDsoHandle falls back to `libcupti.so`)."""

    build: tuple[str, ...]
    then: tuple[str, ...] = ()


class ModuleStep(Frozen, kw_only=False):
    """An extension module the framework imports before its root (the first of `modules`
    that is installed, as dotted names: JAX's `_import_extensions` tries
    `jax_cuda12_plugin._versions`, then `jaxlib.cuda._versions`), and the libraries it then
    opens by bare name through its own search path (JAX's version checks call `_versions`'
    lazy stubs, which dlopen each library when first called). Each one is required: JAX
    raises "Unable to load cuDNN" when one fails."""

    modules: tuple[str, ...]
    opens: tuple[Open, ...] = ()
    why: str = ""  # "JAX's version check"


class RuntimeRoot(Frozen, kw_only=False):
    """A library a framework loads by path, a load root of its own (`path` relative to the
    site folder): after the libraries it loads by hand (`loads`) and the modules it imports
    first (`modules`); `runtime`: what the root then opens by name itself,
    `optional_runtime`: what it opens only where a file of that name is installed."""

    path: str
    what: str  # "CUDA provider", "XLA plugin", a module name
    loads: tuple[HandLoad, ...]
    modules: tuple[ModuleStep, ...] = ()
    # Files (relative to the site folder) the framework's own code loads with RTLD_GLOBAL
    # before the root in every process (onnxruntime's provider bridge: the shared provider
    # library, whose symbols the provider binds to).
    first: tuple[str, ...] = ()
    runtime: tuple[Open, ...] = ()
    optional_runtime: tuple[Open, ...] = ()
    # `path` is a dotted module name, the root its extension module file as Python's import
    # finds it (CuPy's lazily imported modules); not installed: no root.
    is_module: bool = False


class FrameworkContext(Frozen, kw_only=False):
    """One process a framework's roots are loaded in: `steps` in order, each a package of the
    load lists (cudatx/data/loadlists.json) imported first ("torch": `import torch`, its
    preloads and its module) or "preloads" (the framework's own hand loads)."""

    name: str  # "jax alone", "after `import torch`"
    steps: tuple[str, ...]
    primary: bool  # the process the framework's own documentation sets up
    expected: bool = True  # False: failing there is how the framework works (ORT bare)


class FrameworkLoads(Frozen, kw_only=False):
    """What one installed framework loads by hand, as its reader read it."""

    roots: tuple[RuntimeRoot, ...]
    build_major: int | None  # the CUDA major the framework was built for
    origin: str  # "read from <files>", or why it was not read
    contexts: tuple[FrameworkContext, ...] = ()
    # soname -> the loads that provide it (dependencies first): each extension module of
    # the framework's distribution that links one of these is a root after those loads
    # (CuPy: cuda-pathfinder's table, or its own _environment.py preloads)
    by_soname: dict[str, tuple[HandLoad, ...]] | None = None
    # Its roots are modules imported lazily, when first used (CuPy's library modules): one
    # that does not load is a feature not had, said as a note, never an import that fails.
    optional_roots: bool = False
    # Its roots are a feature the framework tries and does without when none of their
    # libraries is installed (TSL's GPU check: TF logs "Cannot dlopen some GPU libraries" and
    # runs on the CPU, as every `pip install tensorflow` without the CUDA wheels does). A
    # root of which no library is installed here is that feature not installed (a note); one
    # that finds some of them and not all is a broken install (cudatx.analysis.frameworks).
    optional_feature: bool = False
    read: bool = True  # False: the reader could not read this release (origin says why)


class CudaBuild(Frozen, kw_only=False):
    """The CUDA version an installed package says it was built for, read from its own source
    where its load list names the constant that says it (cudatx.discover.frameworks.cuda_build:
    torch.version.cuda)."""

    distribution: str  # its owner: "torch"
    name: str  # shown: "torch"
    package: str  # its package folder: <site>/torch
    said_by: str  # the constant, dotted: "torch.version.cuda"
    cuda: str | None  # "12.8"; None: unreadable, or a build without CUDA


class Installed(Frozen, kw_only=False):
    """One framework as installed: what a reader's `find` recognised (by its files, never by
    a distribution's name)."""

    reader: str  # the registered reader: "jax", "onnxruntime", "cupy"
    name: str  # shown: "jax_plugins/xla_cuda12", "onnxruntime", "cupy"
    distribution: str  # the owner of its sources
    site: str  # the site folder it is installed in
    package: str  # its package folder, relative to `site`
    sources: tuple[str, ...]  # the files its reader reads, relative to `site`
    companions: tuple[str, ...] = ()  # distributions of the same build (jax-cuda12-plugin)
    # A loader compiled into a library: the object whose code calls it (relative to
    # `site`), found by what it exports (cudatx.discover.frameworks.tsl)
    loader: str = ""


def hand_load_from_json(row: Any) -> HandLoad:
    return HandLoad(
        names=tuple(str(n) for n in row["names"]),
        folders=tuple(str(f) for f in row["folders"]),
        search=str(row["search"]),
        required=bool(row["required"]),
        by_name=bool(row.get("by_name", False)),
        reuse_loaded=bool(row.get("reuse_loaded", False)),
        bare=tuple(str(n) for n in row.get("bare", ())),
    )


def hand_load_to_json(load: HandLoad) -> dict[str, Any]:
    return {
        "names": list(load.names),
        "folders": list(load.folders),
        "search": load.search,
        "required": load.required,
        "by_name": load.by_name,
        "reuse_loaded": load.reuse_loaded,
        "bare": list(load.bare),
    }


def _opens(rows: Any) -> tuple[Open, ...]:
    return tuple(
        Open(tuple(str(n) for n in row["build"]), tuple(str(n) for n in row["then"]))
        for row in rows
    )


def _opens_json(opens: tuple[Open, ...]) -> list[dict[str, list[str]]]:
    return [{"build": list(o.build), "then": list(o.then)} for o in opens]


def framework_loads_from_json(data: Any) -> FrameworkLoads:
    """A FrameworkLoads as the scan cache keeps it (TypeError, KeyError or ValueError on
    anything else)."""
    by_soname = data.get("by_soname")
    major = data.get("build_major")
    if major is not None and not isinstance(major, int):
        raise TypeError("a CUDA major of the wrong type")
    return FrameworkLoads(
        roots=tuple(
            RuntimeRoot(
                path=str(r["path"]),
                what=str(r["what"]),
                loads=tuple(hand_load_from_json(x) for x in r["loads"]),
                modules=tuple(
                    ModuleStep(
                        modules=tuple(str(m) for m in s["modules"]),
                        opens=_opens(s["opens"]),
                        why=str(s["why"]),
                    )
                    for s in r["modules"]
                ),
                first=tuple(str(f) for f in r["first"]),
                runtime=_opens(r["runtime"]),
                optional_runtime=_opens(r["optional_runtime"]),
                is_module=bool(r.get("is_module", False)),
            )
            for r in data["roots"]
        ),
        build_major=major,
        origin="",
        contexts=tuple(
            FrameworkContext(
                name=str(c["name"]),
                steps=tuple(str(s) for s in c["steps"]),
                primary=bool(c["primary"]),
                expected=bool(c.get("expected", True)),
            )
            for c in data["contexts"]
        ),
        by_soname=None
        if by_soname is None
        else {str(k): tuple(hand_load_from_json(x) for x in v) for k, v in by_soname.items()},
        optional_roots=bool(data.get("optional_roots", False)),
        optional_feature=bool(data.get("optional_feature", False)),
    )


def framework_loads_to_json(loads: FrameworkLoads) -> dict[str, Any]:
    out: dict[str, Any] = {
        "roots": [
            {
                "path": r.path,
                "what": r.what,
                "loads": [hand_load_to_json(x) for x in r.loads],
                "modules": [
                    {"modules": list(s.modules), "opens": _opens_json(s.opens), "why": s.why}
                    for s in r.modules
                ],
                "first": list(r.first),
                "runtime": _opens_json(r.runtime),
                "optional_runtime": _opens_json(r.optional_runtime),
                "is_module": r.is_module,
            }
            for r in loads.roots
        ],
        "build_major": loads.build_major,
        "contexts": [
            {"name": c.name, "steps": list(c.steps), "primary": c.primary, "expected": c.expected}
            for c in loads.contexts
        ],
        "optional_roots": loads.optional_roots,
        "optional_feature": loads.optional_feature,
    }
    if loads.by_soname is not None:
        out["by_soname"] = {
            k: [hand_load_to_json(x) for x in v] for k, v in loads.by_soname.items()
        }
    return out


def contexts_from_json(rows: Any) -> tuple[FrameworkContext, ...]:
    """Contexts as a reader's data file writes them."""
    return tuple(
        FrameworkContext(
            name=str(c["name"]),
            steps=tuple(str(s) for s in c["steps"]),
            primary=bool(c.get("primary", False)),
            expected=bool(c.get("expected", True)),
        )
        for c in rows
    )
