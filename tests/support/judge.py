"""The real dynamic loader as the judge.

:func:`observe_import` runs a real interpreter that imports a module with ``LD_DEBUG`` on,
then reads back what glibc did: every new load request (name, requester, where it searched,
what it tried, which file it mapped) and the files really mapped in the process.

What glibc 2.36 prints (checked by experiment on this machine; the code lives in
elf/dl-load.c unless said otherwise). Every line is ``"%5d:\\t" % pid`` + text (the pid is
right-aligned and may be wider than 5); ``[N]`` is the link-map namespace (0 = base):

``LD_DEBUG=files`` (DL_DEBUG_FILES):
  ``file=<name> [N];  needed by <loader l_name> [N]``        _dl_map_object, a DT_NEEDED
  ``file=<name> [N];  dynamically loaded by <caller> [N]``    _dl_map_object, a dlopen
  ``file=<name> [N];  generating link map``                  _dl_map_object_from_fd: mapped
  ``  dynamic: 0x...  base: 0x...   size: 0x...`` and ``    entry: 0x...  phdr: ...``
  ``file=<l_name> [N];  destroying link map``                elf/dl-close.c (failed dlopen)
  ``opening file=<l_name> [N]; direct_opencount=<n>``        elf/dl-open.c, dlopen returned
  ``calling init: <path>`` / ``calling fini: <path> [N]``    elf/dl-init.c, elf/dl-fini.c
``LD_DEBUG=libs`` (DL_DEBUG_LIBS):
  ``find library=<name> [N]; searching``                     _dl_map_object, name has no '/'
  `` search path=<d1>:<d2>:...\\t\\t(RPATH from file <obj>)``  print_search_path; also
        ``(RUNPATH from file <obj>)``, ``(LD_LIBRARY_PATH)``, ``(system search path)``
  `` search cache=/etc/ld.so.cache``                          _dl_map_object
  ``  trying file=<path>``                                   open_path, and elf/dl-cache.c
        for the cache's answer
  ``initialize program: <exe>`` / ``transferring control: <exe>``   elf/rtld.c

Facts the parser relies on, all observed here:

- ``LD_DEBUG=libs`` alone prints no ``needed by`` / ``generating link map`` lines; those
  are DL_DEBUG_FILES, so we run with ``LD_DEBUG=libs,files``.
- Nothing at all is printed for a request satisfied by an already-loaded object whose name
  or DT_SONAME matches (the match loop in _dl_map_object runs before any print), so
  requests only cover new loads. A search whose found file turns out to be an already-mapped
  object (same st_dev/st_ino, e.g. a symlink alias) prints its ``trying file=`` and then
  nothing: no ``generating link map``. We mark those ``reused`` by comparing the file's
  (st_dev, st_ino) with the process's mappings.
- A failed search prints no error line; the dlopen that contained it prints
  ``destroying link map`` for what it had mapped. ``trying file=`` is printed even for a
  candidate that is then rejected (wrong ELF class; an ld.so.cache answer in a system
  folder when the loader has DF_1_NODEFLIB), so "last tried" is the provider only when a
  ``generating link map`` (or a reuse) follows.
- ``search path=`` lists every candidate folder not yet known to be missing, with the
  hwcaps subfolders expanded in front of each base folder
  (``<d>/glibc-hwcaps/x86-64-v4..v2``, then legacy ``<d>/tls/x86_64/x86_64``,
  ``<d>/tls/x86_64`` (twice), ``<d>/tls``, ``<d>/x86_64/x86_64``, ``<d>/x86_64`` (twice),
  then ``<d>``); folders found missing are dropped from later lines and tries.
- The ``(RPATH from file X)`` label is NOT necessarily the object whose list is searched:
  glibc keeps one global record per folder string (fillin_rpath reuses an existing
  ``r_search_path_elem``) whose what/where are those of the FIRST object that introduced
  the folder, and print_search_path prints that record's label (and, per the source,
  splits one list into several lines where the records' labels differ). E.g. a DT_RPATH
  search of folder F printed ``(RUNPATH from file libz.so)`` because libz.so's RUNPATH
  had named F first. Fixtures that assert on ``how`` / ``how_source`` must give each
  object search folders of its own.
- A DT_NEEDED holding a dynamic string token is printed already expanded
  (elf/dl-deps.c expands DSTs before _dl_map_object): ``file=/x/sub/libp.so [0];  needed
  by /x/libo.so [0]`` for ``$ORIGIN/sub/libp.so``.
- ``needed by`` / ``from file`` print the object's l_name: the path it was opened at (not
  its realpath), the search result for a searched name, and argv[0] for the executable.
  Expanded ``$ORIGIN/..`` is not normalised (``/sp/fixpkg/../fixlibs/libA.so``); compare
  paths through realpath (:attr:`Request.provider_realpath`, :meth:`Observation.loaded`).
"""

