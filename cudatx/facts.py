"""Facts derived from a scanned environment: co-owned paths, hollow distributions, CUDA majors.

Every function here is pure over an :class:`~cudatx.scan.Environment` and the files on disk
now: it returns new frozen values and changes nothing. Hashing is the expensive part, so only
co-owned files (a path listed by several RECORDs; there are few) are hashed; other RECORD
entries are checked by existence and size.

The CUDA major of a file is never read from a version number that merely starts with 12:
`nvidia-cufft` 12.0.0.61 is a CUDA 13 package (`nvidia/cu13/lib/libcufft.so.12`). The rules
and their order are in :func:`cuda_major_of_file`; the tables are in
`cudatx/data/cuda_majors.json`.
"""

from __future__ import annotations

import ast
import base64
import functools
import itertools
import json
import os
import re
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from enum import StrEnum
from importlib import resources
from typing import TYPE_CHECKING

from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet

from cudatx.dists import applicable_requirements
from cudatx.fsview import FileView
from cudatx.models import Distribution, ElfInfo, Frozen, RecordEntry, Status
from cudatx.scan import Environment

if TYPE_CHECKING:
    from cudatx.cache import ScanCache

__all__ = [
    "Basis",
    "Classified",
    "CoOwned",
    "Hollow",
    "Mixed",
    "co_owned",
    "cuda_major_of_dist",
    "cuda_major_of_file",
    "file_classifier",
    "hollow",
    "mixed_majors",
    "torch_cuda",
]

_CHUNK = 1 << 20
_EXAMPLES = 5
_LIBRARY_NAME = re.compile(r"\.so(\.|$)")


# -- models ---------------------------------------------------------------------------------


class CoOwned(Frozen):
    """A path listed by the RECORD of more than one distribution."""

    path: str  # the path key (folders resolved, as Environment.owners is keyed)
    owners: tuple[tuple[str, str], ...]  # (name, version) of each distribution listing it
    effective_owner: str | None  # the owner whose RECORD hash matches the bytes on disk now
    present: bool  # the path exists (os.path.lexists)
    matching: tuple[str, ...] = ()  # every owner whose hash matches (several: same bytes)


class Hollow(Frozen):
    """A distribution some of whose RECORD entries are missing on disk or hold other bytes."""

    name: str
    version: str
    missing: int  # entries whose path does not exist
    wrong: int  # entries of another size, or (co-owned paths) another sha256
    total: int  # entries checked: those with a hash, RECORD itself excluded
    examples: tuple[str, ...]  # up to five RECORD paths, as RECORD writes them
    emptied: bool  # every checked file outside its own metadata folder is missing or wrong


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
    """A file torch's load resolves that was built for another CUDA major than torch."""

    soname: str  # the name that was looked up
    needed_by: str
    path: str  # the file it resolved to, as opened
    major: int
    torch_cuda: str
    reason: str


# -- the shipped tables ---------------------------------------------------------------------


@dataclass(frozen=True)
class _Rules:
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


# -- hashing and RECORD lookups, cached for one call ---------------------------------------


def _encode(digest: bytes) -> str:
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


@dataclass
class _Context:
    """What one public call computes once: file digests, RECORD entries by key, ELF reads."""

    env: Environment
    digests: dict[tuple[str, str], str | None] = field(default_factory=dict)
    entries: dict[tuple[str, str], RecordEntry | None] = field(default_factory=dict)
    view: FileView | None = None  # the environment's own, so no ELF is parsed twice
    dist_majors: dict[str, tuple[int, str] | None] = field(default_factory=dict)
    torch: tuple[str | None] | None = None

    def digest(self, path: str, algorithm: str) -> str | None:
        """The file's digest as RECORD writes it; None if it cannot be read or hashed."""
        cache_key = (path, algorithm)
        if cache_key not in self.digests:
            # In a simulated install the bytes at `path` are a staged file's.
            real = (self.view or self.env.view).real(path)
            self.digests[cache_key] = _hash_file(real, algorithm, self.env.view.cache)
        return self.digests[cache_key]

    def entry(self, dist: Distribution, key: str) -> RecordEntry | None:
        """The RECORD entry of `dist` whose path has this key (co-owned paths only: few)."""
        cache_key = (dist.name, key)
        if cache_key not in self.entries:
            found = None
            for entry in dist.records:
                if self.env.keys(os.path.join(dist.site, entry.path)) == key:
                    found = entry
                    break
            self.entries[cache_key] = found
        return self.entries[cache_key]

    def matches(self, path: str, entry: RecordEntry) -> bool | None:
        """Whether the bytes at `path` have `entry`'s hash; None when that cannot be told."""
        if entry.hash_algorithm is None or entry.hash_digest is None:
            return None
        actual = self.digest(path, entry.hash_algorithm)
        if actual is None:
            return None
        return actual == entry.hash_digest.rstrip("=")

    def matching_owners(self, key: str) -> tuple[Distribution, ...]:
        """Owners of a co-owned key whose RECORD hash matches the bytes there now."""
        out = []
        for dist in self.owners(key):
            entry = self.entry(dist, key)
            if entry is not None and self.matches(key, entry):
                out.append(dist)
        return tuple(out)

    def owners(self, key: str) -> tuple[Distribution, ...]:
        names = self.env.owners.get(key, ())
        return tuple(d for d in self.env.distributions if d.name in names)

    def elf(self, path: str) -> ElfInfo | None:
        return (self.view or self.env.view).probe(path).info

    def torch_cuda(self) -> str | None:
        if self.torch is None:
            self.torch = (torch_cuda(self.env),)
        return self.torch[0]


