"""Where the bytes of each install and reinstall come from: the wheel file or URL that uv's
resolution chooses, with the options the staging and the apply give it.

`uv pip install` names no file, even with -vv (uv 0.13.9: "Registry requirement already
cached: NAME==VERSION", "Selecting: NAME==VERSION [compatible] (FILENAME)"). Its resolver is
asked instead, as cudatx.planning.resolve asks it: `uv pip compile --no-deps --format
pylock.toml -v` with the same specs (pinned as the dry run chose them) and the same options
gives each distribution's wheels with their URL or path and sha256, and the debug line
"Selecting:" the file name it chose. Where several wheels of that name remain (two
find-links folders that hold a build of the same file name each: uv lists both and installs
one), the staged bytes decide among the local ones: the wheel whose RECORD lists the files
uv staged. A local wheel whose RECORD lists other bytes than uv staged (uv's cache holding
an older file of that path) is said so. What cannot be decided is said in words.
"""

from __future__ import annotations

import csv
import io
import os
import tempfile
import tomllib
import zipfile
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any
from urllib.parse import unquote, urlsplit, urlunsplit

from cudatx.models import Distribution, Frozen
from cudatx.names import canonical_name
from cudatx.planning.models import Arriving, Plan
from cudatx.planning.resolve import selected
from cudatx.uv import UvFailed, lock_argv, run_uv

# uv pip compile refuses these of the options an install takes (uv 0.13.9).
_INSTALL_ONLY = {"--require-hashes"}
# Written by the installer, or moved out of the site folder (`.data/`): not compared.
_INSTALLER_FILES = {"RECORD", "INSTALLER", "REQUESTED", "direct_url.json"}


class Candidate(Frozen, kw_only=False):
    """A file uv's resolution lists for a distribution."""

    source: str  # a local file's absolute path, else its URL (credentials left out)
    path: str | None  # the local file, where it is one
    sha256: str | None
    filename: str


class Found(Frozen, kw_only=False):
    """Per distribution (canonical name): the files uv's resolution lists, the one it chose
    first where it says; or why there are none."""

    candidates: Mapping[str, tuple[Candidate, ...]]
    failed: str | None = None  # uv's resolution failed: its first line


def ask(uv: str, prefix: str, specs: Sequence[str], options: Sequence[str]) -> Found:
    """Ask uv's resolver where it takes each of `specs` from, for the environment at
    `prefix`, with `options` (the staging's); never raises for uv's failure (`failed`)."""
    words = [w for w in options if w not in _INSTALL_ONLY]
    if not specs:
        return Found({})
    with tempfile.TemporaryDirectory(prefix="cudatx-sources-") as folder:
        requirements = os.path.join(folder, "requirements.txt")
        lock = os.path.join(folder, "pylock.toml")  # uv requires the name pylock.toml
        with open(requirements, "w", encoding="utf-8") as handle:
            handle.write("".join(f"{s}\n" for s in specs))
        argv = lock_argv(prefix, requirements, lock, words, no_deps=True)
        try:
            output = run_uv(uv, argv)
            with open(lock, "rb") as handle:
                doc = tomllib.loads(handle.read().decode("utf-8"))
        except UvFailed as exc:
            return Found({}, failed=(exc.message.strip().splitlines() or ["it failed"])[0])
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
            return Found({}, failed=f"its pylock.toml cannot be read: {exc}")
    chosen = selected(output)
    out: dict[str, tuple[Candidate, ...]] = {}
    for package in doc.get("packages", []):
        if not isinstance(package, dict):
            continue
        name = canonical_name(str(package.get("name", "")))
        files = _listed(package, folder)
        pick = chosen.get((name, str(package.get("version", ""))))
        picked = tuple(c for c in files if c.filename == pick)
        out[name] = picked or files
    return Found(out)


def _listed(package: Mapping[str, Any], base: str) -> tuple[Candidate, ...]:
    """The files pylock.toml lists for a package: its wheels, else its one archive or sdist
    (what uv builds from, under --allow-build), else its folder or VCS checkout."""
    wheels = package.get("wheels")
    entries = [w for w in wheels if isinstance(w, dict)] if isinstance(wheels, list) else []
    for kind in ("archive", "sdist", "directory", "vcs"):
        if not entries and isinstance(package.get(kind), dict):
            entries = [package[kind]]
    return tuple(c for c in (_candidate(e, base) for e in entries) if c is not None)