from __future__ import annotations

import enum
import json
import os
import re
import subprocess
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final, Literal

__all__ = [
    "ANY",
    "How",
    "JudgeError",
    "Observation",
    "Request",
    "SearchPath",
    "observe_code",
    "observe_dlopen",
    "observe_import",
    "parse_ld_debug",
]

How = Literal["rpath", "runpath", "ld_library_path", "ld.so.cache", "default", "path"]
Kind = Literal["needed", "dlopen", "unknown"]

# Variables that would change what the judged process does behind the test's back.
_SCRUBBED_ENV: Final = (
    "LD_PRELOAD",
    "LD_AUDIT",
    "LD_DEBUG",
    "LD_DEBUG_OUTPUT",
    "LD_BIND_NOW",
    "LD_LIBRARY_PATH",
    "PYTHONHOME",
    "PYTHONPATH",
    "PYTHONSTARTUP",
    "PYTHONSAFEPATH",
)


class _Any(enum.Enum):
    ANY = "any"


ANY: Final = _Any.ANY  # "any requester" for Observation.find_request / request


class JudgeError(RuntimeError):
    """The judged process could not be run (not raised for a failing import)."""


@dataclass(frozen=True)
class SearchPath:
    """One ``search path=`` / ``search cache=`` line of a request."""

    how: How
    source: str | None  # the X of "(RPATH from file X)", as printed (see module docstring)
    dirs: tuple[str, ...]  # as printed, hwcaps subfolders included; the cache file for cache
    label: str  # the raw label: "RPATH from file X", "LD_LIBRARY_PATH", "ld.so.cache", ...

    @property
    def base_dirs(self) -> tuple[str, ...]:
        """``dirs`` without the glibc-hwcaps and legacy (tls/<platform>) subfolders."""
        return tuple(d for d in self.dirs if not _is_hwcaps_subdir(d, self.dirs))


_LEGACY_HWCAPS_PARTS: Final = frozenset({"tls", os.uname().machine, "haswell", "xeon_phi"})


def _is_hwcaps_subdir(d: str, dirs: Sequence[str]) -> bool:
    head, sep, tail = d.partition("/glibc-hwcaps/")
    if sep and "/" not in tail and head in dirs:
        return True
    parts = d.split("/")
    for cut in range(len(parts) - 1, max(len(parts) - 4, 0), -1):
        base = "/".join(parts[:cut])
        if base in dirs and set(parts[cut:]) <= _LEGACY_HWCAPS_PARTS:
            return True
    return False


@dataclass(frozen=True)
class Request:
    """One new load request as glibc reported it.

    ``provider`` is the path of the file that got mapped (the last ``trying file=`` before
    ``generating link map``; the name itself for a name with a '/'), or the already-mapped
    file a search ended on (``reused``), or None when the request failed. ``how`` is None
    when it failed, and otherwise taken from the label glibc printed for the folder the
    provider was found in (read the caveat on labels in the module docstring).
    """

    name: str
    needed_by: str | None  # None when glibc printed no "needed by"/"dynamically loaded by"
    kind: Kind
    namespace: int
    provider: str | None
    how: How | None
    how_source: str | None
    tried: tuple[str, ...]
    searches: tuple[SearchPath, ...] = ()
    reused: bool = False

    @property
    def found(self) -> bool:
        return self.provider is not None

    @property
    def provider_realpath(self) -> str | None:
        """glibc does not normalise expanded ``$ORIGIN/..`` paths; this does."""
        return None if self.provider is None else os.path.realpath(self.provider)


