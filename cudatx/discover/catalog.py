"""The shipped knowledge of run-time loads: cudatx/data/loadlists.json and runtime.json."""

from __future__ import annotations

import fnmatch
import functools
import json
import re
from dataclasses import dataclass
from importlib import resources
from typing import Any


@dataclass(frozen=True)
class PreloadEntry:
    folder: str  # the component folder torch names ("cublas", "cuda_nvrtc", ...)
    pattern: str  # a glob over file names ("libcublas.so.*[0-9]")
    required: bool  # a missing one raises (except path: import fails; normal path: list ends)
    min_cuda: int | None = None  # only for a CUDA build of at least this major (0: any)


@dataclass(frozen=True)
class Preloads:
    """What a package's __init__.py preloads before its extension (cudatx.discover.preloads)."""

    normal: tuple[PreloadEntry, ...]  # after the first library loaded (once `gate` holds)
    gate: str | None  # the normal path runs only once a mapped path holds this text
    entries: tuple[PreloadEntry, ...]  # when the first library failed to load (except path)
    error_stems: tuple[str, ...]  # that path runs only if the failure names one of these
    search: tuple[str, ...]  # patterns over {entry}, {folder}, {glob}, {cuda_major}
    nvidia_folder_required: bool  # a sys.path entry without `nvidia/` is passed over
    fallback_only_if_empty: bool  # patterns after the first only where it matched nothing
    origin: str  # where the list came from, for `why` and `doctor`

    @classmethod
    def none(cls, origin: str) -> Preloads:
        return cls((), None, (), (), (), False, False, origin)


@dataclass(frozen=True)
class LoadList:
    """What a package loads by hand before its extension module."""

    distribution: str
    package: str
    reader: str | None  # a parser of the installed source, if cudatx has one
    module: str  # the extension module the list runs before ("_C" for torch._C)
    first: str | None  # loaded first, relative to the package folder
    releases: dict[str, Preloads]  # "major.minor" -> what that release preloads


@dataclass(frozen=True)
class HandLoad:
    """One library a framework other than torch loads by hand (cudatx.discover.frameworks).

    `search` says where `folders` are: "package" (under the first sys.path entry holding the
    folder's package, as `importlib.import_module("nvidia.cu13").__path__[0]` finds it: JAX),
    "beside" (under the framework package's own site folder: onnxruntime's `..`), "site"
    (under each site folder in turn, folder by folder: cuda-pathfinder). In each folder the
    `names` are tried in order; with `by_name`, a bare dlopen(name) of each follows where no
    folder holds one; with `reuse_loaded`, a name already loaded ends the search
    (cuda-pathfinder's check_if_already_loaded_from_elsewhere).
    """

    names: tuple[str, ...]
    folders: tuple[str, ...]
    search: str
    required: bool  # a failure makes the framework's load fail; else it is swallowed
    by_name: bool = False
    reuse_loaded: bool = False


@dataclass(frozen=True)
class RuntimeRoot:
    """A library a framework dlopens by path, a load root of its own (`path` relative to
    the site folder), after the libraries it loads by hand (`loads`); `runtime`: what it
    then dlopens by name itself (`optional_runtime`: only where the file exists)."""

    path: str
    what: str  # "CUDA provider", "XLA plugin", a module name
    loads: tuple[HandLoad, ...]
    runtime: tuple[str, ...] = ()
    optional_runtime: tuple[str, ...] = ()


@dataclass(frozen=True)
class FrameworkLoads:
    """What one installed framework loads by hand, and where that was read."""

    roots: tuple[RuntimeRoot, ...]
    build_major: int | None  # the CUDA major the framework was built for
    origin: str  # "read from <files>" or "shipped table for <dist> <release> (<why>)"
    # cuda-pathfinder's table, soname -> the loads that provide it (dependencies first):
    # CuPy's modules are roots after them (cudatx.discover.frameworks.pathfinder_roots)
    by_soname: dict[str, tuple[HandLoad, ...]] | None = None


