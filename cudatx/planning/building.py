"""What can only be had by building it, found before uv is asked: building runs code.

Building a distribution runs its `setup.py` or its build backend: code from whoever wrote the
requirement, and a compile that may take an hour (flash-attn is an sdist on the index). A dry
run, `check-requirements` and the pre-commit hook must run nothing, so uv is asked with
`--no-build` (cudatx.uv.pip_argv) unless the user passes `--allow-build`.

uv's --no-build does not cover everything. uv 0.13.9 still builds an editable (`-e DIR`) to
read its metadata (its setup.py ran twice during `uv pip install --dry-run --no-build -e
DIR`), so what the requirements name directly is classified here, before uv runs: an
editable, a local folder, a VCS URL (`git+...`), or an archive that is not a wheel (an sdist,
by path or URL) can only be had by building it. A name uv finds on an index or in
--find-links is uv's to judge: under --no-build it refuses what has only an sdist, and
cudatx.uv says that in the same one line (NeedsBuild).

Nor does uv's --no-build (or --only-binary :all:) hold against a `no-binary` setting: a
package a requirements file's `--no-binary NAME`, a constraints file's, or uv's
configuration names is built even then (cudatx.planning.reqfiles.uvsettings says how).
Those settings say the real install builds it, so a plan of its wheel would judge another
distribution: they are named here too (`unbuilt_settings`, a file's `builds`), and refused.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING
from urllib.parse import unquote, urlsplit

from cudatx.errors import CudatxError, NeedsBuild, needs_build

if TYPE_CHECKING:
    # Read only where a -r file is given: a warm plan of names imports no packaging
    # (tests/test_codec.py), and the requirements readers import it.
    from cudatx.planning.reqfiles import Pin

# The schemes of pip's VCS URLs (pip's vcs backends; uv reads git+ only, and refuses the
# rest, which would be built too).
_VCS = ("git+", "hg+", "svn+", "bzr+")
# Files uv reads as projects to build when given with -r (a setup.py or setup.cfg is run or
# read by the build backend to know what it requires).
_BUILT_SOURCES = ("setup.py", "setup.cfg")


def built(reference: str, *, editable: bool = False) -> bool:
    """Whether a direct reference (a URL or a path, as written) can only be had by
    building it: everything but a wheel, and any editable."""
    if editable or reference.lower().startswith(_VCS):
        return True
    try:
        parts = urlsplit(reference)
        path = unquote(parts.path) if parts.scheme else reference.split("#", 1)[0]
    except ValueError:
        return True  # not a URL anything can fetch a wheel from
    return not path.rstrip("/").endswith(".whl")


def _pin_label(pin: Pin) -> str:
    where = os.path.basename(pin.source)
    text = f"-e {pin.text}" if pin.editable and not pin.text.startswith("-") else pin.text
    return f"{pin.name} ({where}:{pin.line}: {text})"


def unbuilt_settings(markers: Mapping[str, str]) -> list[str]:
    """What uv would build, here, whatever cudatx tells it: the `no-binary` settings of
    the configuration `uv pip` reads (uv.toml, a pyproject.toml's `[tool.uv]`; the project's,
    the user's, the system's, or UV_CONFIG_FILE's) and of the requirements files that
    UV_CONSTRAINT and UV_OVERRIDE name, each named with where it is said. uv runs in
    cudatx's working folder and environment, so those are the ones read."""
    from cudatx.planning.reqfiles import read_requirements
    from cudatx.planning.reqfiles.uvsettings import built_by_config, env_files

    cwd, environ = os.getcwd(), dict(os.environ)
    found = built_by_config(cwd, environ)
    for variable, path in env_files(cwd, environ):
        try:
            read = read_requirements(path, markers=markers)
        except CudatxError:
            continue  # uv refuses what it cannot read: nothing builds
        for label in read.builds:  # "NAME (FILE:LINE: ...)" -> "NAME (VARIABLE: FILE:LINE: ...)"
            what, _, where = label.partition(" (")
            found.append(f"{what} ({variable}: {where}")
    return found


def unbuilt_pins(pins: Iterable[Pin]) -> list[str]:
    """The pins that can only be had by building them, named with their line."""
    return [
        _pin_label(p)
        for p in pins
        if p.editable or (p.url is not None and built(p.url, editable=p.editable))
    ]


def refuse(what: Sequence[str]) -> None:
    if what:
        raise NeedsBuild(needs_build(list(what)))


def _spec_reference(spec: str) -> str | None:
    """The direct reference of a SPEC as uv reads one on its command line: `name @ URL`, or
    a bare path or URL; None for a name (with extras, versions, markers)."""
    from packaging.requirements import InvalidRequirement, Requirement

    try:
        return Requirement(spec).url
    except InvalidRequirement:
        return spec  # not PEP 508: uv reads it as a path or a URL


def unbuilt_args(command: str, args: Sequence[str], markers: Mapping[str, str]) -> list[str]:
    """What `uv pip COMMAND ARGS` (install: SPECs and `-r FILE`s; sync: FILEs) can only get by
    building: direct references in SPECs, and in the files and the files they include."""
    found: list[str] = []
    files: list[str] = []
    words = iter(args)
    for word in words:
        if command == "sync":
            files.append(word)
        elif word in ("-r", "--requirement"):
            files.append(next(words, ""))
        else:
            reference = _spec_reference(word)
            if reference is not None and built(reference):
                found.append(word)
    for path in files:
        if os.path.basename(path) in _BUILT_SOURCES:
            found.append(f"{path} (a project uv would build to read)")
            continue
        from cudatx.planning.reqfiles import read_requirements

        read = read_requirements(path, markers=markers)
        found += [*unbuilt_pins(read.entries), *read.builds]
    return found


def unbuilt_specs(specs: Iterable[str]) -> list[str]:
    """The uv specs (`name==version`, `name @ URL`) that name something to build."""
    out = []
    for spec in specs:
        name, at, url = spec.partition(" @ ")
        if at and built(url):
            out.append(f"{name} ({url})")
    return out