@dataclass(frozen=True)
class Observation:
    python: str
    code: str
    ok: bool
    error: str | None
    maps: tuple[str, ...]  # realpaths of every file-backed mapping, first-seen order
    requests: tuple[Request, ...]
    returncode: int
    pid: int | None
    stdout: str = field(repr=False)
    stderr: str = field(repr=False)

    def loaded(self, path: os.PathLike[str] | str) -> bool:
        """Whether the realpath of ``path`` is mapped in the judged process."""
        return os.path.realpath(path) in self.maps

    def requests_for(self, name: str) -> tuple[Request, ...]:
        return tuple(r for r in self.requests if r.name == name)

    def find_request(
        self, name: str, needed_by: os.PathLike[str] | str | _Any | None = ANY
    ) -> Request | None:
        """The first request for ``name`` (by ``needed_by``, compared by path or realpath,
        when given; ``None`` matches requests glibc printed no requester for)."""
        for req in self.requests:
            if req.name != name:
                continue
            if needed_by is ANY:
                return req
            if needed_by is None or req.needed_by is None:
                if needed_by is None and req.needed_by is None:
                    return req
                continue
            if _same_path(req.needed_by, needed_by):
                return req
        return None

    def request(self, name: str, needed_by: os.PathLike[str] | str | _Any | None = ANY) -> Request:
        """Like :meth:`find_request`, but raise LookupError listing what was seen."""
        req = self.find_request(name, needed_by)
        if req is None:
            seen = "\n".join(f"  {r.name!r} needed by {r.needed_by!r}" for r in self.requests)
            raise LookupError(
                f"no request for {name!r} (needed_by={needed_by!r}); requests seen:\n{seen}"
            )
        return req


def _same_path(a: os.PathLike[str] | str, b: os.PathLike[str] | str) -> bool:
    return os.fspath(a) == os.fspath(b) or os.path.realpath(a) == os.path.realpath(b)


# --------------------------------------------------------------------------------------
# LD_DEBUG parsing
# --------------------------------------------------------------------------------------

_LINE = re.compile(r"^\s*(?P<pid>\d+):\t(?P<text>.*)$")
_FILE_NEEDED = re.compile(r"^file=(?P<name>.*) \[(?P<ns>\d+)\];  needed by (?P<by>.*) \[\d+\]$")
_FILE_DLOPEN = re.compile(
    r"^file=(?P<name>.*) \[(?P<ns>\d+)\];  dynamically loaded by (?P<by>.*) \[\d+\]$"
)
_GENERATING = re.compile(r"^file=(?P<name>.*) \[(?P<ns>\d+)\];  generating link map$")
_FIND = re.compile(r"^find library=(?P<name>.*) \[(?P<ns>\d+)\]; searching$")
_SEARCH_PATH = re.compile(r"^ search path=(?P<dirs>.*)\t\t\((?P<label>[^\t]*)\)$")
_SEARCH_CACHE = re.compile(r"^ search cache=(?P<cache>.*)$")
_TRYING = re.compile(r"^  trying file=(?P<path>.*)$")
_LINK_MAP_DETAIL = re.compile(r"^\s+(dynamic|entry): ")
_FROM_FILE = re.compile(r"^(?P<what>RPATH|RUNPATH) from file (?P<src>.*)$")


def _search_from_label(dirs: str, label: str) -> SearchPath:
    split = tuple(d for d in dirs.split(":") if d) if dirs else ()
    m = _FROM_FILE.match(label)
    if m:
        how: How = "rpath" if m["what"] == "RPATH" else "runpath"
        return SearchPath(how, m["src"], split, label)
    if label == "LD_LIBRARY_PATH":
        return SearchPath("ld_library_path", None, split, label)
    if label == "system search path":
        return SearchPath("default", None, split, label)
    raise ValueError(f"unknown LD_DEBUG search path label {label!r}")


@dataclass
class _Pending:
    name: str
    needed_by: str | None
    kind: Kind
    namespace: int
    searching: bool = False
    searches: list[SearchPath] = field(default_factory=list)
    tried: list[tuple[str, int]] = field(default_factory=list)  # (path, index in searches)

    def close(
        self, generated: bool, mapped_ids: frozenset[tuple[int, int]] | None, cwd: str
    ) -> Request:
        provider: str | None = None
        how: How | None = None
        source: str | None = None
        reused = False
        if self.tried:
            last, index = self.tried[-1]
            if generated or _is_mapped(os.path.join(cwd, last), mapped_ids):
                provider, how = last, self.searches[index].how
                source = self.searches[index].source
                reused = not generated
        elif not self.searching and (
            generated or _is_mapped(os.path.join(cwd, self.name), mapped_ids)
        ):
            provider, how, reused = self.name, "path", not generated
        return Request(
            name=self.name,
            needed_by=self.needed_by,
            kind=self.kind,
            namespace=self.namespace,
            provider=provider,
            how=how,
            how_source=source,
            tried=tuple(path for path, _ in self.tried),
            searches=tuple(self.searches),
            reused=reused,
        )


