"""`check-requirements`: would bringing the environment in line with a file break loading?

A file that pins every installed distribution (as `uv pip freeze` writes it), or a lock
file, is the complete environment: bringing the environment in line means `uv pip sync`,
which uninstalls what the file no longer lists. Any other file means `uv pip install -r`.
Either way the transaction is planned as `cudatx sync`/`install` plans it (uv's dry run,
staged, simulated). Where git tracks the file, the committed version is read too, so that
each distribution the plan touches is blamed on the line that changed.

Where there is no environment (CI, a fresh clone), the file is judged by itself: the wheels
uv resolves it to for an empty environment of the target interpreter, nothing built
(cudatx.planning.resolve), and their RECORDs (cudatx.planning.wheelrecords), so that two
distributions that would write the same path with different bytes are found
(cudatx.planning.conflicts). `--fresh` does that and also plans the whole install into the
empty environment, judging its loads as any plan does.
"""

from __future__ import annotations

import functools
import os
import re
import subprocess
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import replace

from cudatx.analysis.commands import cudatx_line
from cudatx.analysis.cuda import cuda_major_of_name
from cudatx.cache import ScanCache
from cudatx.environment import Environment
from cudatx.errors import CudatxError, NeedsBuild, UsageError, needs_build
from cudatx.models import Frozen, PythonTarget
from cudatx.names import canonical_name
from cudatx.planning import building
from cudatx.planning.change import Planning, Proposal, propose
from cudatx.planning.conflicts import (
    THIS_CHANGE,
    Blamer,
    Brought,
    Conflict,
    Unhashed,
    find_conflicts,
)
from cudatx.planning.lazyzip import Deadlines
from cudatx.planning.models import Plan
from cudatx.planning.plan import PlanOptions, plan_change
from cudatx.planning.reqfiles import Pin, RequirementsFile, read_requirements
from cudatx.planning.resolve import Resolved, annotated, resolve
from cudatx.planning.wheelrecords import (
    WheelRead,
    WheelRecord,
    host_of,
    layout_of,
    read_records,
)
from cudatx.uv import UvFailed, UvTimedOut

# What `uv pip sync` keeps though a file does not list it (seen with uv 0.13.9: a freeze
# without pip and setuptools syncs to "Would make no changes").
SEED = frozenset({"pip", "setuptools", "wheel"})
_NAME = re.compile(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)")  # a requirement's project name


class Blame(Frozen):
    name: str  # the distribution the plan changes
    change: str  # "uninstall", "install" or "upgrade"
    line: int | None  # in the file now (install, upgrade) or in the committed one (uninstall)
    text: str | None  # that line as written
    edited: bool  # the line differs from the committed version (False: no git, or drift)


Judge = Callable[[Proposal, tuple[str, ...]], Plan]
"""A trial of a proposal (cudatx.trial), run by the command line: the plan it returns."""


class Check:
    """What `FileCheck.check` says was checked."""

    ENVIRONMENT = "environment"  # the change to an existing environment, planned
    CONFLICTS = "conflicts"  # no environment: the wheels' paths only
    FRESH = "fresh"  # the install into an empty environment, planned, and the wheels' paths


class FileCheck(Frozen):
    path: str
    kind: str
    mode: str  # "sync" or "install"
    committed: bool  # a committed version was compared
    plan: Plan | None  # None: no plan was made (Check.CONFLICTS)
    blame: tuple[Blame, ...]
    fix: tuple[str, ...]
    command: str  # the cudatx command that plans this file's change, as its plan repeats it
    check: str = Check.ENVIRONMENT
    safe: bool = True  # the plan is safe and no two wheels write a path with other bytes
    # Without an environment: the wheels' paths, what the plan's findings name (with the
    # lines that bring each in), and how each wheel's RECORD was read.
    conflicts: tuple[Conflict, ...] = ()
    unhashed: tuple[Unhashed, ...] = ()
    brought: tuple[Brought, ...] = ()
    wheels: tuple[WheelRead, ...] = ()
    python: str | None = None  # the version of the empty environment's interpreter


