"""The wheels a requirements file installs into an empty environment, as uv resolves it, with
nothing built.

uv is asked twice, for the target interpreter (an empty environment of it):

- `uv pip compile --only-binary :all: --format pylock.toml -v`: per distribution, its version and
  the wheels compatible with the target (URL or path, size, sha256), as PEP 751 writes them
  (uv's crates/uv-resolver/src/lock/export/pylock_toml.rs, `from_resolution`: every wheel
  whose tags the target accepts). Where it lists more than one, the wheel uv installs is the
  one its resolver names in the debug line "Selecting: NAME==VERSION [...] (FILENAME)"
  (crates/uv-resolver/src/resolver/mod.rs, the filename of `dist.for_installation()`),
  else the first in the target's own tag order (packaging.tags, asked in the target);
- `uv pip compile --annotation-style line`: what requires each distribution ("# via torch",
  "# via -r FILE"), so that a finding is blamed on the file's line that brings it in.

`--only-binary :all:` (uv's --no-build, put last by cudatx.uv.pip_argv, whatever the user's
--allow-build says: this resolution never builds): a distribution that exists only as a
source distribution, a local folder or a VCS checkout fails the resolution with uv's
message; nothing is built. A `no-binary` setting would have uv build even so
(cudatx.planning.reqfiles.uvsettings): the caller refuses those before uv is asked
(cudatx.planning.building), and pip_argv refuses a `--no-binary` among OPTIONS.
"""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
import tomllib
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import unquote, urlsplit

from cudatx.errors import EnvironmentNotFound, NeedsBuild
from cudatx.models import Frozen
from cudatx.names import canonical_name
from cudatx.uv import ALLOW_BUILD, UvFailed, annotated_argv, lock_argv, run_uv

FILE = ""  # in `Resolved.parents`: the requirements file itself asks for it

# uv pip compile takes these of a requirements file's global options on its command line
# (`--require-hashes` only uv pip install and sync take).
_COMPILE_FLAGS_DROPPED = {"--require-hashes"}

_SELECTING = re.compile(
    r"Selecting: (?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)==(?P<version>\S+) "
    r"\[[^\]]*\] \((?P<file>[^)]+)\)"
)
_PINNED = re.compile(r"^(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?\s*(?:==|@)")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*")
# pylock.toml's sources other than a wheel (PEP 751), as a message names them.
_UNBUILT = {
    "directory": "a local folder",
    "vcs": "a VCS checkout",
    "sdist": "a source distribution",
    "archive": "a source archive",
}


class Wheel(Frozen):
    """One wheel the resolution installs."""

    name: str  # canonical
    version: str
    filename: str
    url: str | None  # where it is downloaded from (http, https or file)
    path: str | None  # a local file, absolute
    size: int | None  # as the index gave it
    sha256: str | None  # hex, as the index gave it


class Resolved(Frozen):
    wheels: tuple[Wheel, ...]
    # name -> the names of what requires it; FILE for the requirements file itself (empty
    # until annotated() asks)
    parents: tuple[tuple[str, tuple[str, ...]], ...]

    def via(self) -> dict[str, tuple[str, ...]]:
        return dict(self.parents)


def resolve(
    uv: str,
    python: str,
    requirements: str,
    options: Sequence[str],
    *,
    no_deps: bool = False,
    timeout: float | None = None,
) -> Resolved:
    """The wheels `uv pip install -r REQUIREMENTS` would install into the empty environment
    at `python` (its folder); what brings each in is annotated()'s (`parents` empty here).
    `no_deps`: exactly what the file lists (a lock file, `uv pip sync`); `timeout`: the
    seconds uv is given (an index that trickles holds uv for ever: cudatx.uv.run_uv)."""
    # Without ALLOW_BUILD, pip_argv adds --only-binary :all:, last.
    with tempfile.TemporaryDirectory(prefix="cudatx-resolve-") as folder:
        lock = os.path.join(folder, "pylock.toml")  # uv requires the name pylock.toml
        argv = lock_argv(python, requirements, lock, _words(options), no_deps=no_deps)
        output = run_uv(uv, argv, timeout=timeout)
        with open(lock, "rb") as handle:
            text = handle.read().decode("utf-8")
    wheels = read_pylock(text, requirements, selected(output), lambda: target_tags(python))
    return Resolved(wheels=wheels, parents=())


def annotated(
    uv: str,
    python: str,
    requirements: str,
    options: Sequence[str],
    resolved: Resolved,
    *,
    no_deps: bool = False,
    timeout: float | None = None,
) -> Resolved:
    """`resolved` (resolve() of the same file) with what brings each wheel in, from uv's
    annotated resolution, run where something is to be blamed (a second resolution: beside
    every first one it cost a check that finds nothing 0.1 s of 0.9)."""
    argv = annotated_argv(python, requirements, _words(options), no_deps=no_deps)
    parents = read_via(run_uv(uv, argv, timeout=timeout), requirements)
    missing = {w.name for w in resolved.wheels} ^ set(parents)
    if missing:
        raise UvFailed(
            f"uv resolved {requirements} two ways ({', '.join(sorted(missing))}): did the "
            "index change meanwhile? run the check again"
        )
    return Resolved(wheels=resolved.wheels, parents=tuple(sorted(parents.items())))


def _words(options: Sequence[str]) -> list[str]:
    return [w for w in options if w not in _COMPILE_FLAGS_DROPPED and w != ALLOW_BUILD]


def selected(output: str) -> dict[tuple[str, str], str]:
    """(name, version) -> the wheel file the resolver chose, from uv's debug lines; the last
    line for a name and version wins (backtracking may select it again)."""
    out: dict[tuple[str, str], str] = {}
    for match in _SELECTING.finditer(output):
        out[(canonical_name(match["name"]), match["version"])] = match["file"].strip()
    return out