def _candidate(entry: Mapping[str, Any], base: str) -> Candidate | None:
    url, path = entry.get("url"), entry.get("path")
    if isinstance(url, str) and url.startswith("file:"):
        path = unquote(urlsplit(url).path)
    elif isinstance(path, str):
        path = os.path.normpath(os.path.join(base, path))  # pylock.toml's own folder
    hashes = entry.get("hashes")
    sha256 = hashes.get("sha256") if isinstance(hashes, dict) else None
    if isinstance(path, str):
        source: str = path
    elif isinstance(url, str):
        source = _without_credentials(url)
    else:
        return None
    return Candidate(
        source,
        path if isinstance(path, str) else None,
        sha256.lower() if isinstance(sha256, str) else None,
        # as the resolver's "Selecting:" line names it: `+` of a local version unquoted
        str(entry.get("name") or os.path.basename(unquote(urlsplit(source).path))),
    )


def _without_credentials(url: str) -> str:
    """`url` without the user and password an index URL may carry."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    return urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2]))


def decided(found: Found, staged: Distribution) -> Arriving:
    """`staged` (installed by uv into a staging folder) with where its bytes come from."""
    arriving = Arriving(name=staged.name, version=staged.version)
    if found.failed is not None:
        return replace(arriving, source_note=f"uv's resolution did not say: {found.failed}")
    files = found.candidates.get(staged.name, ())
    if not files:
        return replace(arriving, source_note="uv's resolution lists no file for it")
    if len({c.sha256 for c in files}) == 1 and files[0].sha256 is not None:
        # The same file under several names (the same sha256): a local one is named.
        files = tuple(sorted(files, key=lambda c: c.path is None))[:1]
    held = {c.source: _holds(c.path, staged) for c in files if c.path is not None}
    if len(files) == 1:
        if held.get(files[0].source) is False:
            note = (
                "uv staged other bytes than this file's RECORD lists "
                "(uv's cache may hold an older file of this path)"
            )
            return replace(arriving, source=files[0].source, source_note=note)
        return replace(arriving, source=files[0].source)
    # Several files of the name uv chose (two find-links folders, or one and an index, that
    # each hold a build of it): the bytes uv staged are a local one's, or none of them.
    matching = [source for source, holds in held.items() if holds]
    if matching:
        others = [c.source for c in files if c.source != matching[0]]
        note = f"uv's resolution lists {', '.join(others)} too; the files uv staged are this one's"
        return replace(arriving, source=matching[0], source_note=note)
    unread = [c.source for c in files if held.get(c.source) is not False]
    if len(unread) == 1:
        return replace(arriving, source=unread[0])
    if not unread:
        note = "uv staged other bytes than any file its resolution lists holds"
    else:
        note = f"one of {', '.join(unread)}: uv's resolution lists each and does not say which"
    return replace(arriving, source_note=note)


def _holds(path: str, staged: Distribution) -> bool | None:
    """Whether the wheel at `path` lists, with the same hash, every file uv staged from its
    RECORD (what the installer writes or moves out of the site folder aside); None where it
    cannot be read as a wheel (not one: an sdist uv built, a folder)."""
    try:
        with zipfile.ZipFile(path) as wheel:
            names = wheel.namelist()
            record = next((n for n in names if _is_record(n)), None)
            if record is None:
                return None
            text = wheel.read(record).decode("utf-8")
    except (OSError, zipfile.BadZipFile, UnicodeDecodeError, KeyError):
        return None
    installed = {e.path: (e.hash_algorithm, e.hash_digest) for e in staged.records}
    for row in csv.reader(io.StringIO(text)):
        if len(row) < 2 or not row[1] or row[0].split("/", 1)[0].endswith(".data"):
            continue
        if ".dist-info/" in row[0] and os.path.basename(row[0]) in _INSTALLER_FILES:
            continue
        algorithm, _, digest = row[1].partition("=")
        if installed.get(row[0]) != (algorithm, digest.rstrip("=")):
            return False
    return True


def _is_record(name: str) -> bool:
    return name.count("/") == 1 and name.endswith(".dist-info/RECORD")


def annotated(plan: Plan, found: Mapping[str, Arriving]) -> Plan:
    """`plan` with each install and reinstall told where its bytes come from."""
    if not found:
        return plan
    return replace(
        plan,
        install=tuple(found.get(p.name, p) for p in plan.install),
        reinstall=tuple(found.get(p.name, p) for p in plan.reinstall),
    )
