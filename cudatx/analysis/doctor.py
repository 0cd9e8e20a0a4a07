"""`cudatx doctor`: what is wrong in an environment, by root cause, and what cures it.

Errors are what already fails (cudatx.analysis.broken), one per root cause with its
consequences; warnings are what nothing breaks yet but a change could; notes are facts a
healthy environment has too (namespace files several wheels ship with the same bytes,
optional run-time loads). The report starts with a verdict and lists, as `fixes`, the
commands that resolve every error, in order; where one cudatx command cures several, that
one is the fix.
"""

from __future__ import annotations

import os
from collections import defaultdict

from cudatx.analysis import coverage, cuda, frameworks, observed, ownership
from cudatx.analysis.broken import already_broken, built_major, damage, foreign_owned, iter_fixes
from cudatx.analysis.commands import cudatx_command, reinstall_command, reinstall_commands
from cudatx.analysis.problems import (
    Problem,
    Severity,
    short,
)
from cudatx.environment import Environment
from cudatx.models import Distribution, Evidence, Frozen, SandboxUsed, Status
from cudatx.names import counted

SCHEMA_VERSION = 1


class Unprovided(Frozen):
    """A name only a string in some object's .rodata gives, which does not load here."""

    name: str
    named_by: tuple[str, ...]


class TrialFailure(Frozen):
    """A check that fails in `doctor --trial` (cudatx.trial.doctor): an import, a framework's
    load step or a user's command, with the interpreter's error."""

    check: str  # "import jax"
    dists: tuple[str, ...]  # who installs the module
    error: str  # the interpreter's last line on stderr
    known: bool  # the model (doctor's findings) says it fails too


class DoctorTrial(Frozen):
    method: str  # the shadow's
    shadow: str  # the shadow and what it cost, in words
    shadow_seconds: float  # making the shadow
    seconds: float  # the judge's
    checks: int
    failing: tuple[TrialFailure, ...]
    unknown: int  # failing checks the model does not know of
    sandbox: SandboxUsed | None = None  # the confinement its code ran under (cudatx.sandbox)
    gpu: str | None = None  # whether the GPU start steps ran: "1 GPU", "no GPU (why)"


class DoctorReport(Frozen):
    schema_version: int = SCHEMA_VERSION
    prefix: str
    python: str
    torch_cuda: str | None
    verdict: str  # one paragraph: what is wrong and the one thing to do
    errors: int
    warnings: int
    problems: tuple[Problem, ...]  # errors first
    fixes: tuple[str, ...]  # commands that resolve every error, in order, runnable as printed
    system_provided: tuple[str, ...]  # driver libraries something loads
    unprovided: tuple[Unprovided, ...]  # optional run-time loads that do not load here
    notes: tuple[str, ...]
    trial: DoctorTrial | None = None  # `doctor --trial`: the real interpreter's judgement


def _warnings(env: Environment, errors: tuple[Problem, ...]) -> tuple[list[Problem], list[str]]:
    """Warnings (co-owned paths of other bytes, hollow distributions nothing fails for, what
    the scan passed over) and notes, leaving out what an error already says."""
    out: list[Problem] = []
    notes: list[str] = []
    in_errors = {d for p in errors for d in p.distributions}
    same: list[ownership.CoOwned] = []
    groups: dict[tuple[tuple[str, str], ...], list[ownership.CoOwned]] = defaultdict(list)
    for c in ownership.co_owned(env):
        if c.same_record:
            same.append(c)  # every owner's RECORD names these very bytes
        else:
            groups[c.owners].append(c)
    if same:
        folders = sorted({os.path.dirname(short(env, c.path)) or "." for c in same})
        notes.append(
            f"{len(same)} path{'s are' if len(same) != 1 else ' is'} listed by several "
            "distributions with the same bytes "
            f"({', '.join(folders[:3])}{', ...' if len(folders) > 3 else ''}): uninstalling one "
            "deletes them for all, which a plan says"
        )
    major = built_major(env)
    for owners, paths in groups.items():
        names = [n for n, _ in owners]
        if set(names) <= in_errors:
            continue  # a CUDA major mixed in: the error says it
        effective = sorted({c.effective_owner or "none" for c in paths})
        dists = [d for d in (env.distribution(n) for n in names) if d is not None]
        keep = [d for d in dists if major is not None and _major(env, d) == major]
        fix = None
        foreign = foreign_owned(env, dists)
        if len(keep) == 1 and not foreign:
            # Keep the build torch was made for: remove the other, and put its bytes back.
            others = [d.name for d in dists if d is not keep[0]]
            fix = cudatx_command(env, "remove", *others, "--repair")
        folders = sorted({os.path.dirname(short(env, c.path)) for c in paths})
        plural = "s" if len(paths) != 1 else ""
        listed = " and ".join(f"{n} {v}" for n, v in owners)
        # Said as a plan says it (docs/loader-model.md, "What a file is").
        data_only = not any(ownership.is_code_file(c.path) for c in paths)
        kind = "; no code file: headers, docs or data only" if data_only else ""
        out.append(
            Problem(
                severity=Severity.WARNING,
                code="co-owned",
                what=f"{len(paths)} path{plural} in {', '.join(folders)} "
                f"{'are' if plural else 'is'} listed by {listed}",
                why=f"the bytes on disk are {', '.join(effective)}'s; uninstalling either "
                "distribution deletes these paths and leaves the other installed but hollow"
                + kind
                + (f"; {foreign}" if foreign else ""),
                fix=fix,
                paths=tuple(sorted(c.path for c in paths)),
                distributions=tuple(names),
            )
        )
    for h in ownership.hollow(env):
        dist = env.distribution(h.name)
        if dist is None or h.name in in_errors:
            continue
        out.append(
            Problem(
                severity=Severity.WARNING,
                code="hollow",
                what=f"{h.name} {h.version} is installed but hollow: {damage(h)}",
                why="it lost no module or library, and nothing that loads here fails for it",
                fix=reinstall_command(env, dist),
                paths=h.examples,
                distributions=(h.name,),
            )
        )
    out += frameworks.doctor_findings(env)
    for finding in env.findings:
        out.append(
            Problem(
                severity=Severity.WARNING,
                code=finding.kind.replace(" ", "-"),
                what=f"{finding.kind}: {finding.path}",
                why=finding.message,
                paths=(finding.path,),
            )
        )
    return out, notes


