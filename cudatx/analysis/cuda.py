"""CUDA majors: which CUDA major each file and distribution was built for, and where the loads
of a package that says its CUDA build (torch: torch.version.cuda) mix them.

The CUDA major of a file is never read from a version number that merely starts with 12:
`nvidia-cufft` 12.0.0.61 is a CUDA 13 package (`nvidia/cu13/lib/libcufft.so.12`). The rules
and their order are in :func:`cuda_major_of_file`; the tables are in
`cudatx/data/cuda_majors.json`.
"""

from __future__ import annotations

import functools
import itertools
import json
import os
import re
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from enum import StrEnum
from importlib import resources
from typing import TYPE_CHECKING

from cudatx.analysis.ownership import Ownership
from cudatx.cache import remembered
from cudatx.discover.dists import applicable_requirements
from cudatx.discover.frameworks.model import CudaBuild
from cudatx.discover.owners import owner_of
from cudatx.environment import Environment
from cudatx.models import Distribution, ElfInfo, Evidence, Frozen, Status
from cudatx.paths import is_library_name

if TYPE_CHECKING:
    from packaging.requirements import Requirement
    from packaging.specifiers import SpecifierSet

__all__ = [
    "Basis",
    "Classified",
    "Mixed",
    "build",
    "build_of",
    "cuda_major_of_dist",
    "cuda_major_of_file",
    "cuda_major_of_name",
    "file_classifier",
    "mixed_majors",
]


class Basis(StrEnum):
    """Which rule decided a CUDA major, in the order cuda_major_of_file tries them."""

    FOLDER = "folder"  # nvidia/cu13/lib/...
    OWNER_NAME = "owner name"  # an owner named like nvidia-cudnn-cu12
    SONAME = "soname"  # the file's own soname (or name) is a tracking library
    VERSION_NEEDS = "version needs"  # GNU version needs name a tracking library
    NEEDED = "DT_NEEDED"  # DT_NEEDED names a tracking library
    METADATA = "metadata"  # the owner's Requires-Dist, own version, or torch.version.cuda
    FILES = "files"  # for a distribution: the majority of its ELF files


class Classified(Frozen):
    major: int
    reason: str
    by: Basis


class Mixed(Frozen):
    """A file the load of a package that says its CUDA build resolves that was built for
    another CUDA major than that package (torch's load, a CUDA 12 cuBLAS for a CUDA 13 torch)."""

    soname: str  # the name that was looked up
    needed_by: str
    path: str  # the file it resolved to, as opened
    major: int
    torch_cuda: str  # the package's CUDA version (a report's field: its name is kept)
    reason: str
    # the package, as shown ("torch"); not written in a report (cudatx.codec.document)
    package: str = field(default="", metadata={"exclude": True})


# -- the shipped tables ---------------------------------------------------------------------


class _Rules(Frozen, kw_only=False):
    folder_parent: str
    folder: re.Pattern[str]
    suffix: re.Pattern[str]
    tracking: re.Pattern[str]  # group 1: stem, group 2: major
    tracking_distributions: frozenset[str]


@functools.cache
def _rules() -> _Rules:
    text = (resources.files("cudatx") / "data" / "cuda_majors.json").read_text(encoding="utf-8")
    data = json.loads(text)
    stems = "|".join(re.escape(s) for s in sorted(data["tracking_libraries"], key=len)[::-1])
    return _Rules(
        folder_parent=data["folder"]["parent"],
        folder=re.compile(data["folder"]["pattern"]),
        suffix=re.compile(data["suffix"]),
        tracking=re.compile(rf"^({stems})\.so\.([0-9]+)(?:\.[0-9]+)*$"),
        tracking_distributions=frozenset(data["tracking_distributions"]),
    )


def _tracking_major(name: str) -> int | None:
    match = _rules().tracking.match(os.path.basename(name))
    return int(match.group(2)) if match else None


def _suffix_major(name: str) -> int | None:
    match = _rules().suffix.search(name)
    return int(match.group(1)) if match else None


def cuda_major_of_name(name: str) -> int | None:
    """The CUDA major a distribution's name says (`nvidia-cudnn-cu12`: 12), or None."""
    return _suffix_major(name)


def _folder_major(path: str) -> tuple[int, str] | None:
    rules = _rules()
    parts = os.path.normpath(path).split(os.sep)
    for parent, child in itertools.pairwise(parts):
        if parent != rules.folder_parent:
            continue
        match = rules.folder.match(child)
        if match:
            return int(match.group(1)), f"{parent}/{child}"
    return None


@dataclass
class _Context:
    """What one public call computes once: ownership, owners' metadata."""

    env: Environment
    own: Ownership
    dist_majors: dict[str, tuple[int, str] | None] = field(default_factory=dict)

    def elf(self, path: str) -> ElfInfo | None:
        return self.env.view.probe(path).info