def committed_text(path: str) -> str | None:
    """The file as the last commit has it; None where git does not track it."""
    folder = os.path.dirname(os.path.abspath(path)) or "."
    try:
        done = subprocess.run(
            ["git", "-C", folder, "show", f"HEAD:./{os.path.basename(path)}"],
            capture_output=True,
            check=False,
        )
    except OSError:
        return None  # no git on this machine: nothing to blame against
    if done.returncode != 0:
        return None
    try:
        return done.stdout.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _read(
    path: str, target: PythonTarget, extras: tuple[str, ...]
) -> tuple[RequirementsFile, RequirementsFile | None]:
    """The file now, and as committed (None where git does not track it)."""
    now = read_requirements(path, markers=target.markers, extras=extras)
    text = committed_text(path)
    before = None
    if text is not None:
        try:
            before = read_requirements(path, markers=target.markers, extras=extras, text=text)
        except CudatxError:
            before = None  # a committed version that does not parse blames nothing
    return now, before


def _pinned(pin: Pin) -> bool:
    return pin.version is not None or pin.url is not None


def _complete(env: Environment, files: Sequence[RequirementsFile]) -> bool:
    """Whether the file (now or as committed) stands for the whole environment: a lock; or
    pins that list every installed distribution, or that are closed under what they require
    here (a freeze with a line dropped, or a comment added after one was: the mode must not
    flip between two commits of the same pins, cudatx#26)."""
    if any(f.lock for f in files):
        return True
    if not files or not all(_pinned(p) for f in files for p in f.entries):
        return False
    listed = {p.name for f in files for p in f.entries}
    if all(d.name in listed or d.name in SEED for d in env.distributions):
        return True
    return any(_closed(env, f) for f in files)


def _closed(env: Environment, file: RequirementsFile) -> bool:
    """Whether the file is a freeze of this environment less some of its leaves: every
    requirement of each distribution it pins, as installed here, names one it pins too, and
    what it does not list is required by nothing installed (a package the user dropped). A
    hand-written list of top-level pins fails one or the other: it leaves out what its pins
    require, or what the rest of the environment requires."""
    from cudatx.discover.dists import applicable_requirements

    listed = {p.name for p in file.entries} | SEED
    markers = env.target.markers
    required: dict[str, set[str]] = {
        d.name: {canonical_name(r.name) for r in applicable_requirements(d, markers)}
        for d in env.distributions
    }
    if not any(name in required for name in listed):
        return False
    needed = set().union(*(required[name] for name in listed if name in required))
    unlisted = set(required) - listed
    needed_by_any = set().union(*required.values())
    return needed <= listed and not (unlisted & needed_by_any)


def _write(pins: Sequence[Pin], folder: str) -> str:
    path = os.path.join(folder, "requirements.txt")
    lines = [("-e " + (p.url or p.requirement)) if p.editable else p.requirement for p in pins]
    with open(path, "w", encoding="utf-8") as handle:
        handle.write("\n".join(lines) + "\n")
    return path


def _blame(plan: Plan, now: RequirementsFile, before: RequirementsFile | None) -> tuple[Blame, ...]:
    current = {p.name: p for p in now.entries}
    old = {p.name: p for p in before.entries} if before else {}
    out = []
    arriving = {n.name for n in plan.install}
    for nv in plan.remove:
        if nv.name in arriving:
            continue  # an upgrade: blamed on the line that asks for the new version
        pin = old.get(nv.name)
        out.append(
            Blame(
                name=nv.name,
                change="uninstall",
                line=pin.line if pin else None,
                text=pin.text if pin else None,
                edited=pin is not None and nv.name not in current,
            )
        )
    upgraded = {n.name for n in plan.remove}
    for new in plan.install:
        pin = current.get(new.name)
        was = old.get(new.name)
        out.append(
            Blame(
                name=new.name,
                change="upgrade" if new.name in upgraded else "install",
                line=pin.line if pin else None,
                text=pin.text if pin else None,
                edited=before is not None and (was is None or was.text != (pin and pin.text)),
            )
        )
    return tuple(out)


def _that_matter(env: Environment, plan: Plan, blame: tuple[Blame, ...]) -> tuple[Blame, ...]:
    """The blames of an unsafe plan whose change alone matters: an uninstall is blamed only
    where the distribution is implicated in a break (it provided a library something needs,
    it lists a path a staying distribution loses, a requirement names it). Dropping four
    cu13 lines where one of them breaks torch blames that one line, not the four. Where no
    uninstall is implicated (the break comes from what arrives), every blame stays."""
    leaving = {b.name for b in blame if b.change == "uninstall"}
    implicated = {o for b in plan.broken for o in b.provider_owners} & leaving
    named = (
        re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", r.requirement)
        for r in plan.requirements_broken
    )
    implicated |= {canonical_name(m.group(1)) for m in named if m} & leaving
    lost = {path for loss in plan.losses for path in (*loss.missing, *loss.other_bytes)}
    for dist in env.distributions:
        if dist.name in leaving and any(e.path in lost for e in dist.records):
            implicated.add(dist.name)
    if not implicated:
        return blame
    return tuple(b for b in blame if b.change != "uninstall" or b.name in implicated)


