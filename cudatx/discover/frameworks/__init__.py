"""Frameworks that load NVIDIA libraries by hand, each read from its installed source.

A framework's Python code loads libraries with ctypes before the library that needs them,
and what it loads is written in its source. Each framework here is one module of this package
(its reader), one data file (cudatx/data/frameworks/NAME.json) and one test; a reader is
registered by name when its module is imported, and every module of this package is.

A reader has two questions to answer, both from files and never by a distribution's name:
- `find`: is this file (one of the reader's `markers`, a glob relative to a site folder:
  `jax_plugins/*/__init__.py`) an installed framework it knows, and which files will it read?
- `read`: what does that framework load by hand, in which order, before which of its files,
  and in which processes ("contexts")? It reads with `ast`, never importing or running; a
  source of a shape it does not know raises `Shape`, and the framework is then reported as
  not modelled (doctor and plans say so) rather than guessed at.

A reader also declares the framework's trial steps (`steps`: cudatx.trial runs them in a
shadow of the environment): what the framework does with the NVIDIA libraries before it asks
the driver for a device, and its real GPU start where it has one. Each step carries the
framework it belongs to, which the trial's verdict pairs with the model's own breaks.

A reader may also read a package's preload list (`read_preloads`: a `PreloadReader`, torch's
`__init__.py`), asked for by name by the package's load list in cudatx/data/loadlists.json
(cudatx.discover.preloads), which replays it as a context of its own (cudatx.loader.roots).
Where that load list names the constant of the package's source that says the CUDA version it
was built for (torch.version.cuda), `cuda_build` reads it, once per replay
(Environment.cuda_builds).

What a reader read is kept in the scan cache, keyed by the state of the files it read.
"""

from __future__ import annotations

import functools
import glob as globbing
import importlib
import json
import os
import pkgutil
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from importlib import resources
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from cudatx.cache import file_key, memo, settled
from cudatx.discover.catalog import LoadList, Preloads
from cudatx.discover.frameworks.model import (
    CudaBuild,
    FrameworkLoads,
    Installed,
    framework_loads_from_json,
    framework_loads_to_json,
)
from cudatx.discover.frameworks.source import Shape, constant
from cudatx.models import Distribution
from cudatx.reading import MAX_METADATA, read_bounded

if TYPE_CHECKING:
    from cudatx.cache import ScanCache


class Binds(Protocol):
    """What an object defines, as glibc's lookup binds a reference (cudatx.elf.exports)."""

    def bind_plain(self, names: set[bytes]) -> set[bytes]: ...


class SiteFiles(Protocol):
    """The files of the environment as a reader may look at them (a simulated change
    included: cudatx.loader.fileview)."""

    def glob(self, pattern: str) -> list[str]: ...

    def real(self, path: str) -> str: ...

    def exports(self, path: str) -> Binds | None: ...

    def needed(self, path: str) -> tuple[str, ...]: ...

    def machine(self, path: str) -> int | None:
        """The ELF header's e_machine (62: x86-64); None for a file that is no ELF object."""
        ...


@dataclass(frozen=True)
class FrameworkStep:
    """One of a framework's own steps, run by the trial's judge (cudatx.trial.judge) in a
    fresh interpreter of the environment (`python -B -c`), before and after the change; it
    runs only where the module it starts from is installed (`needs`), and a step that fails
    both before and after the change is no break of the change."""

    label: str  # as the plan names the check
    # what must be installed for the step to run: a module's path under a site folder,
    # without its suffix (a package folder, a .py file or an extension module)
    needs: str
    code: str  # Python source, run with `python -B -c`
    # The framework the step belongs to, as a word its load roots' framework labels hold
    # (BrokenRoot.framework, lowercased), which is its top-level module: the verdict judges
    # the step by the model's breaks of that framework's roots (and, for a GPU start, of
    # that module's import).
    framework: str
    # run only where the trial's GPU probe found a device: the framework's real GPU start
    gpu: bool = False


class FrameworkReader(Protocol):
    """One framework's reader (a module of this package)."""

    name: str
    markers: tuple[str, ...]  # globs relative to a site folder that find it

    def find(self, site: str, marker: str, owner: str, files: SiteFiles) -> Installed | None:
        """The framework this marker file belongs to, or None where it is none this reader
        reads (a CPU build of onnxruntime)."""
        ...

    def read(self, found: Installed, texts: dict[str, str]) -> FrameworkLoads:
        """What it loads by hand, from the texts of `found.sources`; raises Shape."""
        ...

    def steps(self, sites: Sequence[str], files: SiteFiles) -> Iterable[FrameworkStep]:
        """Its trial steps for an environment of these site folders (a step found in the
        environment's files, as a compiled loader's is, included); the trial runs those whose
        `needs` is installed."""
        ...


@runtime_checkable
class PreloadReader(Protocol):
    """A reader that also reads what a package's __init__.py preloads before its extension
    module (torch's), named as the `reader` of the package's load list."""

    def read_preloads(self, text: str, filename: str) -> Preloads:
        """The preloads of the source `text` (read from `filename`); raises SyntaxError,
        ValueError or Shape."""
        ...


_READERS: dict[str, FrameworkReader] = {}


def register(reader: FrameworkReader) -> FrameworkReader:
    """Register a reader by its name (a module of this package calls it on import)."""
    _READERS[reader.name] = reader
    return reader