def read_via(text: str, requirements: str) -> dict[str, tuple[str, ...]]:
    """name -> what requires it, from `uv pip compile --annotation-style line` output."""
    out: dict[str, tuple[str, ...]] = {}
    for line in text.splitlines():
        spec, _, via = line.partition("# via ")
        match = _PINNED.match(spec.strip())
        if match is None:
            continue
        parents: list[str] = []
        for item in (v.strip() for v in via.split(", ")):
            if item.startswith(("-r ", "-c ")) or item == requirements:
                parents.append(FILE)
            elif (name := _NAME.match(item)) is not None:
                parents.append(canonical_name(name.group(0)))
        out[canonical_name(match["name"])] = tuple(dict.fromkeys(parents))
    return out


def _table(value: object, where: str) -> Mapping[str, Any]:
    if not isinstance(value, dict):
        raise UvFailed(f"uv's pylock.toml: {where} is not a table")
    return value


def _wheel(name: str, version: str, entry: Mapping[str, Any], base: str) -> Wheel:
    url = entry.get("url")
    path = entry.get("path")
    if isinstance(url, str) and url.startswith("file:"):
        path = unquote(urlsplit(url).path)
    elif isinstance(path, str):
        path = os.path.normpath(os.path.join(base, path))
    filename = entry.get("name") or os.path.basename(
        unquote(urlsplit(url).path) if isinstance(url, str) else str(path or "")
    )
    hashes = entry.get("hashes") if isinstance(entry.get("hashes"), dict) else {}
    size = entry.get("size")
    sha256 = hashes.get("sha256") if hashes else None
    return Wheel(
        name=name,
        version=version,
        filename=str(filename),
        url=url if isinstance(url, str) else None,
        path=path if isinstance(path, str) else None,
        size=size if isinstance(size, int) else None,
        sha256=sha256.lower() if isinstance(sha256, str) else None,
    )


def read_pylock(
    text: str,
    requirements: str,
    chosen: Mapping[tuple[str, str], str],
    tags: Any,
) -> tuple[Wheel, ...]:
    """The wheel of each package of uv's pylock.toml. `chosen`: see `selected`; `tags()`:
    the target's tags, best first, asked only where a package lists several wheels that
    `chosen` does not decide between."""
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise UvFailed(f"uv's pylock.toml is not TOML: {exc}") from None
    base = os.path.dirname(os.path.abspath(requirements))
    out = []
    ranked: list[str] | None = None
    for table in doc.get("packages", []):
        package = _table(table, "a package")
        name = canonical_name(str(package.get("name", "")))
        version = str(package.get("version", ""))
        listed = package.get("wheels")
        archive = package.get("archive")
        if isinstance(listed, list) and listed:
            wheels = [_wheel(name, version, _table(w, name), base) for w in listed]
        elif isinstance(archive, dict) and str(
            archive.get("url") or archive.get("path") or ""
        ).endswith(".whl"):
            wheels = [_wheel(name, version, archive, base)]
        else:
            # uv resolves a local folder's static metadata without building it; installing
            # it would build it. NeedsBuild, as the check names such a line before uv runs
            # (cudatx.planning.building): one situation, one exit code (16).
            kind = next((k for k in _UNBUILT if k in package), "no wheel")
            raise NeedsBuild(
                f"{name} ({_UNBUILT.get(kind, kind)}) can only be checked by building it: "
                "the check without an environment never builds; pass --fresh (or --python) "
                "with --allow-build"
            )
        if len(wheels) == 1:
            out.append(wheels[0])
            continue
        pick = chosen.get((name, version))
        found = next((w for w in wheels if w.filename == pick), None)
        if found is None:
            ranked = tags() if ranked is None else ranked
            found = min(wheels, key=lambda w: _rank(w.filename, ranked))
        out.append(found)
    return tuple(out)


def _rank(filename: str, ranked: Sequence[str]) -> int:
    """The best (lowest) position in `ranked` of any tag of a wheel file's name."""
    from packaging.utils import InvalidWheelFilename, parse_wheel_filename

    try:
        _, _, _, tags = parse_wheel_filename(filename)
    except InvalidWheelFilename:
        return len(ranked)
    order = {t: i for i, t in enumerate(ranked)}
    return min((order.get(str(t), len(ranked)) for t in tags), default=len(ranked))


# Runs in the target interpreter, with cudatx's own `packaging` first on its path (pure
# Python, any Python 3.8 and later): its tags, best first, as pip ranks wheels.
_TAGS = "import sys; sys.path.insert(0, sys.argv[1]); from packaging import tags; " + (
    "print('\\n'.join(str(t) for t in tags.sys_tags()))"
)


def target_tags(python: str) -> list[str]:
    """The tags the interpreter of the environment at `python` accepts, best first."""
    import packaging

    interpreter = os.path.join(python, "bin", "python")
    where = os.path.dirname(os.path.dirname(os.path.abspath(packaging.__file__)))
    try:
        done = subprocess.run(
            [interpreter, "-I", "-S", "-c", _TAGS, where],
            capture_output=True,
            text=True,
            check=False,
            stdin=subprocess.DEVNULL,
            timeout=60,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise EnvironmentNotFound(f"{interpreter} cannot say its wheel tags: {exc}") from None
    if done.returncode != 0:
        raise EnvironmentNotFound(
            f"{interpreter} cannot say its wheel tags: {done.stderr.strip()[-200:]}"
        )
    return done.stdout.split()
