"""Who owns which file: co-owned paths, hollow distributions, the bytes on disk.

Every function here is pure over an :class:`~cudatx.environment.Environment` and the files
on disk now: it returns new frozen values and changes nothing. Hashing is the expensive
part, so only co-owned files (a path listed by several RECORDs; there are few) are hashed;
other RECORD entries are checked by existence and size.

Owners are the databases of cudatx.discover.owners: wheels' RECORDs and, in a conda
environment, conda's records, in one index; a file outside the environment that nothing
there lists is owned, if by anything, by a system package (dpkg's, rpm's), which is asked
only for the files a report names.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterable, Iterator
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from cudatx.cache import Stale, file_key, memo, memo_file, settled
from cudatx.digest import digest_file, record_encode
from cudatx.discover.confinement import inside
from cudatx.discover.owners import owner_of
from cudatx.environment import Environment
from cudatx.models import Distribution, Frozen, RecordEntry, SystemPackage
from cudatx.paths import is_library_name

if TYPE_CHECKING:
    from cudatx.cache import ScanCache
    from cudatx.loader.fileview import FileView

__all__ = [
    "CoOwned",
    "Hollow",
    "Ownership",
    "co_owned",
    "foreign_record",
    "hollow",
    "is_code",
    "is_code_file",
    "losing_code",
    "lost",
    "system_package",
]

_EXAMPLES = 5


class CoOwned(Frozen):
    """A path listed by the RECORD of more than one distribution."""

    path: str  # the path key (folders resolved, as Environment.owners is keyed)
    owners: tuple[tuple[str, str], ...]  # (name, version) of each distribution listing it
    effective_owner: str | None  # the owner whose RECORD hash matches the bytes on disk now
    present: bool  # the path exists (os.path.lexists)
    matching: tuple[str, ...] = ()  # every owner whose hash matches (several: same bytes)
    # every owner's RECORD names the same bytes (one hash, or none): a namespace file many
    # wheels ship, whose bytes need not be read to know whose they are
    same_record: bool = False


class Hollow(Frozen):
    """A distribution some of whose RECORD entries are missing on disk or hold other bytes."""

    name: str
    version: str
    missing: int  # entries whose path does not exist
    wrong: int  # entries of another size, or (co-owned, sizes tied) another sha256
    total: int  # entries checked: those with a hash, RECORD itself excluded
    examples: tuple[str, ...]  # up to five RECORD paths, as RECORD writes them
    emptied: bool  # every checked file outside its own metadata folder is missing or wrong
    # missing entries Python imports or the loader maps (is_code), as RECORD writes them: a
    # distribution that lost one is broken, whatever loads it now
    lost: tuple[str, ...] = ()


@dataclass
class Ownership:
    """What one public call computes once: file digests and RECORD entries by key."""

    env: Environment
    digests: dict[tuple[str, str], str | None] = field(default_factory=dict)
    entries: dict[tuple[str, str], RecordEntry | None] = field(default_factory=dict)

    def digest(self, path: str, algorithm: str) -> str | None:
        """The file's digest as RECORD writes it; None if it cannot be read or hashed."""
        cache_key = (path, algorithm)
        if cache_key not in self.digests:
            # In a simulated install the bytes at `path` are a staged file's.
            real = self.env.view.real(path)
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
        """Owners of a co-owned key whose bytes are there now: those whose RECORD hash
        matches them, or, where every owner's RECORD gives a size and one alone has the
        file's, that one without reading it.

        The size rule keeps a scan from hashing gigabytes (cuDNN 12 and 13 differ in size);
        hollow() follows the same rule (size_decides), as it does for a file one RECORD
        lists: a file of the right size is not read."""
        entries = [(d, self.entry(d, key)) for d in self.owners(key)]
        try:
            size = os.stat(self.env.view.real(key)).st_size
        except (OSError, ValueError):
            return ()
        if all(e is not None and e.size is not None for _, e in entries):
            sized = [d for d, e in entries if e is not None and e.size == size]
            if len(sized) == 1:
                return (sized[0],)
        return tuple(d for d, e in entries if e is not None and self.matches(key, e))

    def size_decides(self, key: str, entry: RecordEntry) -> bool:
        """Whether the size of a co-owned file (already found equal to `entry`'s) tells its
        owner: every owner's RECORD gives a size, and none that names other bytes gives
        this one. Then the file is `entry`'s owner's as a file of one owner is its owner's
        when its size is right (hollow() checks sizes, and hashes nothing else): hashing
        cuDNN 12's and 13's gigabytes was a third of a cold doctor (issue 36). Where sizes
        tie, or a RECORD has none, the hash decides."""
        for dist in self.owners(key):
            other = self.entry(dist, key)
            if other is None or other.size is None:
                return False
            if other.size == entry.size and other.hash_digest != entry.hash_digest:
                return False
        return True

    def owners(self, key: str) -> tuple[Distribution, ...]:
        names = self.env.owners.get(key, ())
        return tuple(d for d in self.env.distributions if d.name in names)


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

    def compute() -> str | None:
        raw = digest_file(path, algorithm)
        return None if raw is None else record_encode(raw)

    def load(text: str) -> str:
        if not text:
            raise ValueError("an empty digest")
        return text

    digest = memo_file(cache, f"digest:{algorithm}", st, compute, load=load, dump=lambda d: d)
    _DIGESTS[key] = digest
    return digest


