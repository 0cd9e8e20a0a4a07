"""Immutable facts about one environment.

Every model here is frozen: the scan produces them once and queries return new values.
"""

from __future__ import annotations

import dataclasses
import operator
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, ClassVar, NamedTuple, dataclass_transform


@dataclass_transform(frozen_default=True, kw_only_default=True)
class Frozen:
    """Base of every model: each subclass is a frozen, keyword-only dataclass (or one that
    takes its fields in order too: `class X(Frozen, kw_only=False)`).

    Not a pydantic model: importing pydantic and building its validators took 110 ms of every
    run, a third of a warm plan. What every run reads is decoded by cudatx.codec; documents
    (reports, journals, snapshots, trace records) are validated and written by pydantic in
    cudatx.documents, which reads the config below (an unknown field is an error).

    The methods a frozen dataclass gets are this class's, the same for every model, written
    once: `dataclasses` compiles six functions per class (__init__, __setattr__,
    __delattr__, __eq__, __hash__, __repr__), and that was 20 of the 46 ms a warm plan spent
    making its classes (python 3.11). The subclass is still a dataclass (fields(), replace(),
    pydantic read `__dataclass_fields__`); what the methods do is what dataclasses writes
    for frozen=True, kw_only=True (tests/test_models.py holds them to it).
    """

    __pydantic_config__: ClassVar[dict[str, Any]] = {"extra": "forbid"}
    _init: ClassVar[tuple[tuple[str, Any, Any], ...]]  # (name, default, factory) of init fields
    _set: ClassVar[tuple[tuple[str, Any, Any], ...]]  # the same of init=False fields
    _names: ClassVar[frozenset[str]]
    _positional: ClassVar[tuple[str, ...]]  # init fields that may be given by position
    _compared: ClassVar[Callable[[Any], object]]
    _shown: ClassVar[tuple[str, ...]]
    _post: ClassVar[Callable[[Any], None] | None]

    def __init_subclass__(cls, *, kw_only: bool = True, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        dataclass(init=False, repr=False, eq=False, kw_only=kw_only)(cls)
        every = dataclasses.fields(cls)  # type: ignore[arg-type]  # a dataclass by now
        cls._init = tuple((f.name, f.default, f.default_factory) for f in every if f.init)
        cls._positional = tuple(f.name for f in every if f.init and not f.kw_only)
        cls._set = tuple((f.name, f.default, f.default_factory) for f in every if not f.init)
        cls._names = frozenset(name for name, _, _ in cls._init)
        compared = [f.name for f in every if f.compare]
        cls._compared = operator.attrgetter(*compared) if len(compared) > 1 else _as_tuple(compared)
        cls._shown = tuple(f.name for f in every if f.repr)
        cls._post = getattr(cls, "__post_init__", None)

    def __init__(self, *args: Any, **values: Any) -> None:
        if args:  # `class X(Frozen, kw_only=False)`: its fields in order, then by name
            values = self._in_order(args, values)
        if values.keys() != self._names:  # a field left to its default, or a wrong name
            values = self._completed(values)
        # Every field at once, at C speed (object.__setattr__ per field took as long as the
        # rest of a warm plan's decoding): a dataclass's own __init__ sets the same.
        self.__dict__.update(values)
        if self._set:
            for name, default, factory in self._set:
                if default is not _MISSING or factory is not _MISSING:
                    value = default if factory is _MISSING else factory()
                    object.__setattr__(self, name, value)
        post = type(self)._post
        if post is not None:
            post(self)

    @classmethod
    def _in_order(cls, args: tuple[Any, ...], values: dict[str, Any]) -> dict[str, Any]:
        positional = cls._positional
        if len(args) > len(positional):
            raise TypeError(
                f"{cls.__qualname__}.__init__() takes {len(positional) + 1} "
                f"positional arguments but {len(args) + 1} were given"
            )
        for name in positional[: len(args)]:
            if name in values:
                raise TypeError(
                    f"{cls.__qualname__}.__init__() got multiple values for argument '{name}'"
                )
        return {**dict(zip(positional, args, strict=False)), **values}

    @classmethod
    def _completed(cls, values: dict[str, Any]) -> dict[str, Any]:
        """Every init field's value: given, or its default; a missing or unknown name is a
        TypeError, as a dataclass's __init__ raises."""
        out: dict[str, Any] = {}
        for name, default, factory in cls._init:
            if name in values:
                out[name] = values[name]
            elif default is not _MISSING:
                out[name] = default
            elif factory is not _MISSING:
                out[name] = factory()
            else:
                raise TypeError(
                    f"{cls.__qualname__}.__init__() missing 1 required keyword-only "
                    f"argument: '{name}'"
                )
        if not cls._names.issuperset(values):
            extra = next(iter(set(values) - cls._names))
            raise TypeError(
                f"{cls.__qualname__}.__init__() got an unexpected keyword argument '{extra}'"
            )
        return out

    def __setattr__(self, name: str, value: Any) -> None:
        raise dataclasses.FrozenInstanceError(f"cannot assign to field '{name}'")

    def __delattr__(self, name: str) -> None:
        raise dataclasses.FrozenInstanceError(f"cannot delete field '{name}'")

    def __eq__(self, other: object) -> bool:
        if other.__class__ is self.__class__:
            compared = type(self)._compared  # from the class: a function there is not bound
            return bool(compared(self) == compared(other))
        return NotImplemented

    def __hash__(self) -> int:
        return hash(type(self)._compared(self))

    def __repr__(self) -> str:
        shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in self._shown)
        return f"{type(self).__qualname__}({shown})"