def _is_mapped(path: str, mapped_ids: frozenset[tuple[int, int]] | None) -> bool:
    if not mapped_ids:
        return False
    try:
        st = os.stat(path)
    except OSError:
        return False
    return (st.st_dev, st.st_ino) in mapped_ids


def parse_ld_debug(
    stderr: str,
    *,
    pid: int | None = None,
    mapped_ids: Iterable[tuple[int, int]] | None = None,
    cwd: os.PathLike[str] | str | None = None,
) -> tuple[Request, ...]:
    """Parse ``LD_DEBUG=libs,files`` output into requests, in the order glibc made them.

    ``pid``: only lines of this process (default: the first pid seen). ``mapped_ids``:
    (st_dev, st_ino) of the files the process had mapped, to recognise a search that ended
    on an already-loaded object; without it such requests read as failed. ``cwd``: the
    process's working folder, against which relative names are stat()ed for that check.
    """
    where = os.fspath(cwd) if cwd is not None else os.getcwd()
    ids = frozenset(mapped_ids) if mapped_ids is not None else None
    requests: list[Request] = []
    current: _Pending | None = None

    def close(generated: bool = False) -> None:
        nonlocal current
        if current is not None:
            requests.append(current.close(generated, ids, where))
            current = None

    for raw in stderr.splitlines():
        line = _LINE.match(raw)
        if line is None:
            continue
        if pid is None:
            pid = int(line["pid"])
        elif int(line["pid"]) != pid:
            continue
        text = line["text"]
        if not text.strip() or _LINK_MAP_DETAIL.match(text):
            continue
        if m := _FILE_NEEDED.match(text):
            close()
            current = _Pending(m["name"], m["by"], "needed", int(m["ns"]))
        elif m := _FILE_DLOPEN.match(text):
            close()
            current = _Pending(m["name"], m["by"], "dlopen", int(m["ns"]))
        elif m := _FIND.match(text):
            if current is None or current.name != m["name"] or current.searching:
                close()
                current = _Pending(m["name"], None, "unknown", int(m["ns"]))
            current.searching = True
        elif m := _SEARCH_PATH.match(text):
            if current is not None:
                current.searches.append(_search_from_label(m["dirs"], m["label"]))
        elif m := _SEARCH_CACHE.match(text):
            if current is not None:
                current.searches.append(
                    SearchPath("ld.so.cache", None, (m["cache"],), "ld.so.cache")
                )
        elif m := _TRYING.match(text):
            if current is not None and current.searches:
                current.tried.append((m["path"], len(current.searches) - 1))
        elif m := _GENERATING.match(text):
            if current is not None and current.name == m["name"]:
                close(generated=True)
            else:  # not expected from glibc 2.36; keep the load rather than lose it
                close()
                requests.append(
                    _Pending(m["name"], None, "unknown", int(m["ns"])).close(True, ids, where)
                )
        else:  # opening file=, destroying link map, calling init, transferring control, ...
            close()
    close()
    return tuple(requests)


# --------------------------------------------------------------------------------------
# Running the judged process
# --------------------------------------------------------------------------------------

_CHILD = r"""
import json, os, sys
code, marker = sys.argv[1], sys.argv[2]
ok, error = True, None
try:
    exec(compile(code, "<cudatx-judge>", "exec"), {"__name__": "__cudatx_judge__"})
except BaseException as exc:
    ok, error = False, f"{type(exc).__name__}: {exc}"
maps, ids = [], []
with open("/proc/self/maps") as f:
    for line in f:
        parts = line.rstrip("\n").split(None, 5)
        if len(parts) == 6 and parts[5].startswith("/"):
            real = os.path.realpath(parts[5])
            if real not in maps:
                maps.append(real)
                try:
                    st = os.stat(parts[5])
                    ids.append([st.st_dev, st.st_ino])
                except OSError:
                    pass
sys.stdout.flush()
sys.stdout.write("\n" + marker + json.dumps(
    {"ok": ok, "error": error, "maps": maps, "ids": ids, "pid": os.getpid()}) + "\n")
sys.stdout.flush()
"""