def byte_owners(env: Environment, path: str) -> tuple[str, ...]:
    """The distributions whose bytes are at `path`: its owners, or for a co-owned path those
    whose RECORD hash matches (all its owners again when none does)."""
    own = Ownership(env)
    key = env.keys(path)
    owners = own.owners(key)
    if len(owners) > 1:
        owners = own.matching_owners(key) or owners
    return tuple(d.name for d in owners)


def same_bytes(env: Environment, a: str, b: str) -> bool:
    """Whether two files hold the same bytes (sizes first, then sha256, through the scan
    cache); False when either cannot be read."""
    try:
        if os.stat(a).st_size != os.stat(b).st_size:
            return False
    except OSError:
        return False
    digest = _hash_file(a, "sha256", env.view.cache)
    return digest is not None and digest == _hash_file(b, "sha256", env.view.cache)


def _checked(dist: Distribution) -> Iterator[RecordEntry]:
    """RECORD entries worth checking, as its owner says: with a hash, and not RECORD itself;
    every path of a conda record (what cannot be checked by bytes has no hash)."""
    return owner_of(dist).checked(dist)


# -- co-owned paths and hollow distributions ------------------------------------------------


def co_owned(env: Environment) -> tuple[CoOwned, ...]:
    """Every path listed by more than one RECORD, with the owner whose bytes are on disk."""
    ctx = Ownership(env)
    by_name = {d.name: d for d in env.distributions}
    out = []
    shared = env.owners.co_owned()
    for key in sorted(shared):
        owners = tuple(by_name[n] for n in shared[key] if n in by_name)
        present = os.path.lexists(key)
        hashes = set()
        for dist in owners:
            entry = ctx.entry(dist, key)
            if entry is not None and entry.hash_digest:
                hashes.add((entry.hash_algorithm, entry.hash_digest.rstrip("=")))
        same = len(hashes) <= 1
        matching = ctx.matching_owners(key) if present and not same else ()
        out.append(
            CoOwned(
                path=key,
                owners=tuple((d.name, d.version) for d in owners),
                effective_owner=matching[0].name if matching else None,
                matching=tuple(d.name for d in matching),
                present=present,
                same_record=same,
            )
        )
    return tuple(out)


def hollow(env: Environment, names: Iterable[str] | None = None) -> tuple[Hollow, ...]:
    """Distributions (all, or those of `names`) with RECORD entries missing on disk, or of
    the wrong size (or hash).

    Every entry is checked for existence and size; only co-owned paths whose owners' sizes
    tie are hashed (Ownership.size_decides), since hashing a whole CUDA environment means
    reading gigabytes.
    """
    ctx = Ownership(env)
    wanted = None if names is None else set(names)
    out = []
    for dist in env.distributions:
        if wanted is not None and dist.name not in wanted:
            continue
        meta = os.path.join(os.path.normpath(dist.metadata_dir), "")
        missing = wrong = total = payload = payload_bad = 0
        examples: list[str] = []
        lost: list[str] = []
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
                if is_code(entry):
                    lost.append(entry.path)
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
                    lost=tuple(lost),
                )
            )
    return tuple(out)


def is_code(entry: RecordEntry) -> bool:
    """Whether a RECORD entry is a file Python imports (`.py`) or the loader maps (a shared
    library, an extension module). Not a bytecode cache, which Python writes again, nor an
    empty file: an empty `__init__.py` gone leaves a namespace package whose submodules
    import as before (the import system, PEP 420)."""
    # The file name first: most entries of a CUDA environment are headers and bytecode.
    name = entry.path.rpartition("/")[2]
    if not (name.endswith(".py") or is_library_name(name)) or entry.size == 0:
        return False
    return "__pycache__" not in entry.path.split("/")