@dataclass(frozen=True)
class FrameworkContext:
    """One process a framework's run-time roots are loaded in: `steps` in order, "torch"
    (`import torch` first) and "preloads" (the framework's own hand loads)."""

    name: str  # "jax alone", "after `import torch`"
    steps: tuple[str, ...]
    primary: bool  # the process the framework's own documentation sets up
    expected: bool = True  # False: failing there is how the framework works (ORT bare)


@dataclass(frozen=True)
class Framework:
    """A framework that loads NVIDIA libraries by hand (loadlists.json "frameworks")."""

    name: str  # shown: "jax_plugins/xla_cuda13", "onnxruntime", "cupy"
    distribution: str
    package: str  # its folder, relative to the site folder
    reader: str | None  # cudatx.discover.frameworks reads its source
    sources: tuple[str, ...]  # the files that reader reads, relative to the site folder
    contexts: tuple[FrameworkContext, ...]
    releases: dict[str, FrameworkLoads]  # "major.minor" -> the shipped table
    runtime: dict[str, tuple[tuple[str, ...], tuple[str, ...]]]  # root file -> run-time loads
    optional_roots: bool = False  # a root whose library nothing installs is a feature not had
    companions: tuple[str, ...] = ()  # distributions of the same build (jax-cuda13-plugin)


@dataclass(frozen=True)
class KnownLoads:
    obj: str  # soname of the loading object; may hold {major}
    loads: tuple[str, ...]
    optional: tuple[str, ...]


@dataclass(frozen=True)
class Catalog:
    load_lists: tuple[LoadList, ...]
    frameworks: tuple[Framework, ...]
    driver: tuple[str, ...]  # fnmatch patterns
    dlopen: tuple[KnownLoads, ...]
    not_loads: frozenset[str]

    def is_driver(self, name: str) -> bool:
        return self._driver.match(name) is not None

    @functools.cached_property
    def _driver(self) -> re.Pattern[str]:
        # One expression for every pattern: asked for each need of each replay.
        return re.compile("|".join(fnmatch.translate(p) for p in self.driver) or "(?!)")

    def load_list(self, distribution: str) -> LoadList | None:
        return next((ll for ll in self.load_lists if ll.distribution == distribution), None)

    def known_loads(self, soname: str, major: int | None) -> tuple[list[str], list[str]]:
        """(loads, optional loads) the object with this soname is known to dlopen."""
        loads: list[str] = []
        optional: list[str] = []
        for entry in self.dlopen:
            if "{major}" in entry.obj:
                if major is None or entry.obj.format(major=major) != soname:
                    continue
            elif entry.obj != soname:
                continue
            for names, out in ((entry.loads, loads), (entry.optional, optional)):
                for name in names:
                    if "{major}" not in name:
                        out.append(name)
                    elif major is not None:
                        out.append(name.format(major=major))
        return loads, optional


def _entries(rows: Any) -> tuple[PreloadEntry, ...]:
    out = []
    for row in rows:
        folder, pattern, required, *rest = row
        need = rest[0] if rest else None
        if not isinstance(folder, str) or not isinstance(pattern, str):
            raise TypeError("a preload entry of the wrong type")
        if need is not None and not isinstance(need, int):
            raise TypeError("a CUDA major of the wrong type")
        out.append(PreloadEntry(folder, pattern, bool(required), need))
    return tuple(out)


def preloads_from_json(data: Any) -> Preloads:
    """A Preloads as loadlists.json and the scan cache keep it."""
    gate = data["gate"]
    if gate is not None and not isinstance(gate, str):
        raise TypeError("a gate of the wrong type")
    return Preloads(
        normal=_entries(data["normal"]),
        gate=gate,
        entries=_entries(data["except"]),
        error_stems=tuple(str(s) for s in data["error_stems"]),
        search=tuple(str(p) for p in data["search"]),
        nvidia_folder_required=bool(data["nvidia_folder_required"]),
        fallback_only_if_empty=bool(data["fallback_only_if_empty"]),
        origin="",
    )