def _words(mode: str, path: str) -> tuple[str, ...]:
    """The cudatx words that bring the environment in line with the file, as checked."""
    return ("sync", path) if mode == "sync" else ("install", "-r", path)


def _fix(
    env: Environment,
    check_path: str,
    plan: Plan,
    blame: tuple[Blame, ...],
    mode: str,
    uv: Sequence[str],
) -> tuple[str, ...]:
    """`uv`: where the check found wheels, so that the repair stages the same ones."""
    out = []
    versions = {nv.name: nv.version for nv in plan.remove}
    for b in blame:
        if b.change == "uninstall" and b.text:
            out.append(f"keep line {b.line} of the committed file: {b.text}")
        elif b.change == "uninstall":
            out.append(f"list {b.name}=={versions[b.name]} in {check_path}")
        elif b.text:
            out.append(f"revert line {b.line}: {b.text}")
    if plan.repair is not None and plan.repair.safe is not False:
        names = ", ".join(p.name for p in plan.repair.reinstall)
        lead = "or apply" if out else "apply"
        command = cudatx_line(env, (*_words(mode, check_path), "--repair"), uv=uv)
        verdict = "safe" if plan.repair.safe else "its --dry-run checks it with their wheels"
        out.append(f"{lead} it with `{command}`, which then reinstalls {names} ({verdict})")
    return tuple(out)


def check_file(
    env: Environment,
    path: str,
    planning: Planning,
    *,
    extras: tuple[str, ...],
    mode: str = "auto",
    judge: Judge | None = None,
) -> FileCheck:
    """`mode`: "sync", "install", or "auto" (sync for a lock, or for a file of pins that,
    now or as committed, lists every installed distribution). `judge`: a trial of the
    proposal (cudatx.trial, `--trial`), given uv's options with the file's own, returning
    the plan with its trial section."""
    now, before = _read(path, env.target, extras)
    if mode == "auto":
        complete = _complete(env, [f for f in (now, before) if f is not None])
        mode = "sync" if complete else "install"
    if not planning.allow_build:
        # Named by their lines before uv sees them: a checked repository's own code (an
        # editable, a local folder, a VCS or sdist URL) must not run on a reviewer's machine,
        # nor an sdist its `--no-binary` lines have uv build (cudatx hands uv the file's
        # options, not the file: its own are named here, by their lines).
        building.refuse([*building.unbuilt_pins(now.entries), *now.builds])
    if mode == "install" and not now.entries:
        plan = plan_change(env, (), (), PlanOptions())  # nothing to install: nothing changes
    else:
        with tempfile.TemporaryDirectory(prefix="cudatx-check-") as folder:
            written = _write(now.entries, folder)
            args = [written] if mode == "sync" else ["-r", written]
            # The file's own options (`--index-url` in a requirements file) come with it.
            uv_options = (*planning.uv_options, *now.options)
            proposal = propose(env, mode, args, replace(planning, uv_options=uv_options))
            plan = proposal.plan if judge is None else judge(proposal, uv_options)
    blame = _blame(plan, now, before)
    if not plan.safe:
        blame = _that_matter(env, plan, blame)
    return FileCheck(
        path=path,
        kind=now.kind,
        mode=mode,
        committed=before is not None,
        plan=plan,
        blame=blame,
        fix=_fix(env, path, plan, blame, mode, planning.uv_options) if not plan.safe else (),
        command=cudatx_line(env, _words(mode, path), uv=planning.uv_options),
        safe=plan.safe,
    )


# -- without an environment ---------------------------------------------------------------


class Wheels:
    """Where the wheels' RECORDs are read from: uv's cache folder, cudatx's scan cache; and
    how long an index is waited for (--index-timeout, --index-deadline)."""

    def __init__(
        self, uv_cache: str, cache: ScanCache | None, deadlines: Deadlines | None = None
    ) -> None:
        self.uv_cache = uv_cache
        self.cache = cache
        self.deadlines = deadlines


def _fresh_mode(mode: str, now: RequirementsFile) -> str:
    """Into an empty environment a lock is synced (exactly what it lists), anything else
    installed with what it requires: `auto` has no environment to compare a freeze with."""
    if mode == "auto":
        return "sync" if now.lock else "install"
    return mode


