"""Which distributions a SPEC names: a name, a glob over names, `cuda:N`, or `-r FILE`."""

from __future__ import annotations

import fnmatch
import re
from pathlib import Path

from packaging.requirements import InvalidRequirement
from packaging.utils import canonicalize_name

from cudatx.dists import parse_requirement
from cudatx.errors import NotInEnvironment, UnreadableFile, UsageError
from cudatx.models import Distribution
from cudatx.scan import Environment

_GLOB = set("*?[")
_COMMENT = re.compile(r"(^|\s+)#.*$")  # pip's rule: '#' at the start or after whitespace
_OPTION = re.compile(r"\s+--?[A-Za-z]")  # a requirement's own options: `pkg==1 --hash=...`


def _cuda(env: Environment, spec: str) -> list[Distribution]:
    from cudatx.facts import cuda_major_of_dist

    text = spec.partition(":")[2]
    if not text.isdigit():
        raise UsageError(f"{spec}: expected cuda:N with N a CUDA major, e.g. cuda:12")
    major = int(text)
    out = []
    for dist in env.distributions:
        classified = cuda_major_of_dist(env, dist)
        if classified is not None and classified.major == major:
            out.append(dist)
    return out


def _one(env: Environment, spec: str) -> list[Distribution]:
    if spec.lower().startswith("cuda:"):
        return _cuda(env, spec)
    if _GLOB & set(spec):
        # Names compare canonical (PEP 503), so the pattern is lowered and its separators
        # unified the same way; the glob characters themselves survive.
        pattern = spec.lower().replace("_", "-").replace(".", "-")
        return [d for d in env.distributions if fnmatch.fnmatchcase(d.name, pattern)]
    name = canonicalize_name(spec)
    return [d for d in env.distributions if d.name == name]


def _logical_lines(text: str) -> list[tuple[int, str]]:
    """pip's reading of a requirements file: comments stripped, `\\` continuations joined,
    and per-requirement options (`--hash=...`, as pip-compile writes) cut off."""
    out: list[tuple[int, str]] = []
    pending = ""
    start = 0
    for number, raw in enumerate(text.splitlines(), start=1):
        line = _COMMENT.sub("", raw)
        if not pending:
            start = number
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        line = (pending + line).strip()
        pending = ""
        line = _OPTION.split(line, maxsplit=1)[0].strip()
        if line and not line.startswith("-"):  # pip options: -r, -c, --index-url, ...
            out.append((start, line))
    if pending.strip():
        out.append((start, _OPTION.split(pending.strip(), maxsplit=1)[0].strip()))
    return out


def _requirements(path: str) -> list[str]:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise UnreadableFile(f"{path}: not UTF-8 text ({exc.reason})", path=path) from None
    except OSError as exc:
        raise UnreadableFile(f"{path}: {exc.strerror or exc}", path=path) from None
    names = []
    for number, line in _logical_lines(text):
        try:
            names.append(parse_requirement(line).name)
        except InvalidRequirement as exc:
            first = str(exc).splitlines()[0]  # packaging repeats the line with a caret below
            raise UsageError(f"{path}:{number}: not a requirement: {first}") from None
    return names


def select(
    env: Environment, specs: tuple[str, ...], requirement_files: tuple[str, ...] = ()
) -> tuple[Distribution, ...]:
    """The distributions to act on, in installed order; a SPEC matching nothing is an error."""
    wanted = list(specs) + [n for f in requirement_files for n in _requirements(f)]
    if not wanted:
        raise UsageError("nothing to remove: give at least one SPEC or -r FILE")
    chosen: dict[str, Distribution] = {}
    for spec in wanted:
        matched = _one(env, spec)
        if not matched:
            raise NotInEnvironment(f"{spec} matches no installed distribution", path=spec)
        for dist in matched:
            chosen.setdefault(dist.name, dist)
    return tuple(d for d in env.distributions if d.name in chosen)