def preloads_to_json(pre: Preloads) -> dict[str, Any]:
    def rows(entries: tuple[PreloadEntry, ...]) -> list[list[Any]]:
        return [
            [e.folder, e.pattern, e.required, *([e.min_cuda] if e.min_cuda is not None else [])]
            for e in entries
        ]

    return {
        "normal": rows(pre.normal),
        "gate": pre.gate,
        "except": rows(pre.entries),
        "error_stems": list(pre.error_stems),
        "search": list(pre.search),
        "nvidia_folder_required": pre.nvidia_folder_required,
        "fallback_only_if_empty": pre.fallback_only_if_empty,
    }


def hand_load_from_json(row: Any) -> HandLoad:
    return HandLoad(
        names=tuple(str(n) for n in row["names"]),
        folders=tuple(str(f) for f in row["folders"]),
        search=str(row["search"]),
        required=bool(row["required"]),
        by_name=bool(row.get("by_name", False)),
        reuse_loaded=bool(row.get("reuse_loaded", False)),
    )


def hand_load_to_json(load: HandLoad) -> dict[str, Any]:
    return {
        "names": list(load.names),
        "folders": list(load.folders),
        "search": load.search,
        "required": load.required,
        "by_name": load.by_name,
        "reuse_loaded": load.reuse_loaded,
    }


def framework_loads_from_json(data: Any) -> FrameworkLoads:
    """A FrameworkLoads as loadlists.json and the scan cache keep it."""
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
            )
            for r in data["roots"]
        ),
        build_major=major,
        origin="",
        by_soname=None
        if by_soname is None
        else {str(k): tuple(hand_load_from_json(x) for x in v) for k, v in by_soname.items()},
    )


def framework_loads_to_json(loads: FrameworkLoads) -> dict[str, Any]:
    out: dict[str, Any] = {
        "roots": [
            {"path": r.path, "what": r.what, "loads": [hand_load_to_json(x) for x in r.loads]}
            for r in loads.roots
        ],
        "build_major": loads.build_major,
    }
    if loads.by_soname is not None:
        out["by_soname"] = {
            k: [hand_load_to_json(x) for x in v] for k, v in loads.by_soname.items()
        }
    return out


def _framework(p: Any) -> Framework:
    return Framework(
        name=p["name"],
        distribution=p["distribution"],
        package=p["package"],
        reader=p.get("reader"),
        sources=tuple(p.get("sources", ())),
        contexts=tuple(
            FrameworkContext(
                name=c["name"],
                steps=tuple(c["steps"]),
                primary=bool(c.get("primary", False)),
                expected=bool(c.get("expected", True)),
            )
            for c in p["contexts"]
        ),
        releases={k: framework_loads_from_json(v) for k, v in p["releases"].items()},
        runtime={
            k: (tuple(v.get("loads", ())), tuple(v.get("optional", ())))
            for k, v in p.get("runtime", {}).items()
        },
        optional_roots=bool(p.get("optional_roots", False)),
        companions=tuple(p.get("companions", ())),
    )


@functools.cache
def load_catalog() -> Catalog:
    data = resources.files("cudatx") / "data"
    lists = json.loads((data / "loadlists.json").read_text(encoding="utf-8"))
    runtime = json.loads((data / "runtime.json").read_text(encoding="utf-8"))
    return Catalog(
        load_lists=tuple(
            LoadList(
                distribution=p["distribution"],
                package=p["package"],
                reader=p.get("reader"),
                module=p["module"],
                first=p.get("first"),
                releases={k: preloads_from_json(v) for k, v in p["releases"].items()},
            )
            for p in lists["packages"]
        ),
        frameworks=tuple(_framework(p) for p in lists.get("frameworks", ())),
        driver=tuple(runtime["driver"]),
        dlopen=tuple(
            KnownLoads(
                obj=e["object"], loads=tuple(e["loads"]), optional=tuple(e.get("optional", ()))
            )
            for e in runtime["dlopen"]
        ),
        not_loads=frozenset(runtime.get("not_loads", ())),
    )