_MISSING: Any = dataclasses.MISSING


def _as_tuple(names: list[str]) -> Callable[[Any], object]:
    """A model's compared fields as a tuple, for none or one of them (attrgetter gives one
    bare)."""
    if not names:
        return lambda _: ()
    name = names[0]
    return lambda self: (getattr(self, name),)


class Finding(Frozen):
    """Something the scan noticed and carried on past (a malformed RECORD line, a non-ELF .so)."""

    kind: str
    path: str
    message: str


class Interpreter(Frozen):
    """What the target interpreter said about itself, asked once in a subprocess
    (cudatx.discover.target): facts of the interpreter, none of the files its site folders
    hold now."""

    python: str  # the interpreter as requested (sys.executable of the target)
    executable: str  # realpath of the running binary, as /proc/self/exe names it
    version: str
    prefix: str
    base_prefix: str
    path: tuple[str, ...]  # sys.path as it starts, before site adds anything
    site_packages: tuple[str, ...]
    stdlib: tuple[str, ...]
    extension_suffixes: tuple[str, ...]
    markers: dict[str, str]
    found_by: str  # "--python", "VIRTUAL_ENV", "CONDA_PREFIX", ".venv", "the first python3 on PATH"


class SandboxUsed(Frozen):
    """The confinement a change's uv or a trial ran under (cudatx.sandbox): `mode` "user
    namespace", "mount namespace as root" or "none"; `locked`: the read-only flags could not
    be undone from inside; `reason`: why none, or what was weaker; `writable`: the only
    folders it could write (empty where none held)."""

    mode: str
    locked: bool
    reason: str
    writable: tuple[str, ...] = ()


class PythonTarget(Frozen):
    """The target interpreter and the sys.path its site module would make of the files as
    they are now (cudatx.discover.target.site_path): derived again at every scan."""

    python: str  # the interpreter as requested (sys.executable of the target)
    executable: str  # realpath of the running binary, as /proc/self/exe names it
    version: str
    prefix: str
    base_prefix: str
    sys_path: tuple[str, ...]
    site_packages: tuple[str, ...]
    stdlib: tuple[str, ...]
    extension_suffixes: tuple[str, ...]
    markers: dict[str, str]
    # `import` lines of the site folders' .pth files (`name.pth: line`): site would run
    # them at start-up; cudatx reads them and runs none.
    pth_imports: tuple[str, ...] = ()
    found_by: str  # "--python", "VIRTUAL_ENV", "CONDA_PREFIX", ".venv", "the first python3 on PATH"

    @property
    def install_site(self) -> str:
        """The site folder uv installs into: sysconfig's purelib, which the query lists first
        (a venv's platlib is the same folder)."""
        return self.site_packages[0]