def _child_env(env: Mapping[str, str] | None, ld_library_path: str | None) -> dict[str, str]:
    base = dict(os.environ if env is None else env)
    if env is None:
        for name in _SCRUBBED_ENV:
            base.pop(name, None)
    base.pop("LD_DEBUG_OUTPUT", None)  # the output must come on stderr
    base["LD_DEBUG"] = "libs,files"
    if ld_library_path is None:
        base.pop("LD_LIBRARY_PATH", None)
    else:
        base["LD_LIBRARY_PATH"] = ld_library_path
    return base


def observe_code(
    python: os.PathLike[str] | str,
    code: str,
    *,
    env: Mapping[str, str] | None = None,
    ld_library_path: str | None = None,
    cwd: os.PathLike[str] | str | None = None,
    timeout: float = 120.0,
) -> Observation:
    """Run ``code`` in ``<python> -c`` under LD_DEBUG and report what the loader did.

    ``env``: the environment to start from (default: this process's, without LD_PRELOAD,
    LD_AUDIT, LD_DEBUG*, LD_BIND_NOW, PYTHONHOME/PYTHONPATH/...). ``ld_library_path`` is
    authoritative: set exactly as given, or removed when None. ``python`` is passed as
    argv[0] unchanged, so it is what glibc names the executable in its labels.
    """
    marker = f"@@cudatx-judge-{uuid.uuid4().hex}@@"
    argv = [os.fspath(python), "-c", _CHILD, code, marker]
    try:
        proc = subprocess.run(
            argv,
            env=_child_env(env, ld_library_path),
            cwd=cwd,
            capture_output=True,
            text=True,
            errors="replace",
            timeout=timeout,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise JudgeError(f"could not run {argv[0]}: {exc}") from exc

    stdout, sep, payload = proc.stdout.rpartition(marker)
    if sep:
        report = json.loads(payload)
        ok, error = bool(report["ok"]), report["error"]
        maps = tuple(str(p) for p in report["maps"])
        ids: frozenset[tuple[int, int]] | None = frozenset(
            (int(dev), int(ino)) for dev, ino in report["ids"]
        )
        pid: int | None = int(report["pid"])
    else:  # the interpreter died (or exited) before reporting: still an observation
        stdout = proc.stdout
        tail = "\n".join(ln for ln in proc.stderr.splitlines()[-20:] if not _LINE.match(ln)).strip()
        ok, error, maps, ids, pid = False, f"exit status {proc.returncode}: {tail}", (), None, None
    return Observation(
        python=os.fspath(python),
        code=code,
        ok=ok,
        error=error,
        maps=maps,
        requests=parse_ld_debug(proc.stderr, pid=pid, mapped_ids=ids, cwd=cwd),
        returncode=proc.returncode,
        pid=pid,
        stdout=stdout,
        stderr=proc.stderr,
    )


def observe_import(
    python: os.PathLike[str] | str,
    module: str,
    *,
    env: Mapping[str, str] | None = None,
    ld_library_path: str | None = None,
    cwd: os.PathLike[str] | str | None = None,
    timeout: float = 120.0,
) -> Observation:
    """Import ``module`` in ``<python>`` under LD_DEBUG; see :func:`observe_code`."""
    code = f"import importlib\nimportlib.import_module({module!r})\n"
    return observe_code(
        python, code, env=env, ld_library_path=ld_library_path, cwd=cwd, timeout=timeout
    )


def observe_dlopen(
    python: os.PathLike[str] | str,
    targets: Sequence[os.PathLike[str] | str],
    *,
    env: Mapping[str, str] | None = None,
    ld_library_path: str | None = None,
    cwd: os.PathLike[str] | str | None = None,
    timeout: float = 120.0,
) -> Observation:
    """``ctypes.CDLL`` each target in order, stopping at the first failure (a name without
    '/' is searched for as dlopen would; a path is opened as given)."""
    names = [os.fspath(t) for t in targets]
    code = f"import ctypes\nfor _t in {names!r}:\n    ctypes.CDLL(_t)\n"
    return observe_code(
        python, code, env=env, ld_library_path=ld_library_path, cwd=cwd, timeout=timeout
    )
