"""`cudatx doctor`: what is already wrong in an environment, and the command that fixes it."""

from __future__ import annotations

import os
import shlex
from collections import defaultdict
from enum import StrEnum

from packaging.utils import canonicalize_name

from cudatx.analysis import cuda, ownership
from cudatx.discover.dists import applicable_requirements, reinstall_spec
from cudatx.environment import Environment
from cudatx.models import Distribution, Evidence, Frozen, Resolution, Status
from cudatx.paths import display_path

SCHEMA_VERSION = 1


class Severity(StrEnum):
    ERROR = "error"
    WARNING = "warning"


class Problem(Frozen):
    severity: Severity
    code: str  # stable identifier, documented in README.md
    what: str
    why: str
    fix: str | None = None  # a command the user can run
    paths: tuple[str, ...] = ()
    distributions: tuple[str, ...] = ()


class Unprovided(Frozen):
    """A name in some object's .rodata that nothing in the environment provides."""

    name: str
    named_by: tuple[str, ...]


class DoctorReport(Frozen):
    schema_version: int = SCHEMA_VERSION
    prefix: str
    python: str
    torch_cuda: str | None
    errors: int
    warnings: int
    problems: tuple[Problem, ...]
    system_provided: tuple[str, ...]  # driver libraries something loads
    unprovided: tuple[Unprovided, ...]  # optional run-time loads nothing here provides
    notes: tuple[str, ...]


def reinstall_command(env: Environment, dist: Distribution) -> str:
    """Restore a distribution's own bytes with the installer that put it there (a shell
    command: every word quoted, since a prefix or a direct URL may hold anything)."""
    spec = reinstall_spec(dist)
    prefix = env.target.prefix
    if (dist.installer or "").lower() == "uv":
        words = ["uv", "pip", "install", "--python", prefix, "--reinstall-package", dist.name]
        return shlex.join([*words, "--no-deps", spec])
    python = os.path.join(prefix, "bin", "python")
    return shlex.join([python, "-m", "pip", "install", "--force-reinstall", "--no-deps", spec])


def _short(env: Environment, path: str) -> str:
    """A path as users know it: folders resolved (no `torch/lib/../..`), relative to the site
    folder when inside one. The loader's spelling depends on which root mapped it first."""
    return display_path(env.keys(path), env.target.site_packages)