class RecordEntry(NamedTuple):
    """One RECORD row. A named tuple rather than a model: torch's RECORD alone has 13,000 rows,
    and a model per row cost 70 ms of every run (a tuple validates and builds 3x faster)."""

    path: str  # as written in RECORD, relative to the site folder (may start with ../)
    hash_algorithm: str | None = None
    hash_digest: str | None = None  # urlsafe base64, no padding, as RECORD writes it
    size: int | None = None


class PackageRecord(Frozen):
    """What an owner's own record of a package says beyond its files (cudatx.discover.owners:
    a conda environment's `conda-meta/*.json` record)."""

    name: str  # the owner's name for the package (conda's `cudnn`, `libcublas`, `pytorch`)
    build: str  # the build string (`h93bb076_0`, `py3.11_cuda12.1_cudnn8.9.2_0`)
    channel: str | None = None
    depends: tuple[str, ...] = ()  # its owner's specs (conda's `cuda-version >=12,<13.0a0`)


class Distribution(Frozen):
    # canonical (PEP 503); a record of an owner with a prefix: the prefix and the owner's
    # own name (`conda:cudnn`)
    name: str
    display_name: str
    version: str
    # absolute path of the .dist-info or .egg-info folder (a conda record: its .json file)
    metadata_dir: str
    # the sys.path entry the metadata folder lives in; for a conda record, the prefix its
    # paths are relative to
    site: str
    # the key of the owner that lists its files (cudatx.discover.owners.owner_of): "dist-info",
    # "egg-info" or "conda"
    owner: str
    records: tuple[RecordEntry, ...]
    requires: tuple[str, ...]
    installer: str | None = None
    direct_url: str | None = None  # raw JSON text of direct_url.json
    package: PackageRecord | None = None  # its owner's own record (a conda record's)


class SystemPackage(Frozen):
    """A package of the system's package manager (dpkg, rpm) that owns a file."""

    manager: str  # its owner's key (cudatx.discover.owners): "dpkg" or "rpm"
    name: str
    version: str
    architecture: str | None = None

    def __str__(self) -> str:
        return f"{PACKAGES_OF.get(self.manager, self.manager)} {self.name} {self.version}"


# Owner key -> its packages in words ("Debian package"), as each owner registers
# (cudatx.discover.owners.register): the models sit below the owners and name none.
PACKAGES_OF: dict[str, str] = {}


class VersionNeed(Frozen):
    """One Elf_Verneed entry: a file (soname) and the version names required from it."""

    file: str
    versions: tuple[str, ...]
    weak: tuple[str, ...] = ()  # those of `versions` whose vna_flags has VER_FLG_WEAK


class Symbols(Frozen):
    """An object's dynamic references, as glibc's symbol lookup asks about them
    (elf/dl-lookup.c). A reference is a name, "name@V@file" when `.gnu.version` gives it a
    version needed from `file` (its Elf_Verneed), or "name@V@" for a version of the object's
    own. What an object defines is not kept here: a check asks the object itself
    (cudatx.elf.exports), as glibc asks its hash table.
    """

    undefined: tuple[str, ...] = ()  # non-weak references
    weak_undefined: tuple[str, ...] = ()

    def references(self) -> tuple[tuple[str, str | None, str | None], ...]:
        """The non-weak references as (name, version, file)."""
        out: list[tuple[str, str | None, str | None]] = []
        for ref in self.undefined:
            name, at, rest = ref.partition("@")
            if not at:
                out.append((name, None, None))
            else:
                version, _, file = rest.partition("@")
                out.append((name, version, file or None))
        return tuple(out)


