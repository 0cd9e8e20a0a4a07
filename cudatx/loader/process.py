"""glibc's dynamic loader, replayed: which file each needed name maps, and how it was found.

This follows glibc 2.36 elf/dl-load.c (_dl_map_object, open_path, open_verify, cache_rpath)
and elf/dl-deps.c (_dl_map_object_deps). The search order for a name without '/' is:

  0. an already-loaded object whose name or DT_SONAME matches is reused
  1. if the loader has no DT_RUNPATH: DT_RPATH of the loader, its loader, ... up the chain
     (an object that has DT_RUNPATH has its DT_RPATH ignored, elf/get-dynamic-info.h),
     then the executable's DT_RPATH if the chain did not pass it
  2. LD_LIBRARY_PATH of the process
  3. the loader's own DT_RUNPATH (direct needs only: never inherited)
  4. /etc/ld.so.cache; under DF_1_NODEFLIB an entry inside a system folder is skipped
  5. the system folders, unless the loader has DF_1_NODEFLIB

Every search folder is tried with glibc's hwcap subfolders first (SystemLoader.subdirs).
A file of the wrong ELF class or machine is passed over; a file that is not a loadable ELF
object ends the search with an error, as open_verify's `lose` path does. A file found again
under another name is reused when its (st_dev, st_ino) matches a loaded object. Once every
name of a dlopen is found, glibc's version and symbol checks follow (cudatx.loader.binding,
whose docstring lists its own deviations), in the scopes kept here: each object's DT_NEEDED
objects, and the global scope with what RTLD_GLOBAL loads add to it.

Deliberate deviations from glibc (also listed in README.md):
- after a need that cannot be met, resolution goes on so that one run names every missing
  library; glibc stops at the first and unloads what that dlopen mapped. Versions and
  symbols are checked too, of what was found, and every failure is written, not the first
  only: a diagnosis must name the whole damage, so that its fixes cure it in one round
  (where a name is missing, a symbol is judged only if its version belongs to a file read);
- LD_PRELOAD, /etc/ld.so.preload, audit modules and secure-mode (setuid) rules are not
  modelled; an empty search-path element means cudatx's working folder;
- glibc-hwcaps entries of /etc/ld.so.cache are ignored (cudatx.elf.ldcache).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from cudatx.elf.system import SystemLoader
from cudatx.loader import binding
from cudatx.loader.fileview import FileView, Probe, Seen
from cudatx.models import Attempt, ElfInfo, Evidence, Frozen, How, Outcome, Resolution, Status

DF_1_NODEFLIB = 0x800
_DST = re.compile(r"\$(?:\{(ORIGIN|LIB|PLATFORM)\}|(ORIGIN|LIB|PLATFORM)(?![A-Za-z0-9_]))")
_LOADABLE_TYPES = ("ET_DYN", "ET_EXEC")


@dataclass(eq=False)
class Loaded:
    """One link map: the path it was opened at and every name it answers to."""

    path: str
    info: ElfInfo
    file_id: tuple[int, int] | None
    loader: Loaded | None
    names: set[str] = field(default_factory=set)
    origin: str = ""
    evidence: Evidence = Evidence.DT_NEEDED  # how it came to be mapped
    # What its DT_NEEDED entries mapped, in order (elf/dl-deps.c builds search lists from
    # them), and whether one of them is an object cudatx does not read (the driver's).
    deps: list[Loaded] = field(default_factory=list)
    opaque: bool = False

    def answers_to(self, name: str) -> bool:
        return name in self.names or name == self.info.soname

    @property
    def rpath(self) -> str | None:
        return None if self.info.runpath is not None else self.info.rpath


class LoadResult(Frozen, kw_only=False):
    root: str
    ok: bool
    loaded: tuple[str, ...]  # paths newly mapped by this load, in load order
    resolutions: tuple[Resolution, ...]
    # A framework's run-time root (cudatx.loader.roots.FrameworkRun): who loads it, and in
    # which process ("jax alone", "after `import torch`"); None for an import.
    framework: str | None = None
    context: str | None = None
    # A traced run's process replayed (cudatx.discover.traces): the record's id.
    trace: str | None = None


def _ok(resolution: Resolution) -> bool:
    return resolution.status in (Status.RESOLVED, Status.SYSTEM)


class _Fatal(Exception):
    def __init__(self, attempt: Attempt) -> None:
        self.attempt = attempt


def _origin_of(path: str, cwd: str) -> str:
    # glibc takes the folder of the name the object was opened at, made absolute but
    # never resolved through symlinks (elf/dl-object.c _dl_new_object).
    absolute = path if path.startswith("/") else os.path.join(cwd, path)
    return os.path.dirname(absolute) or "/"


class Process:
    """One simulated process. `fork()` gives an independent copy for a fresh import."""

    def __init__(
        self,
        system: SystemLoader,
        view: FileView,
        executable: ElfInfo,
        *,
        ld_library_path: str | None,
        cwd: str,
        is_driver: Callable[[str], bool] = lambda name: False,
    ) -> None:
        self.system = system
        self.is_driver = is_driver
        self.view = view
        self.cwd = cwd
        self.ld_library_path = ld_library_path
        self.objects: list[Loaded] = []
        self._named: list[tuple[Loaded, str]] = []  # names given to objects mapped earlier
        # elf/dl-load.c compares cache entries with memcmp against each system folder
        # with its trailing slash.
        self._system_prefixes = tuple(d.rstrip("/") + "/" for d in system.default_dirs)
        self._hwcaps: dict[str, tuple[str, ...]] = {}  # folder -> its hwcap subfolders
        # The global scope: the executable's search list, then what RTLD_GLOBAL loads add.
        self.global_scope: list[Loaded] = []
        self.main = Loaded(
            path=executable.path,
            info=executable,
            file_id=view.probe(executable.path).file_id,
            loader=None,
            origin=_origin_of(executable.path, cwd),
        )
        self.objects.append(self.main)
        if executable.interpreter:
            probe = view.probe(executable.interpreter)
            if probe.info is not None:
                rtld = Loaded(
                    path=executable.interpreter,
                    info=probe.info,
                    file_id=probe.file_id,
                    loader=None,
                    names={executable.interpreter},
                    origin=_origin_of(executable.interpreter, cwd),
                )
                self.objects.append(rtld)

    def fork(self) -> Process:
        """An independent copy: loading into it leaves this process as it was."""
        twin = object.__new__(Process)
        twin.__dict__.update(self.__dict__)
        copies: dict[int, Loaded] = {}
        for obj in self.objects:  # load order: a loader is always copied before its loadees
            loader = copies[id(obj.loader)] if obj.loader is not None else None
            copies[id(obj)] = Loaded(
                obj.path,
                obj.info,
                obj.file_id,
                loader,
                set(obj.names),
                obj.origin,
                obj.evidence,
                opaque=obj.opaque,
            )
        for obj in self.objects:
            copies[id(obj)].deps = [copies[id(d)] for d in obj.deps]
        twin.objects = list(copies.values())
        twin._named = []
        twin.main = copies[id(self.main)]
        twin.global_scope = [copies[id(o)] for o in self.global_scope]
        return twin

    def mark(self) -> tuple[int, int, int]:
        """A point `undo` can return to: a failed dlopen leaves nothing mapped in glibc."""
        return len(self.objects), len(self._named), len(self.global_scope)

    def undo(self, mark: tuple[int, int, int]) -> None:
        objects, named, scope = mark
        for obj, name in self._named[named:]:
            obj.names.discard(name)
        del self._named[named:]
        del self.objects[objects:]
        del self.global_scope[scope:]

    def find(self, path: str) -> Loaded | None:
        return next((obj for obj in self.objects if obj.path == path), None)

    # -- loading -------------------------------------------------------------------------

    def start(self) -> LoadResult:
        """Map the executable's dependencies, as rtld does before main() runs.

        Their versions and symbols are not checked: the interpreter runs, so they hold.
        """
        done = self._load_deps(self.main, root=self.main.path, first=[], root_is_new=False)
        self.global_scope = self.search_list(self.main)
        return done

    def search_list(self, root: Loaded) -> list[Loaded]:
        """`root` and its dependencies breadth-first, each once: the l_searchlist that
        elf/dl-deps.c _dl_map_object_deps builds, objects loaded before included."""
        order = [root]
        seen = {id(root)}
        index = 0
        while index < len(order):
            for dep in order[index].deps:
                if id(dep) not in seen:
                    seen.add(id(dep))
                    order.append(dep)
            index += 1
        return order

    def dlopen(
        self,
        name: str,
        caller: Loaded,
        *,
        root: str,
        evidence: Evidence = Evidence.IMPORT,
        needed_by: str | None = None,
        now: bool | None = None,
        global_: bool | None = None,
    ) -> LoadResult:
        """dlopen(name) called from code in `caller`, whose search path it uses.

        `needed_by` names who asked when that is not the caller's own code: a package's
        __init__.py preloading with ctypes runs dlopen from libpython. `now` and `global_`
        are RTLD_NOW and RTLD_GLOBAL; by default, what the evidence says: Python imports
        with sys.getdlopenflags() (RTLD_NOW, local), ctypes always adds RTLD_NOW and torch
        preloads with RTLD_GLOBAL, and a library's own dlopen is taken as lazy and local.
        """
        if now is None:
            now = evidence in (Evidence.IMPORT, Evidence.PRELOAD)
        if global_ is None:
            global_ = evidence is Evidence.PRELOAD
        resolution, obj, new = self._resolve(name, caller, root, evidence, needed_by)
        if obj is None or not new:
            if obj is not None and global_:
                self._make_global(obj)  # an object already open is promoted (dl-open.c)
            return LoadResult(root=root, ok=_ok(resolution), loaded=(), resolutions=(resolution,))
        done = self._load_deps(obj, root=root, first=[resolution], root_is_new=True, now=now)
        if global_ and done.ok:
            self._make_global(obj)
        return done

    def _make_global(self, obj: Loaded) -> None:
        # dl-open.c add_to_global_update: the dlopen's search list, in order, each once.
        have = {id(o) for o in self.global_scope}
        self.global_scope += [o for o in self.search_list(obj) if id(o) not in have]

    def _load_deps(
        self,
        first_obj: Loaded,
        root: str,
        first: list[Resolution],
        root_is_new: bool,
        now: bool = False,
    ) -> LoadResult:
        # Breadth-first over DT_NEEDED, like _dl_map_object_deps: an object's needs are
        # looked up with that object as the loader, in DT_NEEDED order.
        resolutions = list(first)
        queue = [first_obj]
        mapped_by = {id(first_obj): 0}  # object -> the resolution that mapped it
        edges: dict[tuple[int, str], int] = {}  # (object, needed name) -> its resolution
        index = 0
        while index < len(queue):
            obj = queue[index]
            index += 1
            for needed in obj.info.needed:
                resolution, dep, new = self._resolve(needed, obj, root)
                edges.setdefault((id(obj), needed), len(resolutions))
                resolutions.append(resolution)
                if resolution.status is Status.SYSTEM:
                    obj.opaque = True
                if dep is not None:
                    obj.deps.append(dep)
                    if new:
                        mapped_by[id(dep)] = len(resolutions) - 1
                        queue.append(dep)
        if root_is_new:
            # glibc checks versions and symbols only once every name is mapped; the replay
            # checks them anyway, what was found against what was found, so that one pass
            # names every missing library, version and symbol (module docstring).
            partial = not all(_ok(r) for r in resolutions)
            self._check(first_obj, queue, resolutions, mapped_by, edges, now, partial)
        return LoadResult(
            root=root,
            ok=all(_ok(r) for r in resolutions),
            loaded=tuple(obj.path for obj in queue[0 if root_is_new else 1 :]),
            resolutions=tuple(resolutions),
        )

    # -- after the names: versions, then symbols (cudatx.loader.binding) ------------------

    def _check(
        self,
        root: Loaded,
        new: list[Loaded],
        resolutions: list[Resolution],
        mapped_by: dict[int, int],
        edges: dict[tuple[int, str], int],
        now: bool,
        partial: bool = False,
    ) -> None:
        """glibc's checks of a dlopen: each failure is written on the resolution it belongs
        to, which makes the dlopen fail. glibc stops at the first; every one is written here.
        `partial`: a name of this dlopen was not found, so its object is not in the scope and
        could define any symbol (only a version a file read here defines is judged)."""
        fresh = {id(o) for o in new}
        order = [o for o in self.search_list(root) if id(o) in fresh]
        lacking: dict[int, set[str]] = {}  # object -> the versions already said missing
        for obj in order:  # _dl_check_map_versions, in search-list order
            for need in obj.info.version_needs:
                provider = self._already(need.file)
                if provider is None:
                    continue
                missing = binding.missing_versions(obj.info, need.file, provider.info)
                if missing:
                    lacking.setdefault(id(obj), set()).update(missing)
                    at = edges.get((id(obj), need.file), mapped_by[id(obj)])
                    message = binding.version_message(provider.path, missing[0], obj.path)
                    self._fail(resolutions, at, message, tuple(f"`{v}'" for v in missing))
        checked = [o for o in reversed(order) if now or binding.binds_now(o.info)]
        if not checked:
            return
        scope = [*self.global_scope, *self.search_list(root)]
        # The verdict is kept in the scan cache under the state of every file it read, so
        # that a run on unchanged files reads no symbol (a torch library's are megabytes).
        # And within one run, under the files' identities: every root that imports torch
        # replays torch's own dlopens on a fork, and a simulation replays them again.
        memo = tuple(
            (o.file_id, o.opaque, frozenset(o.names)) for o in (*checked, None, *scope) if o
        )
        memo_key = (len(checked), partial, memo)
        found = self.view.verdicts.get(memo_key)
        if found is None:
            found = self.view.remember(
                "binding",
                self._binding_key(checked, scope, partial),
                lambda: self._bind(checked, scope, partial),
                load=json.loads,
                dump=json.dumps,
            )
            self.view.verdicts[memo_key] = found
        for index, name, version, file, missing in found:
            obj = checked[index]
            said = lacking.get(id(obj), set())
            # A symbol of a version already said missing is that failure again.
            missing = [m for m in missing if m.partition("@")[2] not in said]
            if not missing:
                continue
            if version in said:
                name, _, version = missing[0].partition("@")
                version, file = version or None, None
            at = mapped_by[id(obj)]
            if file:
                at = edges.get((id(obj), file), at)
            message = binding.symbol_message(obj.path, name, version)
            self._fail(resolutions, at, message, tuple(missing))

    def _binding_key(self, checked: list[Loaded], scope: list[Loaded], partial: bool) -> str | None:
        lines: list[str] = ["partial" if partial else "whole"]
        for o in (*checked, None, *scope):
            if o is None:
                lines.append("")
                continue
            state = self.view.state(o.path)
            if state is None:
                return None
            lines.append(f"{state} {int(o.opaque)} {' '.join(sorted(o.names))}")
        return "\n".join(lines)

    def _bind(self, checked: list[Loaded], scope: list[Loaded], partial: bool) -> list[Any]:
        """Each object of `checked` with a symbol nothing in `scope` defines, as [its index,
        the first such symbol, its version, the version's file, every symbol missing]."""
        tables = [self.view.exports(o.path) for o in scope]
        known = [t for t in tables if t is not None]
        if len(known) < len(tables):
            return []  # an object whose symbols cannot be read could define any of them
        # Each object's references parsed once (Symbols.references), for all three uses.
        read = [self.view.symbols(obj.path) for obj in checked]
        refs = [s.references() if s is not None and s.undefined else () for s in read]
        if not any(refs):
            return []
        unbound = binding.unbound_keys((r for rs in refs for r in rs), known)
        if not unbound:
            return []
        opaque = any(o.opaque for o in scope)
        readable: set[str] = set()
        for o in scope:
            readable |= o.names | {o.info.soname or ""}
        out: list[Any] = []
        for index, references in enumerate(refs):
            missing = binding.unbound(
                references, unbound, opaque=opaque, readable=readable, unmapped=partial
            )
            if missing:
                name, version = missing[0]
                file = next((f for n, v, f in references if n == name and v == version), None)
                shown = [f"{n}@{v}" if v else n for n, v in missing]
                out.append([index, name, version, file, shown])
        return out

    @staticmethod
    def _fail(
        resolutions: list[Resolution], at: int, message: str, missing: tuple[str, ...]
    ) -> None:
        was = resolutions[at]
        if was.missing:  # a second failure on the same need: its message stays the first
            extra = tuple(m for m in missing if m not in was.missing)
            resolutions[at] = replace(was, missing=was.missing + extra)
            return
        resolutions[at] = replace(was, status=Status.ERROR, detail=message, missing=missing)

    # -- one name ------------------------------------------------------------------------

    def _already(self, name: str) -> Loaded | None:
        return next((obj for obj in self.objects if obj.answers_to(name)), None)

    def _resolve(
        self,
        name: str,
        loader: Loaded,
        root: str,
        evidence: Evidence = Evidence.DT_NEEDED,
        needed_by: str | None = None,
    ) -> tuple[Resolution, Loaded | None, bool]:
        """Resolve one name for `loader`: the resolution, the object, and whether it is new."""

        def made(status: Status, **fields: Any) -> Resolution:
            return Resolution(
                name=name,
                needed_by=needed_by or loader.path,
                root=root,
                status=status,
                evidence=evidence,
                **fields,
            )

        if self.is_driver(name):
            # The driver's libraries come with the host's NVIDIA driver, never from a wheel:
            # the environment cannot break them, so they are listed and never resolved.
            return made(Status.SYSTEM, detail="provided by the system driver"), None, False
        hit = self._already(name)
        if hit is not None:
            if hit.evidence is not Evidence.PRELOAD:
                reuse = made(
                    Status.RESOLVED, how=How.ALREADY_LOADED, path=hit.path, reused=hit.path
                )
                return reuse, hit, False
            # A preloaded library answers by name where no search might find it (the
            # libcusparse -> libnvJitLink case): say what the search alone would do.
            detail, alone = self._without_preload(name, loader, hit)
            reuse = made(
                Status.RESOLVED,
                how=How.ALREADY_LOADED,
                path=hit.path,
                reused=hit.path,
                detail=detail,
                attempts=alone,
            )
            return reuse, hit, False
        attempts: list[Attempt] = []
        try:
            found = self._search(name, loader, attempts)
        except _Fatal as fatal:
            failed = fatal.attempt
            error = made(
                Status.ERROR,
                path=failed.path,
                detail=f"{failed.path}: {failed.detail}",
                attempts=tuple(attempts),
            )
            return error, None, False
        if found is None:
            skipped = [
                a for a in attempts if a.outcome in (Outcome.WRONG_CLASS, Outcome.WRONG_MACHINE)
            ]
            detail = (
                f"{skipped[-1].outcome.value}: {skipped[-1].path}" if skipped else "no file found"
            )
            return made(Status.NOT_FOUND, detail=detail, attempts=tuple(attempts)), None, False
        attempt, probe = found
        assert probe.info is not None
        obj = self._same_file(probe)
        if obj is not None:
            # elf/dl-load.c _dl_map_object_from_fd: "Look again to see if the real name
            # matched another already loaded" (same st_dev/st_ino): reused, name added.
            if name not in obj.names:
                obj.names.add(name)
                self._named.append((obj, name))
            new = False
        else:
            obj = Loaded(
                path=attempt.path,
                info=probe.info,
                file_id=probe.file_id,
                loader=loader,
                names={name, attempt.path},
                origin=_origin_of(attempt.path, self.cwd),
                evidence=evidence,
            )
            self.objects.append(obj)
            new = True
        resolved = made(
            Status.RESOLVED,
            how=attempt.how,
            source=attempt.source,
            path=attempt.path,
            reused=None if new else obj.path,
            detail=None if new else f"same file as {obj.path}",
            attempts=tuple(attempts),
        )
        return resolved, obj, new

    def _without_preload(
        self, name: str, loader: Loaded, hit: Loaded
    ) -> tuple[str, tuple[Attempt, ...]]:
        """What the search alone would do for `name`, which the preloaded `hit` answers:
        said in words, and its attempts."""
        alone: list[Attempt] = []
        try:
            found = self._search(name, loader, alone)
        except _Fatal:
            found = None
        if found is None:
            detail = "no search would find it without the preload"
        elif found[1].file_id == hit.file_id:
            detail = "the search alone finds the same file"
        else:
            detail = f"the search alone finds another file: {found[0].path}"
        return detail, tuple(alone)

    def _same_file(self, probe: Probe) -> Loaded | None:
        if probe.file_id is None:
            return None
        return next((o for o in self.objects if o.file_id == probe.file_id), None)

    def _search(
        self, name: str, loader: Loaded, attempts: list[Attempt]
    ) -> tuple[Attempt, Probe] | None:
        if "/" in name:
            path = self._expand_one(name, loader)
            return self._try(path, How.PATH, None, None, attempts, by_path=True)
        if loader.info.runpath is None:
            passed_main = False
            chain: Loaded | None = loader
            while chain is not None:
                if chain.rpath:
                    hit = self._try_dirs(name, chain.rpath, chain, How.RPATH, attempts)
                    if hit:
                        return hit
                    passed_main |= chain is self.main
                chain = chain.loader
            if not passed_main and self.main.rpath:
                hit = self._try_dirs(name, self.main.rpath, self.main, How.RPATH, attempts)
                if hit:
                    return hit
        if self.ld_library_path:
            hit = self._try_dirs(
                name, self.ld_library_path, self.main, How.LD_LIBRARY_PATH, attempts, sep=":;"
            )
            if hit:
                return hit
        if loader.info.runpath:
            hit = self._try_dirs(name, loader.info.runpath, loader, How.RUNPATH, attempts)
            if hit:
                return hit
        nodeflib = bool(loader.info.flags_1 & DF_1_NODEFLIB)
        cached = self.system.cache.lookup(name, self.system.cache_flags)
        if cached is not None:
            if nodeflib and cached.startswith(self._system_prefixes):
                attempts.append(
                    Attempt(how=How.LD_SO_CACHE, path=cached, outcome=Outcome.SKIPPED_NODEFLIB)
                )
            else:
                hit = self._try(cached, How.LD_SO_CACHE, None, None, attempts)
                if hit:
                    return hit
        if nodeflib:
            attempts.append(
                Attempt(
                    how=How.DEFAULT,
                    path=":".join(self.system.default_dirs),
                    outcome=Outcome.SKIPPED_NODEFLIB,
                    source=loader.path,
                )
            )
            return None
        for folder in self.system.default_dirs:
            hit = self._try_folder(name, folder, How.DEFAULT, None, attempts)
            if hit:
                return hit
        return None

    def _expand_one(self, text: str, owner: Loaded) -> str:
        def substitute(match: re.Match[str]) -> str:
            token = match.group(1) or match.group(2)
            if token == "ORIGIN":
                return owner.origin
            return self.system.lib if token == "LIB" else self.system.platform

        return _DST.sub(substitute, text)

    def _folders(self, spec: str, owner: Loaded, sep: str) -> list[str]:
        # elf/dl-load.c fillin_rpath: split, expand DSTs, drop trailing slashes, drop
        # duplicates within one list; an empty element is the working folder.
        out: list[str] = []
        for element in re.split(f"[{re.escape(sep)}]", spec):
            folder = self._expand_one(element, owner) if element else self.cwd
            if not folder:
                continue
            if len(folder) > 1:
                folder = folder.rstrip("/") or "/"
            if folder not in out:
                out.append(folder)
        return out

    def _try_dirs(
        self,
        name: str,
        spec: str,
        owner: Loaded,
        how: How,
        attempts: list[Attempt],
        sep: str = ":",
    ) -> tuple[Attempt, Probe] | None:
        source = owner.path if how in (How.RPATH, How.RUNPATH) else None
        for folder in self._folders(spec, owner, sep):
            hit = self._try_folder(name, folder, how, source, attempts)
            if hit:
                return hit
        return None

    def _try_folder(
        self, name: str, folder: str, how: How, source: str | None, attempts: list[Attempt]
    ) -> tuple[Attempt, Probe] | None:
        hwcaps = self._hwcaps.get(folder)
        if hwcaps is None:
            # Asked once per folder: hwcap folders are almost never there, and every root
            # asks of the same search folders (this dict is shared with every fork).
            hwcaps = tuple(
                path
                for sub in self.system.subdirs
                if self.view.is_folder(path := os.path.join(folder, sub))
            )
            self._hwcaps[folder] = hwcaps
        for subfolder in hwcaps:
            candidate = os.path.join(subfolder, name)
            if self.view.probe(candidate).seen is Seen.MISSING:
                continue  # not worth a line in `why`
            hit = self._try(candidate, how, source, folder, attempts)
            if hit:
                return hit
        return self._try(os.path.join(folder, name), how, source, folder, attempts)

    def _try(
        self,
        path: str,
        how: How,
        source: str | None,
        folder: str | None,
        attempts: list[Attempt],
        *,
        by_path: bool = False,
    ) -> tuple[Attempt, Probe] | None:
        probe = self.view.probe(path)
        outcome, detail = self._verdict(probe)
        attempt = Attempt(
            how=how, source=source, directory=folder, path=path, outcome=outcome, detail=detail
        )
        attempts.append(attempt)
        if outcome is Outcome.FOUND:
            return attempt, probe
        if outcome is Outcome.INVALID or (by_path and outcome is not Outcome.ABSENT):
            raise _Fatal(attempt)
        return None

    def _verdict(self, probe: Probe) -> tuple[Outcome, str | None]:
        if probe.seen is Seen.MISSING:
            return Outcome.ABSENT, None
        if probe.seen is Seen.DENIED:
            return Outcome.ABSENT, probe.reason
        if probe.seen is Seen.BAD or probe.info is None:
            return Outcome.INVALID, probe.reason
        info, host = probe.info, self.main.info
        # open_verify: another class is passed over quietly (found_other_class); another
        # byte order or an unloadable type is an error; another machine is passed over.
        if info.elf_class != host.elf_class:
            return Outcome.WRONG_CLASS, f"ELFCLASS{info.elf_class}"
        if info.data != host.data:
            return Outcome.INVALID, "ELF file data encoding does not match"
        if info.machine != host.machine:
            return Outcome.WRONG_MACHINE, f"e_machine {info.machine}"
        if info.elf_type not in _LOADABLE_TYPES:
            return Outcome.INVALID, "only ET_DYN and ET_EXEC can be loaded"
        return Outcome.FOUND, None
