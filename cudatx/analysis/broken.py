"""What is already broken in an environment, one finding per root cause.

These are doctor's errors, and what a plan counts apart as broken before the change (the
same findings, so the same count). A root cause gathers its consequences: a CUDA 13 cuDNN
installed over the CUDA 12 one is one finding, with torch loading the other build and the
run-time loads that then fail listed under it; a distribution left hollow is one finding,
with every import and preload that misses its files.

Only decisive evidence counts (cudatx.models.Evidence.decisive): a soname-shaped string
in .rodata that names nothing here is an optional load, listed by doctor as a note.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from cudatx.analysis import cuda, frameworks, observed, optional, ownership
from cudatx.analysis.commands import cudatx_command, owner_commands, reinstall_command
from cudatx.analysis.problems import (
    Problem,
    Severity,
    short,
)
from cudatx.analysis.requirements import unmet
from cudatx.discover.dists import parse_requirement
from cudatx.environment import Environment
from cudatx.loader import binding
from cudatx.models import Distribution, Evidence, How, Resolution, Status, SystemPackage
from cudatx.names import canonical_name

_FAILED = (Status.NOT_FOUND, Status.ERROR)


def _clip(text: str, most: int = 160) -> str:
    """A long search path cut for a sentence (TF 2.21's RUNPATH is 11,000 characters of
    repeated folders): its folders once each, in order."""
    folders = ":".join(dict.fromkeys(text.split(":")))
    return folders if len(folders) <= most else folders[: most - 3] + "..."


@dataclass
class _Cause:
    """One root cause as it is gathered: its finding's fields, its consequences."""

    code: str
    what: str
    why: str
    fix: str | None = None
    paths: dict[str, None] = field(default_factory=dict)
    distributions: tuple[str, ...] = ()
    consequences: dict[str, None] = field(default_factory=dict)
    removes: tuple[str, ...] = ()
    reinstalls: tuple[str, ...] = ()
    # of another CUDA major, by the package whose build they were installed over (`loader`:
    # torch)
    loaded: dict[str, None] = field(default_factory=dict)
    loader: str = ""
    system_packages: tuple[SystemPackage, ...] = ()

    def problem(self) -> Problem:
        first: tuple[str, ...] = ()
        if self.loaded:
            names = list(self.loaded)
            more = f" and {len(names) - 3} more" if len(names) > 3 else ""
            first = (
                f"{self.loader} loads {len(names)} of its libraries: {', '.join(names[:3])}{more}",
            )
        return Problem(
            severity=Severity.ERROR,
            code=self.code,
            what=self.what,
            why=self.why,
            fix=self.fix,
            paths=tuple(self.paths),
            distributions=self.distributions,
            consequences=(*first, *self.consequences),
            removes=self.removes,
            reinstalls=self.reinstalls,
            system_packages=self.system_packages,
        )


def built_major(env: Environment) -> int | None:
    """The CUDA major of the build the environment is judged against (torch's: cuda.build)."""
    built = cuda.build(env)
    version = built.cuda if built else None
    head = version.split(".")[0] if version else ""
    return int(head) if head.isdigit() else None