class ElfInfo(Frozen):
    """The parts of an ELF object the dynamic loader reads to place it."""

    path: str
    elf_class: int  # 32 or 64
    data: int  # 1 little-endian, 2 big-endian (EI_DATA)
    machine: int  # e_machine
    elf_type: str  # "ET_DYN", "ET_EXEC", ...
    soname: str | None = None
    needed: tuple[str, ...] = ()
    rpath: str | None = None  # raw DT_RPATH string
    runpath: str | None = None  # raw DT_RUNPATH string
    flags: int = 0  # DT_FLAGS
    flags_1: int = 0  # DT_FLAGS_1
    interpreter: str | None = None  # PT_INTERP
    version_needs: tuple[VersionNeed, ...] = ()
    # The version names of DT_VERDEF, the base (the soname) included as glibc's
    # match_symbol compares them all; None when the object has no DT_VERDEF.
    version_defs: tuple[str, ...] | None = None


class How(StrEnum):
    """The step of glibc's search that produced a file (docs/architecture.md, "The model")."""

    ALREADY_LOADED = "already loaded"
    PATH = "path"  # the name held a '/', opened as is
    RPATH = "rpath"
    LD_LIBRARY_PATH = "ld_library_path"
    RUNPATH = "runpath"
    LD_SO_CACHE = "ld.so.cache"
    DEFAULT = "default"


class Outcome(StrEnum):
    FOUND = "found"
    ABSENT = "absent"
    WRONG_CLASS = "wrong ELF class"
    WRONG_MACHINE = "wrong machine"
    INVALID = "invalid ELF"  # glibc stops the whole search here: the load fails
    SKIPPED_NODEFLIB = "skipped (DF_1_NODEFLIB)"


class Attempt(Frozen):
    """One place glibc looks, and what it found there."""

    how: How
    source: str | None = None  # the object whose RPATH/RUNPATH gave this folder
    directory: str | None = None
    path: str
    outcome: Outcome
    detail: str | None = None


class Status(StrEnum):
    RESOLVED = "resolved"
    NOT_FOUND = "not found"
    ERROR = "error"  # a file was found but glibc would refuse it (invalid ELF header)
    SYSTEM = "system driver"  # libcuda.so.1 and friends: the driver's, never a wheel's


class Evidence(StrEnum):
    """Why cudatx believes an object loads a name."""

    IMPORT = "import"  # the extension module itself, dlopened by Python's import
    DT_NEEDED = "DT_NEEDED"
    PRELOAD = "preload"  # a package's own load list run before its extension (torch's ctypes)
    DLOPEN = "dlopen"  # a known run-time load from the shipped manifest
    DLOPEN_STRING = "dlopen (string)"  # a soname-shaped string in the object's .rodata
    OBSERVED = "observed"  # a dlopen a traced run made (`cudatx trace`, discover.traces)

    @property
    def decisive(self) -> bool:
        """Whether a need of this evidence decides a verdict (README, "How much a load
        counts"): everything but a string in .rodata, which may name an optional plug-in,
        an error message's example or a library of another platform. A load a traced run
        made is decisive, as a preload is: the real loader did it."""
        return self is not Evidence.DLOPEN_STRING


class Resolution(Frozen):
    """How one needed name of one object resolves, with every place tried."""

    name: str
    needed_by: str  # path of the object as opened
    status: Status
    evidence: Evidence = Evidence.DT_NEEDED
    how: How | None = None
    source: str | None = None  # the object whose RPATH gave the folder, for How.RPATH
    path: str | None = None  # the file as opened (not realpath)
    reused: str | None = None  # for How.ALREADY_LOADED, the loaded object's path
    detail: str | None = None
    attempts: tuple[Attempt, ...] = ()
    root: str | None = None  # the load root whose context this resolution belongs to
    cause: str | None = None  # for a load that failed by another need: the name that failed
    # What glibc's checks after the file is found miss (cudatx.loader.binding): "`V'" for a
    # version the provider does not define, "sym" or "sym@V" for a symbol nothing binds.
    missing: tuple[str, ...] = ()
