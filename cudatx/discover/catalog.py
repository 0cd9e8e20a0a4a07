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
    required: bool  # when torch needs the preloads to load at all (its except path)


@dataclass(frozen=True)
class LoadList:
    """What a package loads by hand before its extension module."""

    distribution: str
    package: str
    reader: str | None  # a parser of the installed source, if cudatx has one
    module: str  # the extension module the list runs before ("_C" for torch._C)
    first: str | None  # loaded first, relative to the package folder
    when_loaded: str | None  # preloads run only once a file of this name is mapped
    search: tuple[str, ...]  # patterns over {entry}, {folder}, {glob}, {cuda_major}
    releases: dict[str, tuple[PreloadEntry, ...]]  # "major.minor" -> entries


@dataclass(frozen=True)
class KnownLoads:
    obj: str  # soname of the loading object; may hold {major}
    loads: tuple[str, ...]
    optional: tuple[str, ...]


@dataclass(frozen=True)
class Catalog:
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


def _entries(rows: list[list[Any]]) -> tuple[PreloadEntry, ...]:
    return tuple(PreloadEntry(str(f), str(p), bool(r)) for f, p, r in rows)


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
                when_loaded=p.get("when_loaded"),
                search=tuple(p["search"]),
                releases={k: _entries(v) for k, v in p["releases"].items()},
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