def _context(env: Environment) -> _Context:
    return _Context(env, Ownership(env))


# -- CUDA majors ----------------------------------------------------------------------------


def cuda_major_of_file(env: Environment, path: str, info: ElfInfo | None) -> Classified | None:
    """The CUDA major the file at `path` was built for, or None when nothing decides.

    In this order: (a) a folder `nvidia/cuNN/` on its path; (b) an owner named `*-cuNN` (for
    a co-owned path, the owner whose bytes are on disk); (c) its soname or file name, for
    libraries whose soname major is the CUDA major (libcudart, libcublas, libnvrtc, ...;
    never libcufft, libcusparse, libcurand, libcusolver); (d) GNU version needs naming such
    a library; (e) DT_NEEDED naming one; (f) the owner's metadata: torch.version.cuda for
    torch's files, Requires-Dist pins (`cuda-toolkit==13.0.3`, `nvidia-cublas-cu12`), or the
    owner's own version where it tracks CUDA (nvidia-cuda-runtime 13.0.96).
    """
    return _classify_file(_context(env), path, info, with_owner=True)


def file_classifier(env: Environment) -> Callable[[str, ElfInfo | None], Classified | None]:
    """cuda_major_of_file for many files of one environment: digests, owners' metadata and
    answers computed once (a replay asks for every object of every root)."""
    ctx = _context(env)
    answers: dict[str, Classified | None] = {}

    def classify(path: str, info: ElfInfo | None) -> Classified | None:
        if path not in answers:
            answers[path] = _classify_file(ctx, path, info, with_owner=True)
        return answers[path]

    return classify


def _classify_file(
    ctx: _Context, path: str, info: ElfInfo | None, *, with_owner: bool
) -> Classified | None:
    key = ctx.env.keys(path)
    for candidate in (key, path):
        folder = _folder_major(candidate)
        if folder is not None:
            return Classified(major=folder[0], reason=f"in folder {folder[1]}", by=Basis.FOLDER)
    owners = _byte_owners(ctx, key) if with_owner else ()
    if with_owner:
        named = _agreeing((_suffix_major(d.name), d.name) for d in owners)
        if named is not None:
            major, name = named
            return Classified(major=major, reason=f"owned by {name}", by=Basis.OWNER_NAME)
    intrinsic = _intrinsic(path, info)
    if intrinsic is not None:
        return intrinsic
    if with_owner:
        decided = _agreeing(_dist_metadata(ctx, d) for d in owners)
        if decided is not None:
            return Classified(major=decided[0], reason=decided[1], by=Basis.METADATA)
    return None


def _intrinsic(path: str, info: ElfInfo | None) -> Classified | None:
    """Rules (c), (d), (e): what the file itself says."""
    names = [info.soname] if info is not None and info.soname else []
    names.append(os.path.basename(path))
    for name in names:
        major = _tracking_major(name)
        if major is not None:
            what = "soname" if info is not None and name == info.soname else "file name"
            return Classified(major=major, reason=f"{what} {name}", by=Basis.SONAME)
    if info is None:
        return None
    needs = [(_tracking_major(n.file), n.file) for n in info.version_needs]
    decided = _agreeing(needs, majority=True)
    if decided is not None:
        reason = f"needs symbol versions of {decided[1]}"
        return Classified(major=decided[0], reason=reason, by=Basis.VERSION_NEEDS)
    decided = _agreeing(((_tracking_major(n), n) for n in info.needed), majority=True)
    if decided is not None:
        return Classified(major=decided[0], reason=f"DT_NEEDED {decided[1]}", by=Basis.NEEDED)
    return None


def _agreeing(
    candidates: Iterable[tuple[int | None, str] | None], *, majority: bool = False
) -> tuple[int, str] | None:
    """The major the candidates agree on (or, with `majority`, most of them), with the first
    reason given for it; None when none decides or they disagree."""
    found: list[tuple[int, str]] = []
    for candidate in candidates:
        if candidate is not None and candidate[0] is not None:
            found.append((candidate[0], candidate[1]))
    if not found:
        return None
    counts = Counter(major for major, _ in found).most_common()
    if len(counts) > 1 and (not majority or counts[0][1] == counts[1][1]):
        return None
    winner = counts[0][0]
    return next(item for item in found if item[0] == winner)


def _byte_owners(ctx: _Context, key: str) -> tuple[Distribution, ...]:
    """The owners the bytes at `key` belong to: all of them, or for a co-owned path the ones
    whose hash matches (all of them again when none matches: then only agreement decides)."""
    owners = ctx.own.owners(key)
    if len(owners) < 2:
        return owners
    return ctx.own.matching_owners(key) or owners