def _resolve(
    target: PythonTarget,
    now: RequirementsFile,
    planning: Planning,
    mode: str,
    until: float,
    wheels: Resolved | None = None,
) -> Resolved:
    """uv's resolution of `now` without what brings each wheel in; with `wheels` (that
    resolution), what brings each in (cudatx.planning.resolve.annotated)."""
    with tempfile.TemporaryDirectory(prefix="cudatx-check-") as folder:
        written = _write(now.entries, folder)
        options = (*planning.uv_options, *now.options)
        left = max(1.0, until - time.monotonic())
        uv, sync = planning.uv(), mode == "sync"
        try:
            if wheels is not None:
                return annotated(
                    uv, target.prefix, written, options, wheels, no_deps=sync, timeout=left
                )
            return resolve(uv, target.prefix, written, options, no_deps=sync, timeout=left)
        except UvTimedOut as exc:
            raise UvFailed(f"{exc.message}: waiting on {_indexes(options)}") from None


_INDEX_WORDS = frozenset(
    {"-i", "--index-url", "--extra-index-url", "--default-index", "--index", "-f", "--find-links"}
)


def _indexes(options: Sequence[str]) -> str:
    """The hosts of the indexes uv was told of, as a user reads them (no credentials)."""
    found = [host_of(options[i + 1]) for i, w in enumerate(options[:-1]) if w in _INDEX_WORDS]
    found = [h for h in dict.fromkeys(found) if "://" not in h and "/" not in h] or found
    return ", ".join(dict.fromkeys(found)) or "its default index"


def _records(
    target: PythonTarget,
    resolved: Resolved,
    planning: Planning,
    now: RequirementsFile,
    wheels: Wheels,
    until: float,
) -> tuple[WheelRecord, ...]:
    return read_records(
        resolved.wheels,
        layout_of(target),
        uv=planning.uv,
        uv_cache=wheels.uv_cache,
        options=(*planning.uv_options, *now.options),
        cache=wheels.cache,
        deadlines=wheels.deadlines,
        until=until,
    )


def _conflicts(
    target: PythonTarget,
    now: RequirementsFile,
    before: RequirementsFile | None,
    planning: Planning,
    mode: str,
    wheels: Wheels,
) -> tuple[
    Resolved,
    tuple[WheelRecord, ...],
    Callable[[], Blamer],
    tuple[Conflict, ...],
    tuple[Unhashed, ...],
]:
    # One deadline for the check's every wait on the index: uv's resolution, cudatx's own
    # reads, and uv's download of what cudatx could not read (--index-deadline).
    until = time.monotonic() + (wheels.deadlines or Deadlines()).check_s
    resolved = _resolve(target, now, planning, mode, until)
    records = _records(target, resolved, planning, now, wheels, until)

    # What brings each wheel in is asked of uv only where something is to be blamed (two
    # wheels write one path with different bytes, a --fresh plan breaks).
    @functools.cache
    def blame() -> Blamer:
        parents = _resolve(target, now, planning, mode, until, resolved)
        return Blamer(now.entries, parents, before.entries if before is not None else None)

    majors = {
        w.name: major for w in resolved.wheels if (major := cuda_major_of_name(w.name)) is not None
    }
    found, unhashed = find_conflicts(records, layout_of(target), blame, majors)
    return resolved, records, blame, found, unhashed


def check_conflicts(
    target: PythonTarget,
    path: str,
    planning: Planning,
    wheels: Wheels,
    *,
    extras: tuple[str, ...],
    mode: str = "auto",
) -> FileCheck:
    """Without an environment: would installing `path` into an empty environment of
    `target` (an empty environment, made for the check) have two distributions write a
    path with different bytes?"""
    now, before = _read(path, target, extras)
    mode = _fresh_mode(mode, now)
    # uv builds an editable even under --no-build, and what a `no-binary` setting names
    # (cudatx.planning.building): named by its line before uv sees it, as check_file does.
    # This check never builds, --allow-build or not: that is --fresh's (or an
    # environment's) to do.
    unbuilt = [
        *building.unbuilt_pins(now.entries),
        *now.builds,
        *building.unbuilt_settings(target.markers),
    ]
    if unbuilt and planning.allow_build:
        raise UsageError(_never_builds(needs_build(unbuilt)))
    conflicts: tuple[Conflict, ...] = ()
    unhashed: tuple[Unhashed, ...] = ()
    records: tuple[WheelRecord, ...] = ()
    try:
        building.refuse(unbuilt)
        if now.entries:
            found = _conflicts(target, now, before, planning, mode, wheels)
            _, records, _, conflicts, unhashed = found
    except NeedsBuild as exc:
        # "pass --allow-build" would be refused here (above): say what does build it.
        raise NeedsBuild(_never_builds(exc.message)) from None
    return FileCheck(
        path=path,
        kind=now.kind,
        mode=mode,
        committed=before is not None,
        plan=None,
        blame=(),
        fix=tuple(f for c in conflicts for f in c.fix),
        command=_fresh_command(path, planning),
        check=Check.CONFLICTS,
        safe=not conflicts,
        conflicts=conflicts,
        unhashed=unhashed,
        wheels=tuple(r.read for r in records),
        python=target.version,
    )


