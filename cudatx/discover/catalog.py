"""The shipped knowledge of run-time loads: cudatx/data/loadlists.json and runtime.json."""

from __future__ import annotations

import fnmatch
import functools
import json
import re
from importlib import resources
from typing import Any

from cudatx.models import Frozen


class PreloadEntry(Frozen, kw_only=False):
    folder: str  # the component folder torch names ("cublas", "cuda_nvrtc", ...)
    pattern: str  # a glob over file names ("libcublas.so.*[0-9]")
    required: bool  # a missing one raises (except path: import fails; normal path: list ends)
    min_cuda: int | None = None  # only for a CUDA build of at least this major (0: any)


class Preloads(Frozen, kw_only=False):
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


class Constant(Frozen, kw_only=False):
    """A string constant a package's own source sets at module level: `name` in `file`,
    relative to the package folder (torch's `cuda` in version.py)."""

    file: str
    name: str


class LoadList(Frozen, kw_only=False):
    """What a package loads by hand before its extension module."""

    distribution: str
    package: str
    # a registered framework reader that reads the installed source (a PreloadReader:
    # cudatx.discover.frameworks), if cudatx has one
    reader: str | None
    module: str  # the extension module the list runs before ("_C" for torch._C)
    first: str | None  # loaded first, relative to the package folder
    releases: dict[str, Preloads]  # "major.minor" -> what that release preloads
    # the constant of its source that says the CUDA version it was built for
    # (torch.version.cuda), if it has one
    cuda_version: Constant | None = None
    # Its own functions that load a library by path, by dotted name (torch.ops.load_library,
    # ctypes.CDLL once the package is imported): a call of one in another package's code is a
    # load made after `import <package>` (cudatx.discover.handloads).
    load_functions: tuple[str, ...] = ()
    # What an operator library of the package links, its core libraries: a file named like
    # an extension module, outside the package, that needs one is a root (torchvision's
    # _C.so: cudatx.discover.sitewalk).
    core_libraries: tuple[str, ...] = ()


class KnownLoads(Frozen, kw_only=False):
    obj: str  # soname of the loading object; may hold {major}
    loads: tuple[str, ...]
    optional: tuple[str, ...]


class Catalog(Frozen, kw_only=False):
    load_lists: tuple[LoadList, ...]
    driver: tuple[str, ...]  # fnmatch patterns
    dlopen: tuple[KnownLoads, ...]
    not_loads: frozenset[str]

    def is_driver(self, name: str) -> bool:
        return self._driver.match(name) is not None

    @functools.cached_property
    def _driver(self) -> re.Pattern[str]:
        # One expression for every pattern: asked for each need of each replay.
        return re.compile("|".join(fnmatch.translate(p) for p in self.driver) or "(?!)")

    @functools.cached_property
    def load_functions(self) -> dict[str, str]:
        """Each package's own library-loading function -> that package."""
        return {f: ll.package for ll in self.load_lists for f in ll.load_functions}

    @functools.cached_property
    def core_libraries(self) -> dict[str, frozenset[str]]:
        """Package -> its core libraries, for those that name them."""
        return {
            ll.package: frozenset(ll.core_libraries) for ll in self.load_lists if ll.core_libraries
        }

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
                cuda_version=(
                    Constant(str(p["cuda_version"]["file"]), str(p["cuda_version"]["name"]))
                    if "cuda_version" in p
                    else None
                ),
                load_functions=tuple(p.get("load_functions", ())),
                core_libraries=tuple(p.get("core_libraries", ())),
            )
            for p in lists["packages"]
        ),
        driver=tuple(runtime["driver"]),
        dlopen=tuple(
            KnownLoads(
                obj=e["object"], loads=tuple(e["loads"]), optional=tuple(e.get("optional", ()))
            )
            for e in runtime["dlopen"]
        ),
        not_loads=frozenset(runtime.get("not_loads", ())),
    )