def _dist_metadata(ctx: _Context, dist: Distribution) -> tuple[int, str] | None:
    """Rule (f) for one distribution: the CUDA build its source says (torch.version.cuda),
    own tracking version, Requires-Dist."""
    if dist.name in ctx.dist_majors:
        return ctx.dist_majors[dist.name]
    decided: tuple[int, str] | None = None
    built = build_of(ctx.env, dist.name)
    if built is not None:
        cuda = built.cuda
        major = _leading_int(cuda) if cuda else None
        if major is not None:
            decided = (major, f"{built.said_by} is {cuda}")
    if decided is None:
        # A framework that loads by hand knows its build (cudatx.discover.frameworks:
        # jax_plugins/xla_cuda13, onnxruntime's build_and_package_info.cuda_version).
        run = next(
            (
                r
                for r in ctx.env.frameworks
                if dist.name in (r.framework.distribution, *r.companions)
                and r.loads.build_major is not None
            ),
            None,
        )
        if run is not None and run.loads.build_major is not None:
            decided = (
                run.loads.build_major,
                f"{run.framework.name} is built for CUDA "
                f"{run.loads.build_major} ({run.origin.split(' (')[0]})",
            )
    if decided is None:
        decided = owner_of(dist).cuda_major(dist)  # what its own record says (a conda record's)
    if decided is None and dist.name in _rules().tracking_distributions:
        major = _leading_int(dist.version)
        if major is not None:
            decided = (major, f"{dist.name} {dist.version} tracks the CUDA version")
    if decided is None:
        decided = _agreeing(_requirement_majors(ctx, dist), majority=True)
    ctx.dist_majors[dist.name] = decided
    return decided


def _requirement_majors(ctx: _Context, dist: Distribution) -> list[tuple[int, str]]:
    """What the applicable Requires-Dist of `dist` say of its CUDA major, each with the words
    that show it. Parsing and evaluating them is what a warm plan would import packaging for
    (cudatx.names): the answer is kept in the scan cache, keyed by the lines and the markers
    (the rules are in the cache's fingerprint)."""
    markers = ctx.env.target.markers

    def compute() -> list[tuple[int, str]]:
        said = (
            _requirement_major(ctx, r, dist.name) for r in applicable_requirements(dist, markers)
        )
        return [major for major in said if major is not None]

    return remembered(
        ctx.env.view.cache,
        "requirement majors",
        dist.metadata_dir,
        lambda: [dist.requires, sorted(markers.items())],
        compute,
        read=lambda rows: [(int(major), str(shown)) for major, shown in rows],
        write=lambda found: found,
    )


def _leading_int(text: str) -> int | None:
    match = re.match(r"\s*v?([0-9]+)", text)
    return int(match.group(1)) if match else None


def _requirement_major(
    ctx: _Context, requirement: Requirement, owner: str
) -> tuple[int, str] | None:
    name = requirement.name.lower().replace("_", "-").replace(".", "-")
    shown = f"Requires-Dist of {owner}: {requirement.name}{requirement.specifier}"
    major = _suffix_major(name)
    if major is not None:
        return major, shown
    if name in _rules().tracking_distributions:
        major = _pinned_major(requirement.specifier)
        if major is not None:
            return major, shown
    return None


def _pinned_major(specifier: SpecifierSet) -> int | None:
    """The major a specifier set pins: `==13.0.3`, `==13.0.*`, `~=13.0`, or `>=13.0,<14`."""
    exact = {_leading_int(s.version) for s in specifier if s.operator in ("==", "===", "~=")}
    exact.discard(None)
    if len(exact) == 1:
        return exact.pop()
    if exact:
        return None
    lower = {_leading_int(s.version) for s in specifier if s.operator in (">=", ">")}
    upper = {s.version for s in specifier if s.operator == "<"}
    if len(lower) == 1:
        (major,) = lower
        if major is not None and any(re.fullmatch(rf"{major + 1}(\.0)*", bound) for bound in upper):
            return major
    return None


def cuda_major_of_dist(env: Environment, dist: Distribution) -> Classified | None:
    """A distribution's CUDA major: its name suffix, else most of its ELF files, else its
    metadata (as in rule (f) of cuda_major_of_file)."""
    return _classify_dist(_context(env), dist)