@functools.cache
def _import_readers() -> None:
    for module in pkgutil.iter_modules(__path__):
        if module.name not in ("model", "source"):
            importlib.import_module(f"{__name__}.{module.name}")


def readers() -> dict[str, FrameworkReader]:
    """Every registered reader: the modules of this package, imported once (whether or not
    one of them, or a test's reader, registered itself first: an import of torch's reader
    for its preload parser registered torch alone, and the registry stayed so)."""
    _import_readers()
    return _READERS


def preload_reader(name: str | None) -> PreloadReader | None:
    """The registered reader `name` where it reads preload lists; None where none does."""
    reader = readers().get(name) if name else None
    return reader if isinstance(reader, PreloadReader) else None


def cuda_build(
    dist: Distribution, load_list: LoadList, real: Callable[[str], str] = str
) -> CudaBuild | None:
    """The CUDA version `dist` says it was built for, where its load list names the constant
    that says it (torch's `cuda` in torch/version.py), read without importing it; None where
    the load list names none. `real` maps a path to the file holding its bytes (a staged
    file, in a simulation)."""
    said = load_list.cuda_version
    if said is None:
        return None
    declared = os.path.join(load_list.package, said.file)
    path = os.path.join(dist.site, declared)
    if not os.path.exists(path):  # RECORD may spell it otherwise (13,000 rows: only then)
        relative = next(
            (e.path for e in dist.records if os.path.normpath(e.path) == declared), declared
        )
        path = os.path.join(dist.site, relative)
    module = os.path.splitext(declared)[0].replace(os.sep, ".")
    return CudaBuild(
        distribution=dist.name,
        name=load_list.package,
        package=os.path.join(dist.site, load_list.package),
        said_by=f"{module}.{said.name}",
        cuda=constant(real(path), said.name),
    )


def trial_steps(sites: Sequence[str], files: SiteFiles) -> tuple[FrameworkStep, ...]:
    """Every reader's trial steps, in the order of the registry: those that need no GPU
    first, then the GPU starts."""
    steps = [step for reader in readers().values() for step in reader.steps(sites, files)]
    return (*(s for s in steps if not s.gpu), *(s for s in steps if s.gpu))


@functools.cache
def data(name: str) -> dict[str, Any]:
    """A reader's data file, cudatx/data/frameworks/NAME.json."""
    path = resources.files("cudatx") / "data" / "frameworks" / f"{name}.json"
    loaded: dict[str, Any] = json.loads(path.read_text("utf-8"))
    return loaded


def exists(files: SiteFiles, path: str) -> bool:
    return bool(files.glob(globbing.escape(path)))


def text(files: SiteFiles, path: str) -> str:
    return read_bounded(files.real(path), MAX_METADATA).decode("utf-8", "replace")


def find_installed(
    sites: Iterable[str], owner_of: Callable[[str], str | None], files: SiteFiles
) -> tuple[Installed, ...]:
    """The frameworks installed in these site folders, each once (its first site folder
    wins, as Python's import does). `owner_of` names the distribution whose RECORD lists a
    path (None: no distribution does; the framework is then not counted)."""
    out: dict[tuple[str, str], Installed] = {}
    for reader in readers().values():
        for site in sites:
            for marker in reader.markers:
                for path in sorted(files.glob(os.path.join(site, marker))):
                    owner = owner_of(path)
                    if owner is None:
                        continue
                    found = reader.find(site, path, owner, files)
                    if found is not None:
                        out.setdefault((found.reader, found.name), found)
    return tuple(out.values())


def read_installed(
    found: Installed, files: SiteFiles, cache: ScanCache | None = None
) -> FrameworkLoads:
    """What `found` loads by hand, read from its sources (through the scan cache); where its
    reader does not know their shape, a FrameworkLoads with `read` False saying why."""
    paths = [os.path.join(found.site, s) for s in found.sources]
    try:
        loads = _cached(found, paths, files, cache)
    except (OSError, SyntaxError, ValueError, KeyError, TypeError, RecursionError, Shape) as exc:
        return FrameworkLoads(roots=(), build_major=None, origin=f"{exc}", read=False)
    return replace(loads, origin="read from " + ", ".join(paths))


_PARSED: dict[tuple[object, ...], FrameworkLoads] = {}


def _cached(
    found: Installed, paths: list[str], files: SiteFiles, cache: ScanCache | None
) -> FrameworkLoads:
    reader = readers()[found.reader]
    states = [os.stat(files.real(p)) for p in paths]
    state = ";".join(":".join(file_key(st)) for st in states)
    key = f"{found.reader}:{found.name}:{found.site}" + (f":{found.loader}" if found.loader else "")
    seen = (key, state)
    if seen in _PARSED:
        return _PARSED[seen]
    parsed = memo(
        cache,
        "framework",
        key,
        state,
        lambda: reader.read(
            found, {s: text(files, p) for s, p in zip(found.sources, paths, strict=True)}
        ),
        load=lambda stored: framework_loads_from_json(json.loads(stored)),
        # kept only once every file read has settled (cache.RACY_NS)
        dump=lambda read: (
            json.dumps(framework_loads_to_json(read)) if all(settled(st) for st in states) else None
        ),
    )
    _PARSED[seen] = parsed
    return parsed
