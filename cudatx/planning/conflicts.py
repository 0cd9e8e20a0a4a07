"""Two distributions that install the same path with different bytes, found from their
wheels' RECORDs before anything is installed.

uv (like pip) installs one wheel after another and overwrites a path another wheel wrote:
the last one wins the bytes, and uninstalling either later deletes every path its RECORD
lists, leaving the other installed but hollow (design.md, section 1; uv issue #15238). A
path both RECORDs list with the same hash is no finding: whichever wins, the bytes are the
same (`nvidia/__init__.py`, empty in every NVIDIA wheel). A path a RECORD lists without a
hash cannot be compared: it is said, never counted.

Each distribution is blamed on the lines of the requirements file that bring it in: its own
line, or the lines of what requires it (uv's `# via` annotations, cudatx.planning.resolve),
each with whether this change made it (git's committed version of the file).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence

from cudatx.models import Frozen
from cudatx.paths import is_library_name
from cudatx.planning.reqfiles import Pin
from cudatx.planning.resolve import FILE, Resolved
from cudatx.planning.wheelrecords import Layout, WheelRecord

THIS_CHANGE = "this change"
UNCHANGED = "unchanged since the last commit"
NOT_IN_GIT = "not in git"


class Line(Frozen):
    """A line of the requirements file."""

    line: int
    text: str
    source: str  # the file it is written in (an included file for `-r`)
    state: str  # THIS_CHANGE, UNCHANGED or NOT_IN_GIT


class Brought(Frozen):
    """A distribution the file installs, and the lines that bring it in."""

    name: str
    version: str
    direct: bool  # a line of the file names it
    lines: tuple[Line, ...]  # its own line, else the lines of what requires it


class Conflict(Frozen):
    first: Brought
    second: Brought
    paths: tuple[str, ...]  # both install them, with other bytes (libraries first)
    same: int  # how many paths both install with the same bytes (no finding)
    message: str
    fix: tuple[str, ...]


class Unhashed(Frozen):
    """Paths two distributions both install that a RECORD gives no hash for."""

    first: str
    second: str
    paths: tuple[str, ...]


def _state(pin: Pin, committed: Mapping[str, Pin] | None) -> str:
    if committed is None:
        return NOT_IN_GIT
    was = committed.get(pin.name)
    return UNCHANGED if was is not None and was.text == pin.text else THIS_CHANGE


class Blamer:
    """Who brings each distribution in: the file's pins, uv's `# via` graph, and the pins of
    the committed file (None where git does not track it)."""

    def __init__(
        self, pins: Sequence[Pin], resolved: Resolved, committed: Sequence[Pin] | None
    ) -> None:
        self.pins = {p.name: p for p in pins}
        self.via = resolved.via()
        self.versions = {w.name: w.version for w in resolved.wheels}
        self.committed = {p.name: p for p in committed} if committed is not None else None

    def _line(self, pin: Pin) -> Line:
        return Line(
            line=pin.line, text=pin.text, source=pin.source, state=_state(pin, self.committed)
        )

    def brought(self, name: str) -> Brought:
        parents = self.via.get(name, ())
        direct = FILE in parents and name in self.pins
        lines: tuple[Line, ...]
        if direct:
            lines = (self._line(self.pins[name]),)
        else:
            roots: dict[str, None] = {}
            seen = {name}
            stack = list(parents)
            while stack:
                parent = stack.pop()
                if parent in seen or parent == FILE:
                    continue
                seen.add(parent)
                if FILE in self.via.get(parent, ()) and parent in self.pins:
                    roots.setdefault(parent)
                stack.extend(self.via.get(parent, ()))
            ordered = sorted(roots, key=lambda n: self.pins[n].line)
            lines = tuple(self._line(self.pins[n]) for n in ordered)
        return Brought(name=name, version=self.versions.get(name, ""), direct=direct, lines=lines)


def _ordered(paths: Sequence[str]) -> tuple[str, ...]:
    """Shared libraries first (what breaks loading), then the rest, each sorted."""
    return tuple(sorted(paths, key=lambda p: (not is_library_name(os.path.basename(p)), p)))


def find_conflicts(
    records: Sequence[WheelRecord],
    layout: Layout,
    blame: Callable[[], Blamer],
    majors: Mapping[str, int],
) -> tuple[tuple[Conflict, ...], tuple[Unhashed, ...]]:
    """Every pair of distributions that install a path with different bytes. `blame`: who
    brings each in, asked only where two conflict (it may ask uv); `majors`: the CUDA major
    of a distribution where its name says it (for the fix's wording)."""
    # path -> distribution -> the digests its RECORD gives the path (None: no hash). One pass
    # over the rows, each distribution once per path: a RECORD that lists one path 60,000
    # times (an index's, issue 31) costs 60,000 dict updates, not 60,000 squared pairs.
    listed: dict[str, dict[str, set[str | None]]] = {}
    for record in records:
        name = record.wheel.name
        for entry in record.entries:
            digest = f"{entry.hash_algorithm}={entry.hash_digest}" if entry.hash_digest else None
            listed.setdefault(entry.path, {}).setdefault(name, set()).add(digest)
    differ: dict[tuple[str, str], list[str]] = {}
    same: dict[tuple[str, str], int] = {}
    unknown: dict[tuple[str, str], list[str]] = {}
    for path, owners in listed.items():
        if len(owners) < 2:
            continue  # one distribution, however often its RECORD lists the path
        names = sorted(owners)
        for i, a in enumerate(names):
            for b in names[i + 1 :]:
                hashes_a, hashes_b = owners[a], owners[b]
                if None in hashes_a or None in hashes_b:
                    unknown.setdefault((a, b), []).append(layout.display(path))
                elif hashes_a == hashes_b and len(hashes_a) == 1:
                    same[(a, b)] = same.get((a, b), 0) + 1
                else:
                    differ.setdefault((a, b), []).append(layout.display(path))
    conflicts = _told(differ, same, blame(), majors) if differ else ()
    unhashed = tuple(
        Unhashed(first=a, second=b, paths=_ordered(paths))
        for (a, b), paths in sorted(unknown.items())
        if (a, b) not in differ
    )
    return conflicts, unhashed


def _told(
    differ: Mapping[tuple[str, str], Sequence[str]],
    same: Mapping[tuple[str, str], int],
    blamer: Blamer,
    majors: Mapping[str, int],
) -> tuple[Conflict, ...]:
    """find_conflicts' conflicts: each pair, its paths, who brings each side in, the fix."""
    conflicts = []
    for (a, b), paths in sorted(differ.items()):
        first, second = blamer.brought(a), blamer.brought(b)
        ordered = _ordered(paths)
        more = f" (and {len(ordered) - 1} more)" if len(ordered) > 1 else ""
        conflicts.append(
            Conflict(
                first=first,
                second=second,
                paths=ordered,
                same=same.get((a, b), 0),
                message=(
                    f"{a} and {b} both install {ordered[0]}{more} with different bytes: "
                    "whichever uv installs last wins, and removing either later breaks the other"
                ),
                fix=fixes(first, second, majors),
            )
        )
    return tuple(conflicts)


def culprits(first: Brought, second: Brought) -> tuple[Brought, ...]:
    """The side(s) to blame: the one whose lines this change made, where only one has such
    lines; else the one a line names, where the other only comes in as what something
    requires (the seed's `nvidia-cudnn-cu13` line beside torch's own cuDNN); else both."""
    both = (first, second)
    edited = [b for b in both if any(ln.state == THIS_CHANGE for ln in b.lines)]
    if len(edited) == 1:
        return (edited[0],)
    pool = edited or list(both)
    named = [b for b in pool if b.direct]
    return (named[0],) if len(named) == 1 else tuple(pool)


def _at(line: Line) -> str:
    return f"line {line.line} ({line.text})"


def fixes(first: Brought, second: Brought, majors: Mapping[str, int]) -> tuple[str, ...]:
    """Drop the line that brings a side in (the one this change made, where it is one), or,
    where that line names it and its twin comes from another line, ask for the twin there:
    the build (the CUDA major) that the other line requires."""
    out: list[str] = []
    for culprit in culprits(first, second):
        twin = second if culprit is first else first
        lines = [ln for ln in culprit.lines if ln.state == THIS_CHANGE] or list(culprit.lines)
        lead = "or " if out else ""  # the other side: either fix does
        for line in lines:
            if culprit.direct:
                out.append(f"{lead}drop {_at(line)}")
            else:
                verb = "revert" if line.state == THIS_CHANGE else "drop"
                out.append(f"{lead}{verb} {_at(line)}, which brings {culprit.name} in")
            lead = ""
        if culprit.direct and not twin.direct and twin.lines and lines:
            wanted = ", ".join(_at(ln) for ln in twin.lines)
            major = majors.get(twin.name)
            build = f"the CUDA {major} build" if major is not None else "the build"
            if majors.get(culprit.name) == major:
                build = "the build"
            out.append(
                f"or, on line {lines[0].line}, ask for {twin.name} instead of "
                f"{culprit.name}: {build} that {wanted} requires"
            )
    if not out:
        out.append(f"install either {first.name} or {second.name}, not both")
    return tuple(out)
