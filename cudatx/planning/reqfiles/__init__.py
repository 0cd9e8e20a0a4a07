"""Every requirements format cudatx checks, read into one shape: the pins that apply to a target.

Four formats, chosen by file name (`kind_of`):

- pip/uv requirements files (`*.txt`, `*.in`, and any name cudatx cannot place);
- `pyproject.toml`: `[project] dependencies` and the optional groups asked for;
- `uv.lock`: what `uv sync` would install for the target, walked from the project;
- `pylock.toml` / `pylock.<name>.toml` (PEP 751): the packages whose markers hold.

Markers are evaluated for the target interpreter; an entry whose marker is false is not
returned. Malformed input is one UsageError line naming the file (and the line where there is
one); a file that cannot be read is UnreadableFile. Nothing else escapes.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

from cudatx.planning.reqfiles.common import Pin, RequirementsFile, parse_toml, read_text
from cudatx.planning.reqfiles.pylock import read_pylock
from cudatx.planning.reqfiles.pyproject import read_pyproject
from cudatx.planning.reqfiles.txt import RequirementsReader, read_requirements_text
from cudatx.planning.reqfiles.uvlock import UvLock
from cudatx.planning.reqfiles.uvsettings import built_by, settings_in, uv_table

__all__ = ["Pin", "RequirementsFile", "kind_of", "read_requirements"]

_PYLOCK = re.compile(r"^pylock\.([^.]+\.)?toml$")  # the spec's own pattern for any lock name


def kind_of(path: str) -> str | None:
    """The format of a file, by its name; None when cudatx does not read that kind of file."""
    name = os.path.basename(path)
    if name == "pyproject.toml":
        return "pyproject"
    if name == "uv.lock":
        return "uv.lock"
    if _PYLOCK.match(name):
        return "pylock"
    if name.lower().endswith((".txt", ".in")):
        return "requirements"
    return None


def read_requirements(
    path: str,
    *,
    markers: Mapping[str, str],
    extras: tuple[str, ...] = (),
    text: str | None = None,
) -> RequirementsFile:
    """Read `path` (or `text` as if it were that file: `-r` includes are still read from disk,
    relative to path's folder). A name `kind_of` cannot place is read as a requirements file,
    as pip and uv do with `-r`. `extras` choose optional dependencies (pyproject, uv.lock,
    pylock); a requirements file has none."""
    kind = kind_of(path) or "requirements"
    if kind == "requirements":
        if text is None:
            text = read_requirements_text(path)
        reader = RequirementsReader(markers)
        reader.read(path, text)
        return RequirementsFile(
            path=path,
            kind=kind,
            entries=tuple(reader.entries),
            lock=False,
            options=tuple(reader.options),
            builds=tuple(reader.builds),
        )
    if text is None:
        text = read_text(path)
    doc = parse_toml(path, text)
    builds: list[str] = []
    if kind == "pyproject":
        entries = read_pyproject(path, text, doc, markers, extras)
        # Its `[tool.uv] no-binary` settings: the project says they are built from source
        # (uv reads them as this project's configuration).
        table = uv_table(path, doc)
        builds = built_by([settings_in(path, table, text)]) if table is not None else []
    elif kind == "uv.lock":
        entries = UvLock(path, text, doc, markers).installed(extras)
    else:
        entries = read_pylock(path, text, doc, markers, extras)
    return RequirementsFile(
        path=path,
        kind=kind,
        entries=tuple(entries),
        lock=kind != "pyproject",
        options=(),
        builds=tuple(builds),
    )