def _major(env: Environment, dist: Distribution) -> int | None:
    found = cuda.cuda_major_of_dist(env, dist)
    return found.major if found else None


def _weak(env: Environment, *, strict: bool) -> tuple[list[Problem], list[Unprovided]]:
    """Loads only a .rodata string gives that fail: optional, listed apart; with `strict`,
    warnings."""
    named: dict[str, dict[str, None]] = defaultdict(dict)
    details: dict[str, str] = {}
    for load in env.loads:
        for r in load.resolutions:
            if r.evidence is not Evidence.DLOPEN_STRING or r.status in (
                Status.RESOLVED,
                Status.SYSTEM,
            ):
                continue
            named[r.name].setdefault(short(env, r.needed_by))
            details.setdefault(r.name, r.detail or r.status.value)
    problems = []
    if strict:
        for name, by in named.items():
            problems.append(
                Problem(
                    severity=Severity.WARNING,
                    code="string-unresolved",
                    what=f"{', '.join(list(by)[:3])} names {name}, which does not load here",
                    why=f"a soname-shaped string in its .rodata (--strict); {details[name]}",
                    paths=tuple(by),
                )
            )
    unprovided = [Unprovided(name=n, named_by=tuple(sorted(by))) for n, by in sorted(named.items())]
    return problems, unprovided


def _fixes(env: Environment, errors: tuple[Problem, ...]) -> tuple[str, ...]:
    """The commands that resolve every error, in order: the removals that cure a CUDA major
    mixed in, as one cudatx command, then the other fixes."""
    removals: dict[str, None] = {}
    reinstalls: dict[str, None] = {}
    rest = []
    for problem in errors:
        if problem.removes:
            removals.update(dict.fromkeys(problem.removes))
        elif problem.reinstalls:
            reinstalls.update(dict.fromkeys(problem.reinstalls))
        else:
            rest.append(problem)
    first = [cudatx_command(env, "remove", *removals, "--repair")] if removals else []
    # Every hollow distribution in one reinstall (one per installer): run as printed, one
    # round cures them all, where one at a time would reveal the next at each import.
    dists = [d for d in env.distributions if d.name in reinstalls and d.name not in removals]
    return (*first, *reinstall_commands(env, dists), *iter_fixes(tuple(rest)))


def _verdict(errors: list[Problem], warnings: list[Problem], fixes: tuple[str, ...]) -> str:
    if errors:
        head = errors[0].what
        # The verdict stands alone (it is all `doctor -q` prints): it says where the rest is
        # without pointing "below".
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        count = f"{counted(len(errors), 'error')}"
        if len(fixes) == 1:
            cure = f"To fix {'it' if len(errors) == 1 else 'them'}, run: {fixes[0]}"
        elif fixes:
            cure = f"To fix them, run the {len(fixes)} commands of doctor's fixes, in order."
        else:
            cure = "No command cudatx knows fixes this; doctor's findings say why."
        return f"{count}: {head}{more}. {cure}"
    if warnings:
        count = f"{counted(len(warnings), 'warning')}"
        return f"Nothing fails to load. {count}: {warnings[0].what}."
    return "No problems: everything that loads here loads, and every requirement is met."


def _framework_notes(env: Environment) -> list[str]:
    """Where each framework's load list came from (or that it is not modelled), the
    contexts its roots load in, and its lazily imported modules that do not load."""
    out: dict[str, None] = dict.fromkeys(frameworks.read_notes(env))
    by_label: dict[str, list[str]] = defaultdict(list)
    for state in frameworks.states(env):
        if state.module:
            continue  # one line per lazily imported module (CuPy's) would drown the rest
        if state.primary and state.unavailable:
            continue  # a feature not installed: unavailable_notes says so, once
        word = "loads" if state.works else f"does not load ({state.failing})"
        by_label[state.label].append(f"{word} {state.context}")
    for label, said in by_label.items():
        out.setdefault(f"{label}: {'; '.join(said)}")
    out.update(dict.fromkeys(frameworks.unavailable_notes(env)))
    return list(out)


def diagnose(env: Environment, *, strict: bool = False) -> DoctorReport:
    built = cuda.build(env)
    errors = already_broken(env)
    warnings, notes = _warnings(env, errors)
    weak, unprovided = _weak(env, strict=strict)
    warnings += weak
    fixes = _fixes(env, errors)
    system = sorted(
        {r.name for load in env.loads for r in load.resolutions if r.status is Status.SYSTEM}
    )
    notes += env.system.notes
    for context in env.contexts:
        notes.append(f"{context.load_list.distribution} preload list: {context.origin}")
    notes += _framework_notes(env)
    notes += coverage.notes(env)
    notes += observed.notes(env)
    return DoctorReport(
        prefix=env.target.prefix,
        python=env.target.version,
        torch_cuda=built.cuda if built else None,
        verdict=_verdict(list(errors), warnings, fixes),
        errors=len(errors),
        warnings=len(warnings),
        problems=(*errors, *warnings),
        fixes=fixes,
        system_provided=tuple(system),
        unprovided=tuple(unprovided),
        notes=tuple(notes),
    )