# Digests by file identity and state: a plan classifies the same co-owned files for every
# root of every simulated pass, and cuDNN's are gigabytes. A file changed in place has
# another size or mtime and is hashed again.
_DIGESTS: dict[tuple[str, str, int, int, int, int], str | None] = {}


def _hash_file(path: str, algorithm: str, cache: ScanCache | None) -> str | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    key = (path, algorithm, st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
    if key in _DIGESTS:
        return _DIGESTS[key]
    kind = f"digest:{algorithm}"
    stored = cache.get_file(kind, st) if cache is not None else None
    if stored:
        digest: str | None = stored
    else:
        digest = _hash_now(path, algorithm)
        if cache is not None and digest is not None:
            cache.put_file(kind, st, digest)
    _DIGESTS[key] = digest
    return digest


def _hash_now(path: str, algorithm: str) -> str | None:
    import hashlib  # OpenSSL: loaded only when something is hashed

    try:
        hasher = hashlib.new(algorithm)
    except (ValueError, TypeError):
        return None
    try:
        with open(path, "rb") as stream:
            while chunk := stream.read(_CHUNK):
                hasher.update(chunk)
    except OSError:
        return None
    if hasher.digest_size == 0:  # shake_*: variable length, RECORD cannot use it
        return None
    return _encode(hasher.digest())


def _checked(dist: Distribution) -> Iterator[RecordEntry]:
    """RECORD entries worth checking: with a hash, and not RECORD itself."""
    record = os.path.normpath(os.path.join(dist.metadata_dir, "RECORD"))
    for entry in dist.records:
        if entry.hash_algorithm is None or entry.hash_digest is None:
            continue
        if entry.path.endswith("RECORD") and (
            os.path.normpath(os.path.join(dist.site, entry.path)) == record
        ):
            continue
        yield entry


# -- co-owned paths and hollow distributions ------------------------------------------------


def co_owned(env: Environment) -> tuple[CoOwned, ...]:
    """Every path listed by more than one RECORD, with the owner whose bytes are on disk."""
    ctx = _Context(env)
    by_name = {d.name: d for d in env.distributions}
    out = []
    for key in sorted(k for k, names in env.owners.items() if len(names) > 1):
        owners = tuple(by_name[n] for n in env.owners[key] if n in by_name)
        present = os.path.lexists(key)
        matching = ctx.matching_owners(key) if present else ()
        out.append(
            CoOwned(
                path=key,
                owners=tuple((d.name, d.version) for d in owners),
                effective_owner=matching[0].name if matching else None,
                matching=tuple(d.name for d in matching),
                present=present,
            )
        )
    return tuple(out)


def hollow(env: Environment) -> tuple[Hollow, ...]:
    """Distributions with RECORD entries missing on disk, or of the wrong size (or hash).

    Every entry is checked for existence and size; only co-owned paths are hashed, since
    hashing a whole CUDA environment means reading gigabytes.
    """
    ctx = _Context(env)
    out = []
    for dist in env.distributions:
        meta = os.path.join(os.path.normpath(dist.metadata_dir), "")
        missing = wrong = total = payload = payload_bad = 0
        examples: list[str] = []
        for entry in _checked(dist):
            total += 1
            path = os.path.join(dist.site, entry.path)
            inside_meta = os.path.join(os.path.normpath(path), "").startswith(meta)
            payload += not inside_meta
            state = _state(ctx, dist, entry, path)
            if state is None:
                continue
            if state == "missing":
                missing += 1
            else:
                wrong += 1
            payload_bad += not inside_meta
            if len(examples) < _EXAMPLES:
                examples.append(entry.path)
        if missing or wrong:
            out.append(
                Hollow(
                    name=dist.name,
                    version=dist.version,
                    missing=missing,
                    wrong=wrong,
                    total=total,
                    examples=tuple(examples),
                    emptied=payload > 0 and payload_bad == payload,
                )
            )
    return tuple(out)


def _state(ctx: _Context, dist: Distribution, entry: RecordEntry, path: str) -> str | None:
    """'missing', 'wrong', or None when the entry looks right."""
    try:
        size = os.stat(path).st_size
    except OSError:
        return "wrong" if os.path.lexists(path) else "missing"  # a dangling link: wrong
    if entry.size is not None and size != entry.size:
        return "wrong"
    key = ctx.env.keys(path)
    if len(ctx.env.owners.get(key, ())) > 1 and ctx.matches(path, entry) is False:
        return "wrong"
    return None


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
    return _classify_file(_Context(env), path, info, with_owner=True)


def file_classifier(env: Environment) -> Callable[[str, ElfInfo | None], Classified | None]:
    """cuda_major_of_file for many files of one environment: digests, owners' metadata and
    answers computed once (a replay asks for every object of every root)."""
    ctx = _Context(env)
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
    owners = ctx.owners(key)
    if len(owners) < 2:
        return owners
    return ctx.matching_owners(key) or owners


def _dist_metadata(ctx: _Context, dist: Distribution) -> tuple[int, str] | None:
    """Rule (f) for one distribution: torch.version.cuda, own tracking version, Requires-Dist."""
    if dist.name in ctx.dist_majors:
        return ctx.dist_majors[dist.name]
    decided: tuple[int, str] | None = None
    if dist.name == "torch":
        cuda = ctx.torch_cuda()
        major = _leading_int(cuda) if cuda else None
        if major is not None:
            decided = (major, f"torch.version.cuda is {cuda}")
    if decided is None and dist.name in _rules().tracking_distributions:
        major = _leading_int(dist.version)
        if major is not None:
            decided = (major, f"{dist.name} {dist.version} tracks the CUDA version")
    if decided is None:
        decided = _agreeing(
            (
                _requirement_major(ctx, req, dist.name)
                for req in applicable_requirements(dist, ctx.env.target.markers)
            ),
            majority=True,
        )
    ctx.dist_majors[dist.name] = decided
    return decided


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
    return _classify_dist(_Context(env), dist)


def _classify_dist(ctx: _Context, dist: Distribution) -> Classified | None:
    major = _suffix_major(dist.name)
    if major is not None:
        return Classified(major=major, reason=f"named {dist.name}", by=Basis.OWNER_NAME)
    votes: Counter[int] = Counter()
    first: dict[int, str] = {}
    for entry in dist.records:
        if not _LIBRARY_NAME.search(os.path.basename(entry.path)):
            continue
        path = os.path.join(dist.site, entry.path)
        key = ctx.env.keys(path)
        co_owned = len(ctx.env.owners.get(key, ())) > 1
        if co_owned and dist.name not in {d.name for d in ctx.matching_owners(key)}:
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


def torch_cuda(env: Environment) -> str | None:
    """torch.version.cuda of the installed torch, read from torch/version.py without importing
    torch; None when torch is absent, unreadable, or a CPU build."""
    dist = env.distribution("torch")
    if dist is None:
        return None
    path = os.path.join(dist.site, "torch", "version.py")
    if not os.path.exists(path):  # RECORD may spell it otherwise (13,000 rows: only then)
        relative = next(
            (e.path for e in dist.records if os.path.normpath(e.path) == "torch/version.py"),
            "torch/version.py",
        )
        path = os.path.join(dist.site, relative)
    try:
        with open(env.view.real(path), "rb") as stream:
            tree = ast.parse(stream.read())
    except (OSError, SyntaxError, ValueError):
        return None
    value: str | None = None
    for node in tree.body:
        if isinstance(node, ast.Assign):
            targets, assigned = node.targets, node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets, assigned = [node.target], node.value
        else:
            continue
        if any(isinstance(t, ast.Name) and t.id == "cuda" for t in targets):
            constant = assigned.value if isinstance(assigned, ast.Constant) else None
            value = constant if isinstance(constant, str) else None
    return value


# -- mixed majors ---------------------------------------------------------------------------


def mixed_majors(env: Environment) -> tuple[Mixed, ...]:
    """Files that torch's imports resolve and that were built for another CUDA major."""
    ctx = _Context(env)
    cuda = ctx.torch_cuda()
    dist = env.distribution("torch")
    torch_major = _leading_int(cuda) if cuda else None
    if dist is None or cuda is None or torch_major is None:
        return ()
    package = os.path.join(os.path.realpath(os.path.join(dist.site, "torch")), "")
    seen: set[tuple[str, str]] = set()
    classified: dict[str, Classified | None] = {}
    out = []
    for load in env.loads:
        if not env.keys(load.root).startswith(package):
            continue
        for resolution in load.resolutions:
            if resolution.status is not Status.RESOLVED or resolution.path is None:
                continue
            key = env.keys(resolution.path)
            if (resolution.name, key) in seen:
                continue
            seen.add((resolution.name, key))
            if key not in classified:
                # FileView turns read_elf's ElfReadError into "no ElfInfo": unknown, not fatal.
                info = ctx.elf(resolution.path)
                classified[key] = _classify_file(ctx, resolution.path, info, with_owner=True)
            found = classified[key]
            if found is None or found.major == torch_major:
                continue
            out.append(
                Mixed(
                    soname=resolution.name,
                    needed_by=resolution.needed_by,
                    path=resolution.path,
                    major=found.major,
                    torch_cuda=cuda,
                    reason=found.reason,
                )
            )
    return tuple(out)
