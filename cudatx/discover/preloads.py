"""What a package's __init__.py preloads by hand before its extension module (torch's, with
ctypes), read from the installed source where a framework reader reads it, else the shipped
table of its release (cudatx/data/loadlists.json).

Which reader reads a package's source is its load list's `reader`: a registered framework
reader that declares `read_preloads` (cudatx.discover.frameworks.PreloadReader; torch's is in
cudatx.discover.frameworks.torch). A source of a shape the reader does not know is reported,
and the shipped table of that release is used instead.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

from cudatx.cache import file_key, memo_file
from cudatx.discover.catalog import LoadList, Preloads, preloads_from_json, preloads_to_json
from cudatx.discover.frameworks import PreloadReader, preload_reader
from cudatx.discover.frameworks.source import Shape
from cudatx.reading import MAX_METADATA, read_bounded

if TYPE_CHECKING:
    from cudatx.cache import ScanCache

# A package's __init__.py parsed, by file state: a plan reads it once per replay, and
# parsing torch's 3,000 lines took 50 ms. Across runs the scan cache keeps the result.
_PARSED: dict[tuple[str, str, str], Preloads] = {}


def _read(reader: PreloadReader, source: str, cache: ScanCache | None) -> Preloads:
    """The preloads `reader` reads of `source`; raises OSError, SyntaxError, ValueError,
    Shape."""
    st = os.stat(source)
    seen = (source, *file_key(st))
    if seen in _PARSED:
        return _PARSED[seen]
    parsed = memo_file(
        cache,
        "preloads",
        st,
        lambda: reader.read_preloads(read_bounded(source, MAX_METADATA).decode("utf-8"), source),
        load=lambda text: preloads_from_json(json.loads(text)),
        dump=lambda found: json.dumps(preloads_to_json(found)),
    )
    _PARSED[seen] = parsed
    return parsed


def read_preloads(
    load_list: LoadList,
    package_dir: str,
    version: str,
    cache: ScanCache | None = None,
    real: Callable[[str], str] = str,
) -> Preloads:
    """What the installed package preloads: read from its source where cudatx has a reader
    and the source has a shape it knows, else the shipped table of that release (saying
    why), else none. `real` maps a path to the file holding its bytes (a staged file, in a
    simulation)."""
    source = os.path.join(package_dir, "__init__.py")
    reason = "no reader for this package"
    reader = preload_reader(load_list.reader)
    if reader is not None:
        try:
            read = _read(reader, real(source), cache)
            return replace(read, origin=f"read from {source}")
        except (OSError, SyntaxError, ValueError, Shape) as exc:
            reason = f"{source}: {exc}"
    release = ".".join(version.split("+")[0].split(".")[:2])
    table = load_list.releases.get(release)
    if table is None:
        return Preloads.none(f"no load list for {load_list.distribution} {release} ({reason})")
    shipped = f"shipped table for {load_list.distribution} {release} ({reason})"
    return replace(table, origin=shipped)