class _Causes:
    def __init__(self, env: Environment) -> None:
        self.env = env
        built = cuda.build(env)
        # the package whose build the others are judged against, as shown ("torch"), and
        # the CUDA version it says
        self.loader, self.cuda = (built.name, built.cuda) if built else ("", None)
        self.major = built_major(env)
        self.found: dict[tuple[str, ...], _Cause] = {}
        self._hollow: dict[str, ownership.Hollow | None] = {}
        self._contaminated: dict[str, tuple[Distribution, ...] | None] = {}
        # distribution -> the cause it contaminates (a build of another major installed over
        # torch's): its other files and its requirements belong to that cause too
        self.contaminating: dict[str, _Cause] = {}
        self._unmet: dict[tuple[str, str], str] | None = None

    def unmet(self) -> dict[tuple[str, str], str]:
        """cudatx.analysis.requirements.unmet, worked out once for every cause that asks."""
        if self._unmet is None:
            self._unmet = unmet(self.env)
        return self._unmet

    # -- what a cause is -----------------------------------------------------------------

    def hollow(self, name: str) -> ownership.Hollow | None:
        if name not in self._hollow:
            found = ownership.hollow(self.env, (name,))
            self._hollow[name] = found[0] if found else None
        return self._hollow[name]

    def hollow_cause(self, found: ownership.Hollow, dist: Distribution) -> _Cause:
        """The finding of a hollow distribution, one per distribution: every load that
        misses its files, and every module or library it lost, is a consequence of it."""
        cause = self.cause(
            ("hollow", found.name),
            _Cause(
                code="hollow",
                what=f"{found.name} {found.version} is installed but hollow: " + damage(found),
                why="files its RECORD lists are gone or hold other bytes (uninstalling a "
                "distribution that listed the same paths deletes them)",
                fix=reinstall_command(self.env, dist),
                paths=dict.fromkeys(found.examples),
                distributions=(found.name,),
                reinstalls=(found.name,),
            ),
        )
        return cause

    def lost_files(self) -> None:
        """Distributions that lost a module or a library: broken, whatever loads it now (a
        package that lost its files is broken; its twin's bytes in its place are not, until
        a load goes wrong because of them)."""
        for name in ownership.losing_code(self.env):
            found = self.hollow(name)
            dist = self.env.distribution(name)
            if found is None or not found.lost or dist is None or name in self.contaminating:
                continue
            cause = self.hollow_cause(found, dist)
            more = f" and {len(found.lost) - 3} more" if len(found.lost) > 3 else ""
            cause.consequences.setdefault(
                f"it lost {', '.join(found.lost[:3])}{more}, which Python imports or the "
                "loader maps"
            )

    def contamination(self, path: str) -> tuple[Distribution, ...] | None:
        """For a co-owned file whose bytes are those of a build of another CUDA major than
        torch's, installed over an owner of torch's major: the distributions whose bytes
        they are. A file only such distributions list is theirs too."""
        key = self.env.keys(path)
        found = self._contaminating_at(path)
        if found is None and self.contaminating:
            owners = self.env.owners_of(key)
            if owners and all(d.name in self.contaminating for d in owners):
                return owners
        return found

    def _contaminating_at(self, path: str) -> tuple[Distribution, ...] | None:
        """contamination() of a co-owned file alone."""
        key = self.env.keys(path)
        if key not in self._contaminated:
            self._contaminated[key] = self._contaminating(key)
        return self._contaminated[key]

    def _contaminating(self, key: str) -> tuple[Distribution, ...] | None:
        if self.major is None:
            return None
        owners = self.env.owners_of(key)
        if len(owners) < 2:
            return None
        names = set(ownership.byte_owners(self.env, key))
        on_disk = tuple(d for d in owners if d.name in names)
        majors = {d.name: _major(self.env, d) for d in owners}
        if not on_disk or any(majors[d.name] in (None, self.major) for d in on_disk):
            return None
        if not any(majors[d.name] == self.major for d in owners if d.name not in names):
            return None  # no owner of the package's build that a repair could reinstall
        return on_disk

    def cause(self, key: tuple[str, ...], make: _Cause) -> _Cause:
        return self.found.setdefault(key, make)

    def contaminated(self, dists: tuple[Distribution, ...], path: str) -> _Cause:
        names = tuple(d.name for d in dists)
        key = self.env.keys(path)
        others = [d for d in self.env.owners_of(key) if d.name not in names]
        folder = os.path.dirname(short(self.env, key))
        over = ", ".join(f"{d.name} {d.version}" for d in others)
        built = ", ".join(f"{d.name} {d.version}" for d in dists)
        why = (
            f"they list the same paths in {folder}, and the bytes on disk are "
            f"{', '.join(names)}'s; removing {', '.join(names)} alone would delete them "
            f"and leave {', '.join(d.name for d in others)} hollow"
        )
        fix: str | None = cudatx_command(self.env, "remove", *names, "--repair")
        removes = names
        foreign = foreign_owned(self.env, (*dists, *others))
        if foreign:
            # uv can neither remove nor reinstall what conda installed: conda must act.
            why += f"; {foreign}"
            fix, removes = None, ()
        else:
            why += ": --repair reinstalls it"
        cause = self.cause(
            ("mixed", *names),
            _Cause(
                code="mixed-cuda-major",
                what=f"{built} was installed over {over}: {self.loader} (CUDA "
                f"{self.cuda}) loads its CUDA {_major(self.env, dists[0])} build",
                why=why,
                fix=fix,
                distributions=(*names, *(d.name for d in others)),
                removes=removes,
                loader=self.loader,
            ),
        )
        cause.paths.setdefault(key)
        for name in names:
            self.contaminating.setdefault(name, cause)
        return cause

    def missing(self, resolution: Resolution) -> _Cause:
        """The cause of a need that fails: a hollow owner, or nothing providing it."""
        leaf = os.path.basename(resolution.cause or resolution.name)
        for owner in self.env.owners.listing(leaf):
            found = self.hollow(owner)
            dist = self.env.distribution(owner)
            if found is None or dist is None:
                continue
            return self.hollow_cause(found, dist)
        # Installed, whole, and still not found: the search that asks for it passes it by
        # (plainuser's cuSPARSE, without torch's preloads, does not reach nvJitLink; an
        # onnxruntime in another sys.path entry than the NVIDIA wheels, whose preload_dlls
        # looks only beside itself). Saying "nothing lists it" would send the user to
        # install what is there.
        listed = self.env.owners.listing(leaf)
        there = [
            p for p in self.env.libraries.get(leaf, ()) if self.env.owners.get(self.env.keys(p))
        ]
        if listed and there:
            return self.cause(
                ("missing", leaf),
                _Cause(
                    code="missing-library",
                    what=f"{leaf} is not found where it is looked for",
                    why=f"{', '.join(listed)} install{'s' * (len(listed) == 1)} it at "
                    f"{short(self.env, there[0])}, but no search that asks for it reaches "
                    "that folder" + self.searched(resolution, there[0]),
                ),
            )
        return self.cause(
            ("missing", leaf),
            _Cause(
                code="missing-library",
                what=f"{leaf} is provided by nothing here",
                why="no distribution installed here lists a file of that name, and no search "
                "finds one",
            ),
        )

    def searched(self, resolution: Resolution, there: str) -> str:
        """For a library opened by bare name at run time, whose search applies and what
        makes it reach the folder: a bare-name dlopen searches the calling object's
        DT_RPATH or DT_RUNPATH, then LD_LIBRARY_PATH, the cache and the default folders
        (glibc elf/dl-load.c, _dl_map_object with the caller's link map)."""
        if resolution.evidence is not Evidence.DLOPEN or not resolution.needed_by:
            return ""
        info = self.env.view.probe(resolution.needed_by).info
        if info is None:
            return ""
        path = info.runpath or info.rpath
        tag = "DT_RUNPATH" if info.runpath else "DT_RPATH"
        own = f"its {tag} ({_clip(path)})" if path else "no DT_RUNPATH of its own"
        return (
            f" ({short(self.env, resolution.needed_by)} opens it by bare name, searching {own}, "
            "LD_LIBRARY_PATH and the system's folders; with "
            f"{os.path.dirname(there)} on LD_LIBRARY_PATH it loads)"
        )

    def lacking(self, resolution: Resolution, loaded: tuple[str, ...]) -> _Cause:
        """The cause of a need whose file is found but lacks a version or a symbol; `loaded`:
        what the load that fails mapped."""
        env, detail = self.env, resolution.detail or ""
        named, rest = binding.split_message(detail)
        missing = ", ".join(resolution.missing)
        versions = all(m.startswith("`") for m in resolution.missing)
        lib = resolution.path or resolution.name
        who = _owned(env, named or lib)
        if versions:
            needer = resolution.needed_by
            what = f"{short(env, lib)}{who} lacks version {missing}, needed by " + short(
                env, needer
            )
            why = (
                f"{short(env, needer)}{_owned(env, needer)} was built against a build of "
                f"{os.path.basename(lib)} that defines it"
            )
        else:
            needer = named or resolution.needed_by
            what = f"{short(env, needer)}{_owned(env, needer)} needs {missing}, which " + (
                f"{short(env, lib)}{_owned(env, lib)} does not define"
                if env.keys(lib) != env.keys(needer)
                else "nothing it loads defines"
            )
            why = (
                f"it was built against other builds of what it loads ({rest}); install the "
                "release of it built for the libraries installed here, or theirs for it"
            )
        fix = None
        inside = self._own_copy(resolution, needer)
        if inside is not None and resolution.how is How.LD_LIBRARY_PATH:
            folder = os.path.dirname(lib)
            why = (
                f"LD_LIBRARY_PATH makes {os.path.basename(lib)} resolve to {lib}"
                + ("" if env.owners_of(lib) else ", outside the environment")
                + f", which lacks {missing}; the environment's own copy "
                f"{short(env, inside)}{_owned(env, inside)} has it: take {folder} out of "
                "LD_LIBRARY_PATH"
            )
        elif inside is not None:
            # Which distribution here has it, where the loader does not look first.
            why += f"; {short(env, inside)}{_owned(env, inside)} has it"
        removes: tuple[str, ...] = ()
        swapped = self._swapped(loaded) if not versions and fix is None else ()
        if swapped:
            # Builds of another CUDA major installed over torch's are among what it maps
            # (NCCL 2.27 for CUDA 12 lacks the ncclComm* that torch 2.14.1 uses): the builds
            # they replaced may define it, and their cure is this one's.
            names = tuple(dict.fromkeys(d.name for d in swapped))
            why = (
                f"it maps builds of another CUDA major installed over {self.loader}'s "
                f"({', '.join(names)}) ({rest}): the builds they replaced may define it"
            )
            fix = cudatx_command(env, "remove", *names, "--repair")
            removes = names
        pinned = self._pinned_for(needer, lib, loaded)
        if pinned is not None:
            # The needer's own Requires-Dist names the release it was built for (torchvision
            # 0.28.0: torch==2.13.0): that release provides it, and the requirement's fix is
            # this one's (incidents #30, #31, #33).
            dist, text, unmet_why = pinned
            why += f"; {dist.name} {dist.version} requires {text}, which {unmet_why}"
            fix = _requirement_fix(env, text)
        system = ownership.system_package(env, lib)
        if system is not None:
            # The file that would have to change is the system's (incidents #37-#40).
            why += (
                f"; {short(env, lib)} is {system}'s, and cudatx never changes system "
                f"packages: a {system.name} that has it comes from the system's package "
                "manager"
                + ("" if inside is not None else ", or a copy in the environment found first")
            )
        return self.cause(
            ("lacking", env.keys(named or lib), missing),
            _Cause(
                code="missing-version" if versions else "missing-symbol",
                what=what,
                why=why,
                fix=fix,
                removes=removes,
                paths=dict.fromkeys(p for p in (lib, inside) if p),
                distributions=tuple(d.name for d in env.owners_of(needer)),
                system_packages=(system,) if system is not None else (),
            ),
        )

    def _swapped(self, loaded: Iterable[str]) -> tuple[Distribution, ...]:
        """The distributions whose builds of another CUDA major, installed over torch's,
        own files among `loaded` (contamination())."""
        out: list[Distribution] = []
        for path in loaded:
            out += self.contamination(path) or ()
        return tuple(out)

    def _pinned_for(
        self, needer: str, lib: str, loaded: Iterable[str]
    ) -> tuple[Distribution, str, str] | None:
        """(distribution, requirement, why unmet) of a distribution owning `needer` whose
        unmet Requires-Dist names a distribution owning `lib` or, for a symbol no version
        ties to a file, any object the failing load mapped (`loaded`): it was built for
        another release of it."""
        files = [lib, *loaded] if lib == needer else [lib]
        providers = {d.name for f in files for d in self.env.owners_of(f)}
        needers = {d.name: d for d in self.env.owners_of(needer)}
        if not providers or not needers:
            return None
        for (name, text), why in self.unmet().items():
            if name not in needers:
                continue
            try:
                wanted = canonical_name(parse_requirement(text).name)
            except ValueError:  # packaging's InvalidRequirement
                continue
            if wanted in providers:
                return needers[name], text, why
        return None

    def _own_copy(self, resolution: Resolution, needer: str | None = None) -> str | None:
        """A file of the same name in the environment that has what the one found lacks;
        where the failing object is `needer` itself (a symbol: glibc names no file that
        should define it), a copy of a library it needs that has it."""
        env, found = self.env, resolution.path
        names = [os.path.basename(found or resolution.name)]
        loaded: set[str] = {env.keys(found)} if found else set()
        if needer is not None and found is not None and env.keys(found) == env.keys(needer):
            info = env.view.probe(needer).info
            names = list(info.needed) if info is not None else []
            loaded = {
                env.keys(r.path) for r in env.resolutions() if r.path and r.root == resolution.root
            }
        for name in names:
            for path in env.libraries.get(name, ()):
                if env.keys(path) in loaded:
                    continue
                info = env.view.probe(path).info
                if info is None:
                    continue
                if binding.provides(info, env.view.exports(path), resolution.missing):
                    return path
        return None

    # -- what fails ----------------------------------------------------------------------

    def mixed(self, found: tuple[cuda.Mixed, ...]) -> None:
        plain: dict[tuple[tuple[str, ...], int], list[cuda.Mixed]] = {}
        later = []
        for m in found:  # co-owned files first: they say which builds were installed over
            dists = self._contaminating_at(m.path)
            if dists is not None:
                self.contaminated(dists, m.path).loaded.setdefault(os.path.basename(m.path))
            else:
                later.append(m)
        for m in later:
            dists = self.contamination(m.path)
            if dists is not None:
                self.contaminating[dists[0].name].loaded.setdefault(os.path.basename(m.path))
                self.contaminating[dists[0].name].paths.setdefault(self.env.keys(m.path))
                continue
            owners = tuple(d.name for d in self.env.owners_of(m.path))
            plain.setdefault((owners, m.major), []).append(m)
        for (owners, major), group in plain.items():
            names = sorted({os.path.basename(m.soname) for m in group})
            more = f" and {len(names) - 1} more" if len(names) > 1 else ""
            cause = self.cause(
                ("mixed", *owners, str(major)),
                _Cause(
                    code="mixed-cuda-major",
                    what=f"{group[0].package} (CUDA {group[0].torch_cuda}) resolves "
                    f"{names[0]}{more} to a CUDA {major} build",
                    why=f"{group[0].reason}; listed by {', '.join(owners) or 'no distribution'}",
                    distributions=owners,
                ),
            )
            for m in group:
                cause.paths.setdefault(self.env.keys(m.path))
                cause.consequences.setdefault(
                    f"{short(self.env, m.needed_by)} needs {m.soname}: "
                    f"{short(self.env, m.path)} is a CUDA {major} build"
                )

    def loads(self) -> None:
        seen: set[tuple[str, str, str]] = set()
        for load in (self.env.base, *self.env.loads, *self.env.observed):
            imported = False
            if optional.not_imported(self.env, load):
                continue  # a module no import loads: a feature not had (a doctor note)
            run = frameworks.run_of(self.env, load)
            traced = observed.run_of(self.env, load)
            companion = self.env.companion_of(load.root)
            if run is not None:
                importing = f"{run.label} would fail to load {load.context}"
            elif companion is not None:  # loaded by its importer's import (optional.py)
                importer = os.path.basename(companion.importer)
                importing = (
                    f"importing {importer} would fail ({short(self.env, load.root)}, "
                    f"which {importer} imports)"
                )
            else:
                importing = f"importing {short(self.env, load.root)} would fail"
            for r in load.resolutions:
                if r.status not in _FAILED or not r.evidence.decisive:
                    continue
                key = (r.name, self.env.keys(r.needed_by), r.evidence.value)
                if traced is not None:
                    # A traced run is no import: each load it made that fails now is said.
                    if key in seen:
                        continue
                    line = (
                        f"{traced.record.label} loaded {r.name} ({r.evidence.value}, by "
                        f"{short(self.env, r.needed_by)}), which now fails: "
                        + (r.detail or r.status.value)
                    )
                elif r.evidence in (Evidence.IMPORT, Evidence.DT_NEEDED):
                    # Every failing need of the import, not only the one glibc would name
                    # first: each has its cause, and one round of fixes must cure them all.
                    imported = True
                    line = f"{importing}: " + (
                        r.detail if r.missing and r.detail else f"{r.name} {r.status.value}"
                    )
                elif key in seen:
                    continue
                elif r.evidence is Evidence.PRELOAD:
                    line = f"{short(self.env, r.needed_by)} preloads {r.name}: {r.detail}"
                else:
                    line = f"{short(self.env, r.needed_by)} loads {r.name} at run time: {r.detail}"
                seen.add(key)
                dists = self.contamination(r.needed_by)
                if r.missing and not dists:
                    self.lacking(r, load.loaded).consequences.setdefault(line)
                    continue
                if dists and dists[0].name in self.contaminating:
                    cause = self.contaminating[dists[0].name]
                elif dists:
                    cause = self.contaminated(dists, r.needed_by)
                else:
                    cause = self.missing(r)
                cause.consequences.setdefault(line)
            if not load.ok and not imported and load.root != self.env.base.root:
                # Failed through the package's own preloads (torch's except path).
                failing = next(
                    (r for r in load.resolutions if r.status in _FAILED and r.evidence.decisive),
                    None,
                )
                if failing is not None:
                    self.missing(failing).consequences.setdefault(
                        f"{importing}: {failing.name} {failing.status.value}"
                    )

    def requirements(self) -> None:
        for (name, text), why in self.unmet().items():
            dist = self.env.distribution(name)
            version = f" {dist.version}" if dist else ""
            if name in self.contaminating:  # removing it, as its cause's fix does, ends it
                line = f"{name}{version} requires {text}, which {why}"
                self.contaminating[name].consequences.setdefault(line)
                continue
            self.cause(
                ("requirement", name, text),
                _Cause(
                    code="unmet-requirement",
                    what=f"{name}{version} requires {text}, which {why}",
                    why="pip check reports the same; an install or removal that leaves it "
                    "unmet breaks what that distribution expects",
                    fix=_requirement_fix(self.env, text),
                    distributions=(name,),
                ),
            )