class _Doctor:
    def __init__(self, env: Environment) -> None:
        self.env = env
        self.problems: list[Problem] = []
        self.unprovided: dict[str, set[str]] = defaultdict(set)
        self.hollow = {h.name: h for h in ownership.hollow(env)}
        # The distributions whose RECORD lists a path, for a name the loader cannot find.
        self.listed: dict[str, list[str]] = defaultdict(list)
        for key, names in env.owners.items():
            self.listed[os.path.basename(key)].extend(names)

    def owner_fix(self, name: str) -> tuple[str | None, tuple[str, ...]]:
        """For a missing library: the hollow distribution that lists it, and its fix."""
        for owner in self.listed.get(os.path.basename(name), ()):
            dist = self.env.distribution(owner)
            if dist is not None and owner in self.hollow:
                return reinstall_command(self.env, dist), (owner,)
        return None, ()

    def roots(self) -> None:
        for load in self.env.loads:
            first = next(
                (
                    r
                    for r in load.resolutions
                    if r.evidence in (Evidence.IMPORT, Evidence.DT_NEEDED)
                    and r.status in (Status.NOT_FOUND, Status.ERROR)
                ),
                None,
            )
            if first is not None:
                what = (
                    f"importing {_short(self.env, load.root)} would fail: "
                    f"{first.name} {first.status.value}"
                )
                self._cannot_load("root-unloadable", what, first, (load.root,))

    def preloads(self) -> None:
        seen: set[tuple[str, str]] = set()
        for load in self.env.loads:
            for r in load.resolutions:
                if r.evidence is not Evidence.PRELOAD or r.status in (
                    Status.RESOLVED,
                    Status.SYSTEM,
                ):
                    continue
                if (r.name, r.needed_by) in seen:
                    continue
                seen.add((r.name, r.needed_by))
                what = (
                    f"{_short(self.env, r.needed_by)} preloads {_short(self.env, r.name)}, "
                    "which cannot load"
                )
                self._cannot_load("preload-unloadable", what, r, (r.name,))

    def _cannot_load(self, code: str, what: str, r: Resolution, paths: tuple[str, ...]) -> None:
        fix, dists = self.owner_fix(r.name)
        self.problems.append(
            Problem(
                severity=Severity.ERROR,
                code=code,
                what=what,
                why=self._why(r, dists),
                fix=fix,
                paths=paths,
                distributions=dists,
            )
        )

    def _why(self, r: Resolution, dists: tuple[str, ...]) -> str:
        text = f"needed by {_short(self.env, r.needed_by)} ({r.evidence.value}); {r.detail}"
        for name in dists:
            h = self.hollow[name]
            text += (
                f"; {name} {h.version} is still installed but hollow: {h.missing} of its "
                f"{h.total} files are missing and {h.wrong} have other bytes"
            )
        return text

    def hollow_dists(self) -> None:
        needed = self._needed_dists()
        for h in self.hollow.values():
            dist = self.env.distribution(h.name)
            if dist is None:
                continue
            severity = Severity.ERROR if h.name in needed else Severity.WARNING
            damage = []
            if h.missing:
                damage.append(f"{h.missing} of its {h.total} files are missing")
            if h.wrong:
                damage.append(f"{h.wrong} of its {h.total} files have other bytes")
            self.problems.append(
                Problem(
                    severity=severity,
                    code="hollow",
                    what=f"{h.name} {h.version} is installed but hollow: " + " and ".join(damage),
                    why=("needed by " + ", ".join(sorted(needed[h.name])))
                    if h.name in needed
                    else "nothing installed needs it",
                    fix=reinstall_command(self.env, dist),
                    paths=h.examples,
                    distributions=(h.name,),
                )
            )

    def _needed_dists(self) -> dict[str, set[str]]:
        """Hollow distributions something needs: by Requires-Dist, or by a library name."""
        needed: dict[str, set[str]] = defaultdict(set)
        for dist in self.env.distributions:
            for req in applicable_requirements(dist, self.env.target.markers):
                name = canonicalize_name(req.name)
                if name in self.hollow:
                    needed[name].add(dist.name)
        for load in self.env.loads:
            for r in load.resolutions:
                if r.status is Status.RESOLVED:
                    continue
                for owner in self.listed.get(os.path.basename(r.name), ()):
                    if owner in self.hollow:
                        needed[owner].add(_short(self.env, r.needed_by))
        return needed

    def mixed(self, torch_cuda: str | None) -> None:
        """One error per set of owners: cuDNN's ten libraries are one problem, not ten."""
        groups: dict[tuple[tuple[str, ...], int], list[cuda.Mixed]] = defaultdict(list)
        for m in cuda.mixed_majors(self.env):
            owners = tuple(d.name for d in self.env.owners_of(m.path))
            groups[(owners, m.major)].append(m)
        for (owners, major), group in groups.items():
            want = int(group[0].torch_cuda.split(".")[0])
            dists = [d for d in (self.env.distribution(n) for n in owners) if d is not None]
            keep = [d for d in dists if self._dist_major(d) == want]
            names = sorted({os.path.basename(m.soname) for m in group})
            more = f" and {len(names) - 1} more" if len(names) > 1 else ""
            files = sorted({_short(self.env, self.env.keys(m.path)) for m in group})
            needers = sorted({_short(self.env, m.needed_by) for m in group})
            self.problems.append(
                Problem(
                    severity=Severity.ERROR,
                    code="mixed-cuda-major",
                    what=f"torch (CUDA {torch_cuda}) resolves {names[0]}{more} "
                    f"to a CUDA {major} build",
                    why=f"{', '.join(files[:3])}{', ...' if len(files) > 3 else ''} "
                    f"({group[0].reason}) listed by {', '.join(owners) or 'no distribution'}; "
                    f"needed by {', '.join(needers[:3])}{', ...' if len(needers) > 3 else ''}",
                    fix=reinstall_command(self.env, keep[0]) if len(keep) == 1 else None,
                    paths=tuple(files),
                    distributions=owners,
                )
            )

    def _dist_major(self, dist: Distribution) -> int | None:
        classified = cuda.cuda_major_of_dist(self.env, dist)
        return classified.major if classified else None

    def co_owned(self, torch_cuda: str | None) -> None:
        groups: dict[tuple[tuple[str, str], ...], list[ownership.CoOwned]] = defaultdict(list)
        for c in ownership.co_owned(self.env):
            groups[c.owners].append(c)
        want = int(torch_cuda.split(".")[0]) if torch_cuda else None
        for owners, paths in groups.items():
            effective = sorted({c.effective_owner or "none" for c in paths})
            folders = sorted({os.path.dirname(_short(self.env, c.path)) for c in paths})
            names = " and ".join(f"{n} {v}" for n, v in owners)
            dists = [d for d in (self.env.distribution(n) for n, _ in owners) if d is not None]
            keep = [d for d in dists if want is not None and self._dist_major(d) == want]
            fix = None
            if len(keep) == 1:
                # Keep the build torch was made for: uninstalling the other deletes the
                # shared paths, and the reinstall puts the kept one's bytes back.
                others = [d.name for d in dists if d is not keep[0]]
                fix = f"{self._uninstall_command(others)} && {reinstall_command(self.env, keep[0])}"
            plural = "s" if len(paths) != 1 else ""
            self.problems.append(
                Problem(
                    severity=Severity.WARNING,
                    code="co-owned",
                    what=f"{len(paths)} path{plural} in {', '.join(folders)} "
                    f"{'are' if plural else 'is'} listed by {names}",
                    why="the bytes on disk are "
                    + ", ".join(effective)
                    + "'s; uninstalling either distribution deletes these paths and leaves "
                    "the other installed but hollow",
                    fix=fix,
                    paths=tuple(sorted(c.path for c in paths)),
                    distributions=tuple(n for n, _ in owners),
                )
            )

    def _uninstall_command(self, names: list[str]) -> str:
        return shlex.join(["uv", "pip", "uninstall", "--python", self.env.target.prefix, *names])

    def run_time(self) -> None:
        """Run-time loads no search finds.

        A .rodata string is weak evidence: libtorch_cpu.so names MKL, NCCL names
        InfiniBand, cupti names OpenCL, all optional. Such a name is a warning only where
        this environment lists a file of that name in some RECORD (it meant to provide it);
        names nothing here ever provided are collected in `unprovided`, not warned about.
        """
        seen: set[tuple[str, str]] = set()
        for load in self.env.loads:
            for r in load.resolutions:
                if r.evidence not in (Evidence.DLOPEN, Evidence.DLOPEN_STRING):
                    continue
                if r.status not in (Status.NOT_FOUND, Status.ERROR):
                    continue
                key = (r.name, self.env.keys(r.needed_by))
                if key in seen:
                    continue
                seen.add(key)
                string = r.evidence is Evidence.DLOPEN_STRING
                if string and os.path.basename(r.name) not in self.listed:
                    self.unprovided[r.name].add(_short(self.env, r.needed_by))
                    continue
                fix, dists = self.owner_fix(r.name)
                self.problems.append(
                    Problem(
                        severity=Severity.WARNING,
                        code="string-unresolved" if string else "dlopen-unresolved",
                        what=f"{_short(self.env, r.needed_by)} "
                        + ("names" if string else "loads at run time")
                        + f" {r.name}, which no search finds",
                        why=(
                            "a soname-shaped string in its .rodata"
                            if string
                            else "a known run-time load (cudatx/data/runtime.json)"
                        )
                        + f"; {r.detail}",
                        fix=fix,
                        paths=(r.needed_by,),
                        distributions=dists,
                    )
                )

    def scan_findings(self) -> None:
        for finding in self.env.findings:
            self.problems.append(
                Problem(
                    severity=Severity.WARNING,
                    code=finding.kind.replace(" ", "-"),
                    what=f"{finding.kind}: {finding.path}",
                    why=finding.message,
                    paths=(finding.path,),
                )
            )


def diagnose(env: Environment) -> DoctorReport:
    torch_cuda = cuda.torch_cuda(env)
    doctor = _Doctor(env)
    doctor.roots()
    doctor.preloads()
    doctor.hollow_dists()
    doctor.mixed(torch_cuda)
    doctor.co_owned(torch_cuda)
    doctor.run_time()
    doctor.scan_findings()
    problems = sorted(doctor.problems, key=lambda p: p.severity is not Severity.ERROR)
    system = sorted(
        {r.name for load in env.loads for r in load.resolutions if r.status is Status.SYSTEM}
    )
    notes = list(env.system.notes)
    for context in env.contexts:
        notes.append(f"{context.load_list.distribution} preload list: {context.origin}")
    return DoctorReport(
        prefix=env.target.prefix,
        python=env.target.version,
        torch_cuda=torch_cuda,
        errors=sum(p.severity is Severity.ERROR for p in problems),
        warnings=sum(p.severity is Severity.WARNING for p in problems),
        problems=tuple(problems),
        system_provided=tuple(system),
        unprovided=tuple(
            Unprovided(name=name, named_by=tuple(sorted(by)))
            for name, by in sorted(doctor.unprovided.items())
        ),
        notes=tuple(notes),
    )