# What Python or the loader runs, by name: a module, its bytecode, an extension module of
# another platform's spelling, a .pth file (site.py executes its `import` lines), a library.
_CODE_SUFFIXES = (".py", ".pyc", ".pyd", ".pth", ".so", ".dll", ".dylib", ".exe")
_ELF = b"\x7fELF"


def is_code_file(path: str) -> bool:
    """Whether the file at `path` is code by what it is: a Python module or a library by its
    name, else, whatever its name or folder, an ELF object (its magic) or a file with an
    executable bit (a program, a script). What is none of them (headers, docs, data, licence
    texts) no import and no load reads; a file that cannot be read counts as code."""
    name = path.rpartition("/")[2]
    if name.endswith(_CODE_SUFFIXES) or is_library_name(name):
        return True
    try:
        st = os.stat(path)
        if not stat.S_ISREG(st.st_mode):
            return not stat.S_ISDIR(st.st_mode)
        if st.st_mode & 0o111:
            return True
        with open(path, "rb") as handle:
            return handle.read(4) == _ELF
    except OSError:
        return True


def losing_code(env: Environment) -> tuple[str, ...]:
    """The distributions that hollow() finds with `lost` entries (a module or library
    their RECORD lists is missing), found by checking those entries alone, for existence.

    A plan asks this of every distribution on every run (analysis.broken); hollow() stats
    every RECORD entry, headers and bytecode included: three times the files of a torch
    environment, for the one finding that counts there. Through the scan cache, a
    distribution's answer stands while its RECORD and every folder holding its code keep
    their state: a file appears in or leaves a folder only by a change of the folder's
    entries, which sets its ctime (as `find -newer` and make rely on; cudatx.cache, RACY_NS,
    for a change within the same tick).

    In a simulated environment a distribution whose RECORD the change leaves, and in whose
    folders it deletes or puts no file, loses what it lost on disk now and what is lost with
    the target of one of its symlinks; only the others are looked at file by file."""
    view = env.view
    if not view.simulated:
        return tuple(d.name for d in env.distributions if _code_now(view, d).lost)
    changed = view.changed_folders()

    def loses(dist: Distribution) -> bool:
        record = owner_of(dist).listing_file(dist)
        if record is not None and not view.gone(record) and view.real(record) == record:
            now = _code_now(view, dist)
            if not any(env.keys(os.path.join(f, "x"))[:-2] in changed for f in now.folders):
                return now.lost or any(view.gone(link) for link in now.links)
        return any(_missing(view, p) for p in _code_paths(dist))

    return tuple(d.name for d in env.distributions if loses(d))


@dataclass(frozen=True)
class _Code:
    """What the check for lost code finds of one distribution on disk now."""

    lost: bool  # a code file its RECORD lists is missing
    folders: tuple[str, ...]  # the folders of its code files, as its RECORD spells them
    states: tuple[str, ...]  # each folder's state (_folder_state) when they were looked at
    links: tuple[str, ...]  # its code files that are symlinks (looked for only when not lost)


def _code_paths(dist: Distribution) -> list[str]:
    return [os.path.join(dist.site, e.path) for e in _checked(dist) if is_code(e)]


def _code_now(view: FileView, dist: Distribution) -> _Code:
    """_Code of `dist` on disk now, whatever change `view` simulates: found once per run
    (FileView.answers, which every simulation on the view shares), kept in the scan cache."""
    record = owner_of(dist).listing_file(dist)
    try:
        st = os.stat(record) if record is not None else None
    except OSError:
        st = None
    if st is None or record is None:
        return _look(dist)[0]
    key, state = file_key(st)
    known = view.answers.get(("code intact", f"{record}\0{key}\0{state}"))
    if isinstance(known, _Code):
        return known

    def compute() -> tuple[_Code, bool]:
        found, keep = _look(dist)
        return found, keep and settled(st)

    found = memo(
        view.cache,
        "code intact",
        f"{record}\0{key}",
        state,
        compute,
        load=_code_from_json,
        dump=lambda told: _code_to_json(told[0]) if told[1] else None,
    )[0]
    view.answers[("code intact", f"{record}\0{key}\0{state}")] = found
    return found