def _classify_dist(ctx: _Context, dist: Distribution) -> Classified | None:
    major = _suffix_major(dist.name)
    if major is not None:
        return Classified(major=major, reason=f"named {dist.name}", by=Basis.OWNER_NAME)
    votes: Counter[int] = Counter()
    first: dict[int, str] = {}
    for entry in dist.records:
        if not is_library_name(os.path.basename(entry.path)):
            continue
        path = os.path.join(dist.site, entry.path)
        key = ctx.env.keys(path)
        co_owned = len(ctx.env.owners.get(key, ())) > 1
        if co_owned and dist.name not in {d.name for d in ctx.own.matching_owners(key)}:
            continue  # the bytes there are another owner's
        info = ctx.elf(path)
        if info is None:
            continue
        found = _classify_file(ctx, path, info, with_owner=False)
        if found is not None:
            votes[found.major] += 1
            first.setdefault(found.major, f"{entry.path}: {found.reason}")
    ranked = votes.most_common()
    if ranked and (len(ranked) == 1 or ranked[0][1] > ranked[1][1]):
        major, count = ranked[0]
        total = sum(votes.values())
        reason = f"{count} of {total} classified ELF files (e.g. {first[major]})"
        return Classified(major=major, reason=reason, by=Basis.FILES)
    decided = _dist_metadata(ctx, dist)
    if decided is not None:
        return Classified(major=decided[0], reason=decided[1], by=Basis.METADATA)
    return None


def build(env: Environment) -> CudaBuild | None:
    """The CUDA build the environment is judged against: the first package installed here
    that says its build in its source (torch: torch.version.cuda, read, never imported), as
    the scan read it; None where none is installed."""
    return env.cuda_builds[0] if env.cuda_builds else None


def build_of(env: Environment, distribution: str) -> CudaBuild | None:
    """The CUDA build `distribution` says in its source, as the scan read it (its `cuda`
    None: unreadable, or a CPU build); None where it is not installed or says none."""
    return next((b for b in env.cuda_builds if b.distribution == distribution), None)


# -- mixed majors ---------------------------------------------------------------------------


def _bound(env: Environment, package: str) -> frozenset[str]:
    """The files (keys) a package's own objects bind to, directly or through what those
    load, and those objects: every resolution but a preload's followed from the package.

    torch's preload takes the first file its glob finds (`libcublas.so.*[0-9]` in
    nvidia/cublas/lib before nvidia/cu13/lib: torch/__init__.py, _get_cuda_dep_paths) and
    opens it RTLD_LOCAL, which binds torch to nothing by itself. Where a library of torch's
    needs its soname, glibc reuses the loaded file (elf/dl-load.c, _dl_map_object's name
    match): that resolution, needed by the library, is followed. A CUDA 12 cuBLAS that a
    CUDA 13 torch preloads beside TensorFlow's wheels, and what it needs, are dead weight in
    the process, not a mix of majors."""
    edges: dict[str, set[str]] = {}
    for load in env.loads:
        if not env.keys(load.root).startswith(package):
            continue
        for r in load.resolutions:
            if r.status is not Status.RESOLVED or r.path is None or r.evidence is Evidence.PRELOAD:
                continue
            edges.setdefault(env.keys(r.needed_by), set()).add(env.keys(r.path))
    todo = [k for k in edges if k.startswith(package)]
    reached = set(todo)
    while todo:
        for nxt in edges.get(todo.pop(), ()):
            if nxt not in reached:
                reached.add(nxt)
                todo.append(nxt)
    return frozenset(reached)


def mixed_majors(env: Environment) -> tuple[Mixed, ...]:
    """Files that the imports of a package that says its CUDA build (torch) resolve and that
    were built for another CUDA major."""
    ctx = _context(env)
    return tuple(found for built in env.cuda_builds for found in _mixed(ctx, built))


def _mixed(ctx: _Context, built: CudaBuild) -> tuple[Mixed, ...]:
    env = ctx.env
    cuda = built.cuda
    built_major = _leading_int(cuda) if cuda else None
    if cuda is None or built_major is None:
        return ()
    package = os.path.join(os.path.realpath(built.package), "")
    seen: set[tuple[str, str]] = set()
    classified: dict[str, Classified | None] = {}
    out = []
    bound = _bound(env, package)
    for load in env.loads:
        if not env.keys(load.root).startswith(package):
            continue
        for resolution in load.resolutions:
            if resolution.status is not Status.RESOLVED or resolution.path is None:
                continue
            # a need of an object the package binds, met by a file it binds (not a preload's)
            key = env.keys(resolution.path)
            if key not in bound or env.keys(resolution.needed_by) not in bound:
                continue
            if resolution.evidence is Evidence.PRELOAD:
                continue
            if (resolution.name, key) in seen:
                continue
            seen.add((resolution.name, key))
            if key not in classified:
                # FileView turns read_elf's ElfReadError into "no ElfInfo": unknown, not fatal.
                info = ctx.elf(resolution.path)
                classified[key] = _classify_file(ctx, resolution.path, info, with_owner=True)
            found = classified[key]
            if found is None or found.major == built_major:
                continue
            out.append(
                Mixed(
                    soname=resolution.name,
                    needed_by=resolution.needed_by,
                    path=resolution.path,
                    major=found.major,
                    torch_cuda=cuda,
                    reason=found.reason,
                    package=built.name,
                )
            )
    return tuple(out)