_NEVER_BUILDS = (
    "the check without an environment never builds; pass --fresh (or --python) with --allow-build"
)


def _never_builds(message: str) -> str:
    """A NeedsBuild line as the check without an environment says it: what builds it there is
    --fresh or --python with --allow-build, not --allow-build alone."""
    if _NEVER_BUILDS in message:
        return message
    return f"{message.removesuffix(': pass --allow-build')}: {_NEVER_BUILDS}"


def _fresh_command(path: str, planning: Planning) -> str:
    import shlex

    return shlex.join(["cudatx", "check-requirements", path, "--fresh", *planning.uv_options])


def _implicated(env: Environment, plan: Plan, records: tuple[WheelRecord, ...]) -> tuple[str, ...]:
    """The distributions a plan's findings name: whose file fails to load, whose file a
    CUDA-major mix resolves (every distribution whose RECORD lists it), whose import breaks,
    whose requirement goes unmet."""
    names: dict[str, None] = {}
    for b in (*plan.broken, *(plan.at_risk if plan.strict else ())):
        for name in (b.needed_by_dist, *b.provider_owners):
            if name:
                names.setdefault(name)
    for r in plan.broken_roots:
        if r.dist:
            names.setdefault(r.dist)
    site = env.target.install_site
    for m in plan.mixed:
        key = os.path.normpath(os.path.relpath(m.path, site))
        for record in records:
            if any(e.path == key for e in record.entries):
                names.setdefault(record.wheel.name)
    for q in plan.requirements_broken:
        names.setdefault(q.dist)
    return tuple(names)


def _fresh_fix(brought: Sequence[Brought]) -> tuple[str, ...]:
    out: dict[str, None] = {}
    for b in brought:
        lines = [ln for ln in b.lines if ln.state == THIS_CHANGE] or list(b.lines)
        for ln in lines:
            tail = "" if b.direct else f", which brings {b.name} in"
            out.setdefault(f"drop line {ln.line} ({ln.text}){tail}")
    return tuple(out)


def check_fresh(
    env: Environment,
    path: str,
    planning: Planning,
    wheels: Wheels,
    *,
    extras: tuple[str, ...],
    mode: str = "auto",
) -> FileCheck:
    """`--fresh`: plan installing `path` into `env` (an empty environment, made for the
    check) as `install --dry-run` plans it, judge its loads, and check the wheels' paths."""
    now, before = _read(path, env.target, extras)
    mode = _fresh_mode(mode, now)
    checked = check_file(env, path, planning, extras=extras, mode=mode)
    plan = checked.plan
    assert plan is not None
    conflicts: tuple[Conflict, ...] = ()
    unhashed: tuple[Unhashed, ...] = ()
    records: tuple[WheelRecord, ...] = ()
    brought: tuple[Brought, ...] = ()
    if now.entries:
        # After the plan: its staging left every wheel in uv's cache.
        _, records, blame, conflicts, unhashed = _conflicts(
            env.target, now, before, planning, mode, wheels
        )
        if not plan.safe:
            brought = tuple(blame().brought(n) for n in _implicated(env, plan, records))
    fix = (*_fresh_fix(brought), *(f for c in conflicts for f in c.fix))
    return replace(
        checked,
        mode=mode,
        blame=(),
        fix=tuple(dict.fromkeys(fix)),
        command=_fresh_command(path, planning),
        check=Check.FRESH,
        safe=plan.safe and not conflicts,
        conflicts=conflicts,
        unhashed=unhashed,
        brought=brought,
        wheels=tuple(r.read for r in records),
        python=env.target.version,
    )