def _look(dist: Distribution) -> tuple[_Code, bool]:
    """(_Code of `dist`, whether it may be kept: every folder settled). One lstat(2) per
    code file: a link counts as there, dangling or not (a dangling link is 'wrong', not
    missing)."""
    paths = _code_paths(dist)
    folders = sorted({os.path.dirname(p) for p in paths})
    # The folders' states before the files: a file deleted in between leaves its folder
    # newer than what is kept, and the next run looks again.
    states = [_folder_state(f) for f in folders]
    lost = False
    links = []
    for path in paths:
        try:
            mode = os.lstat(path).st_mode
        except OSError:
            lost = True
            break
        if stat.S_ISLNK(mode):
            links.append(path)
    found = _Code(lost, tuple(folders), tuple(s[0] for s in states), () if lost else tuple(links))
    return found, all(s[1] for s in states)


def _folder_state(folder: str) -> tuple[str, bool]:
    """(state, settled) of a folder: its identity and its entries' last change."""
    try:
        st = os.stat(folder)
    except OSError:
        return "-", True
    return ":".join(file_key(st)), settled(st)


def _code_to_json(found: _Code) -> str:
    return json.dumps([found.lost, found.folders, found.states, found.links])


def _code_from_json(text: str) -> tuple[_Code, bool]:
    lost, folders, states, links = json.loads(text)
    if len(folders) != len(states) or any(
        _folder_state(f)[0] != s for f, s in zip(folders, states, strict=True)
    ):
        raise Stale  # a folder's entries changed since: look again
    return _Code(bool(lost), tuple(folders), tuple(states), tuple(links)), True


def _missing(view: FileView, path: str) -> bool:
    """_state()'s 'missing': deleted by the change, or nothing there (not even a link)."""
    if view.gone(path):
        return True
    real = view.real(path)
    try:
        os.stat(real)
    except OSError:
        return not os.path.lexists(real)  # a dangling link is 'wrong', not missing
    return False


def lost(
    before: Environment, after: Environment, dist: Distribution, keys: AbstractSet[str]
) -> tuple[list[str], list[str]]:
    """(missing, other bytes): the RECORD entries of `dist` at one of `keys` that the
    change makes worse in `after` (a simulated environment), as RECORD writes them: right
    before and not after, or there before (a twin's bytes, answering to the same name) and
    gone after, the seed's own case. An entry missing before is not the change's doing."""
    then, now = Ownership(before), Ownership(after)
    missing: list[str] = []
    other: list[str] = []
    for entry in _checked(dist):
        path = os.path.join(dist.site, entry.path)
        if before.keys(path) not in keys:
            continue
        was = _state(then, dist, entry, path)
        if was == "missing":
            continue
        state = _state(now, dist, entry, path)
        if state == "missing":
            missing.append(entry.path)
        elif state == "wrong" and was is None:
            other.append(entry.path)
    return missing, other


def _state(ctx: Ownership, dist: Distribution, entry: RecordEntry, path: str) -> str | None:
    """'missing', 'wrong', or None when the entry looks right; in a simulated environment,
    as the change leaves the file (gone, or a staged file's bytes)."""
    view = ctx.env.view
    if view.gone(path):
        return "missing"
    real = view.real(path)
    try:
        size = os.stat(real).st_size
    except OSError:
        return "wrong" if os.path.lexists(real) else "missing"  # a dangling link: wrong
    if entry.size is not None and size != entry.size:
        return "wrong"
    if not ctx.env.owners.may_share(path):
        return None
    key = ctx.env.keys(path)
    if (
        len(ctx.env.owners.get(key, ())) > 1
        and not ctx.size_decides(key, entry)
        and ctx.matches(path, entry) is False
    ):
        return "wrong"
    return None


# -- owners beyond the environment's RECORDs ------------------------------------------------


def system_package(env: Environment, path: str | None) -> SystemPackage | None:
    """The system package (dpkg, rpm) that installed `path`, a file outside the environment
    that no distribution lists; None for any other file, and then nothing is read."""
    if path is None or env.system_packages is None:
        return None
    key = env.keys(path)
    if env.owners.get(key) or inside(key, os.path.realpath(env.target.prefix)):
        return None
    return env.system_packages.owner(key)


def foreign_record(env: Environment, dist: Distribution) -> Distribution | None:
    """The record of an owner cudatx does not change (cudatx.discover.owners: conda's) that
    installed `dist`: itself where its owner is one; for a dist-info or egg-info folder, such
    a record listing its metadata file (a Python package conda installed has one); None for
    what pip or uv installed."""
    if not owner_of(dist).changeable:
        return dist
    for name in ("METADATA", "PKG-INFO"):
        key = env.keys(os.path.join(dist.metadata_dir, name))
        for owner in env.owners.get(key, ()):
            record = env.distribution(owner) if owner != dist.name else None
            if record is not None and not owner_of(record).changeable:
                return record
    return None