def foreign_owned(env: Environment, dists: Iterable[Distribution]) -> str:
    """For the packages among `dists` of an owner cudatx does not change (conda's), a clause
    saying cudatx leaves them to it and the command that restores their own files; "" when
    there are none."""
    records = {}
    for dist in dists:
        record = ownership.foreign_record(env, dist)
        if record is not None:
            records[record.name] = record
    return "; ".join(
        f"cudatx never changes {owner.name}'s packages ({', '.join(r.name for r in listed)}): "
        f"{owner.name} restores their own files with {command}"
        for owner, listed, command in owner_commands(env, "install", records.values(), exact=True)
    )


def damage(found: ownership.Hollow) -> str:
    """ "3 of its 14 files are missing and 1 has other bytes"."""
    said = []
    if found.missing:
        verb = "is" if found.missing == 1 else "are"
        said.append(f"{found.missing} of its {found.total} files {verb} missing")
    if found.wrong:
        verb = "has" if found.wrong == 1 else "have"
        said.append(
            f"{found.wrong}{'' if said else f' of its {found.total} files'} {verb} other bytes"
        )
    return " and ".join(said)


def _owned(env: Environment, path: str) -> str:
    """ " (name version)" of the distributions whose RECORD lists `path`, " (Debian package
    name version)" for a file outside the environment a system package installed, or ""."""
    owners = env.owners_of(path)
    if owners:
        return f" ({', '.join(f'{d.name} {d.version}' for d in owners)})"
    system = ownership.system_package(env, path)
    return f" ({system})" if system is not None else ""


def _major(env: Environment, dist: Distribution) -> int | None:
    found = cuda.cuda_major_of_dist(env, dist)
    return found.major if found else None


def _requirement_fix(env: Environment, text: str) -> str | None:
    """`cudatx install NAME<specifier>`: checked before it is applied, like any install."""
    try:
        requirement = parse_requirement(text)
    except ValueError:  # packaging's InvalidRequirement
        return None
    spec = f"{requirement.name}{requirement.specifier}"
    return cudatx_command(env, "install", spec)


def already_broken(
    env: Environment, *, mixed: tuple[cuda.Mixed, ...] | None = None
) -> tuple[Problem, ...]:
    """Every root cause of something failing now (`mixed`: cuda.mixed_majors(env), where the
    caller has it already)."""
    causes = _Causes(env)
    causes.mixed(cuda.mixed_majors(env) if mixed is None else mixed)
    causes.loads()
    causes.lost_files()
    causes.requirements()
    found = tuple(c.problem() for c in causes.found.values())
    return (*found, *frameworks.mixed(env))


def iter_fixes(problems: tuple[Problem, ...]) -> Iterator[str]:
    """The fix of each finding, in order, once each."""
    seen: set[str] = set()
    for problem in problems:
        if problem.fix and problem.fix not in seen:
            seen.add(problem.fix)
            yield problem.fix
