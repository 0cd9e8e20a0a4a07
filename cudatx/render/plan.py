"""A plan as text (the verdict first, then what would change, in uv's words) and as JSON."""

from __future__ import annotations

from collections import defaultdict
from typing import NamedTuple

from cudatx.codec import document
from cudatx.errors import json_text
from cudatx.names import counted
from cudatx.paths import display_path as shown
from cudatx.planning import sections
from cudatx.planning.models import (
    Arriving,
    Broken,
    Loss,
    NameVersion,
    Plan,
    Rebound,
    TraceRun,
    Trial,
)
from cudatx.render import as_text
from cudatx.render.formats import Rendered
from cudatx.render.formats import render as written

_SHOWN_NAMES = 4  # a group of rebinds names this many sonames, then counts the rest


class Report(NamedTuple):
    """A plan as shown: the plan, the cudatx command line that made it (without --dry-run)
    for its suggestions to repeat, and the site folders its paths are shown under."""

    plan: Plan
    command: str
    sites: tuple[str, ...]


def render(report: Report, fmt: str) -> Rendered:
    """The plan in format `fmt` (cudatx.render.formats)."""
    return written("plan", report, fmt)


def to_json(plan: Plan) -> str:
    return json_text(document(plan))


def verdict(plan: Plan) -> str:
    """One line: safe, or what would stop working."""
    if plan.safe:
        return "Safe: nothing that loads now would stop loading."
    parts = []
    imports = sum(r.framework is None for r in plan.broken_roots)
    if imports:
        parts.append(counted(imports, "import") + " would fail")
    contexts = sum(c.breaks for c in plan.contexts)
    # A framework's own load (TF's GPU check, JAX's plugin) is no import: said as the
    # framework context it breaks, or, where no context says it, as a framework load.
    if len(plan.broken_roots) > imports and not contexts:
        parts.append(counted(len(plan.broken_roots) - imports, "framework load") + " would fail")
    if plan.broken:
        parts.append(counted(len({b.soname for b in plan.broken}), "library") + " would not load")
    if plan.mixed:
        parts.append(
            " and ".join(dict.fromkeys(m.package for m in plan.mixed))
            + " would load "
            + counted(len(plan.mixed), "library")
            + " of another CUDA major"
        )
    if any(x.code or plan.strict for x in plan.losses):
        n = sum(x.code or plan.strict for x in plan.losses)
        stay = "1 package that stays" if n == 1 else f"{n} packages that stay"
        parts.append(f"{stay} would lose files their RECORD lists")
    if plan.requirements_broken:
        parts.append(counted(len(plan.requirements_broken), "requirement") + " would be unmet")
    if contexts:
        parts.append(counted(contexts, "framework context") + " would break")
    if plan.strict and plan.at_risk:
        parts.append(counted(len({b.soname for b in plan.at_risk}), "run-time load") + " may fail")
    if plan.trial is not None and plan.trial.breaks:
        parts.append(counted(plan.trial.breaks, "check") + " failed in the trial")
    if not parts and plan.notes:
        parts.append(plan.notes[-1])
    return "Unsafe: " + "; ".join(parts) + "."


def _no_code(loss: Loss, strict: bool) -> str:
    """What a loss of headers, docs or data only is said to be (docs/loader-model.md)."""
    if loss.code:
        return ""
    counted_or_not = "counted: --strict" if strict else "not counted without --strict"
    return f" (no code file changes: headers, docs or data only; {counted_or_not})"


def _paths(paths: tuple[str, ...], shown_at_most: int = 3) -> str:
    """ "a, b, c and 4 more"."""
    text = ", ".join(paths[:shown_at_most])
    if len(paths) > shown_at_most:
        text += f" and {len(paths) - shown_at_most} more"
    return text


def _from(p: Arriving, sites: tuple[str, ...]) -> str:
    """Where uv takes an install's bytes from, `(from SOURCE)`; in words where
    cudatx cannot know it (cudatx.planning.sources)."""
    if p.source is None:
        return f" (from: not known; {p.source_note})" if p.source_note else ""
    where = shown(p.source, sites) if p.source.startswith("/") else p.source
    return f" (from {where}" + (f"; {p.source_note})" if p.source_note else ")")


def _packages(plan: Plan, sites: tuple[str, ...] = ()) -> list[str]:
    """What uv would do: an upgrade or downgrade on one line, as `name old -> new`; each
    install and reinstall with where its bytes come from."""
    arriving = {p.name: p for p in plan.install}
    leaving = {p.name: p for p in plan.remove}
    changed = [(leaving[n], arriving[n]) for n in leaving if n in arriving]
    removed = [p for p in plan.remove if p.name not in arriving]
    added = [p for p in plan.install if p.name not in leaving]
    lines: list[str] = []

    def section(verb: str, items: list[NameVersion | Arriving], sign: str, why: str = "") -> None:
        if items:
            lines.append(f"Would {verb} {counted(len(items), 'package')}{why}")
            lines.extend(
                f" {sign} {p.name}=={p.version}"
                + (_from(p, sites) if isinstance(p, Arriving) else "")
                for p in items
            )

    section("uninstall", list(removed), "-")
    if changed:
        lines.append(f"Would change {counted(len(changed), 'package')}")
        lines.extend(
            f" ~ {old.name} {old.version} -> {new.version}{_from(new, sites)}"
            for old, new in changed
        )
    section("install", list(added), "+")
    # ` ~ `, as uv marks a reinstall and as the summary of the apply does: the package stays.
    section("reinstall", list(plan.reinstall), "~", " (--no-deps, restoring their own files)")
    if not lines:
        lines.append("Would uninstall 0 packages")
    return lines


def _broken(
    by_soname: dict[str, list[Broken]], sites: tuple[str, ...], runs: tuple[TraceRun, ...] = ()
) -> list[str]:
    labels = {run.id: run.label for run in runs}
    lines = []
    for soname, group in sorted(by_soname.items()):
        lines.append(f"  {soname}")
        for b in group:
            owner = f" [{b.needed_by_dist}]" if b.needed_by_dist else ""
            lines.append(f"    needed by {shown(b.needed_by, sites)}{owner} ({b.evidence.value})")
        first = group[0]
        if first.provider:
            owners = ", ".join(first.provider_owners) or "no distribution"
            lines.append(f"    was {shown(first.provider, sites)} [{owners}]")
        lines.append(f"    {first.reason}")
        if first.system_package is not None:
            lines.append(
                f"    the file found is {first.system_package}'s, which cudatx never changes"
            )
        traced = dict.fromkeys(t for b in group for t in b.traces)
        lines += [f"    loaded by {labels.get(t, f'trace {t}')} (trace {t})" for t in traced]
    return lines


def _grouped(items: tuple[Broken, ...]) -> dict[str, list[Broken]]:
    by_soname: dict[str, list[Broken]] = defaultdict(list)
    for b in items:
        by_soname[b.soname].append(b)
    return by_soname


def _rebinds(rebound: tuple[Rebound, ...], sites: tuple[str, ...]) -> list[str]:
    """Rebinds where the provider changes distribution or CUDA major, by new provider (a
    few one line each, many in one line); the rest (another file of the same distributions)
    counted in one line."""
    moves: dict[tuple[tuple[str, ...], int | None], list[Rebound]] = defaultdict(list)
    same = 0
    for rb in rebound:
        moved = set(rb.provider_after_owners) != set(rb.provider_before_owners)
        if moved or rb.cuda_major_after != rb.cuda_major_before:
            moves[(rb.provider_after_owners, rb.cuda_major_after)].append(rb)
        else:
            same += 1
    lines = []
    if moves:
        lines.append("Would rebind (the loader would find another build):")
    for (owners, major), group in moves.items():
        build = f", CUDA {major}" if major is not None else ""
        who = ", ".join(owners) or "no distribution"
        if len(group) <= _SHOWN_NAMES:
            for rb in group:
                path = shown(rb.provider_after, sites)
                lines.append(
                    f"  {rb.soname} for {shown(rb.needed_by, sites)}: {path} ({who}'s{build})"
                )
            continue
        names = list(dict.fromkeys(rb.soname for rb in group))
        text = ", ".join(names[:_SHOWN_NAMES])
        if len(names) > _SHOWN_NAMES:
            text += f" and {len(names) - _SHOWN_NAMES} more"
        lines.append(
            f"  {counted(len(group), 'need')} ({text}): to {who}'s{build} (--json lists them)"
        )
    if same:
        lines.append(
            f"Would rebind {counted(same, 'need')} to other files of the same distributions "
            "(--json lists them)"
        )
    return lines


def _contexts(plan: Plan) -> list[str]:
    """One line per context change; CuPy's many modules, alike, in one."""
    groups: dict[tuple[str, str, bool | None, tuple[str, ...]], list[str]] = defaultdict(list)
    for c in plan.contexts:
        groups[(c.framework, c.context, c.after, c.still)].append(c.sentence())
    lines = []
    for (framework, context, _, _), said in groups.items():
        if len(said) > 3:
            lines.append(
                f"  {len(said)} run-time roots of {framework}, {context}: {said[0]} (and alike)"
            )
        else:
            lines += [f"  {s}" for s in said]
    return lines


def to_text(plan: Plan, command: str, sites: tuple[str, ...]) -> str:
    """`command` is the cudatx command line that made the plan, without --dry-run."""
    lines = [verdict(plan), *_packages(plan, sites)]
    if plan.broken or plan.broken_roots:
        lines.append(f"{sections.BREAK}:")
        lines += _broken(_grouped(plan.broken), sites, plan.traces)
        for r in plan.broken_roots:
            what = f"import of {shown(r.root, sites)}"
            if r.framework is not None:  # a framework's run-time root (README, "Frameworks")
                what = f"{r.framework} ({shown(r.root, sites)}) {r.context}"
            elif r.importer is not None:  # imported by another package's import
                what = f"import of {r.importer} ({shown(r.root, sites)}, which it imports)"
            lines.append(
                f"  {what} [{r.dist or '-'}] would fail: "
                + (r.detail or f"{r.first_missing} not found")
            )
    if plan.contexts:
        lines.append(f'{sections.CONTEXTS} (README, "Frameworks"):')
        lines += _contexts(plan)
    if plan.at_risk:
        strict = "counted: --strict" if plan.strict else "not counted without --strict"
        lines.append(f"{sections.AT_RISK} (named only by strings in .rodata; {strict}):")
        lines += _broken(_grouped(plan.at_risk), sites)
    if plan.requirements_broken:
        lines.append(f"{sections.UNMET}:")
        lines += [f"  {r.dist} requires {r.requirement}" for r in plan.requirements_broken]
    if plan.mixed:
        first = plan.mixed[0]
        lines.append(f"{sections.MIXED} ({first.package} is built for CUDA {first.torch_cuda}):")
        for m in plan.mixed:
            lines.append(
                f"  {m.soname} for {shown(m.needed_by, sites)}: {shown(m.path, sites)} "
                f"is a CUDA {m.major} build ({m.reason})"
            )
    hollow = [x for x in plan.losses if x.missing]
    if hollow:
        lines.append(f"{sections.HOLLOW} (installed, but missing files their RECORD lists):")
        for x in hollow:
            breaks = ", ".join(f"`import {m}`" for m in x.imports)
            lines.append(
                f" ! {x.name}=={x.version} would lose {_paths(x.missing)}"
                + (f": {breaks} breaks" if breaks else "")
                + _no_code(x, plan.strict)
            )
    overwritten = [x for x in plan.losses if x.other_bytes]
    if overwritten:
        lines.append(f"{sections.OVERWRITE} (still installed, their RECORD names other bytes):")
        lines += [
            f" ~ {x.name}=={x.version} would hold other bytes at {_paths(x.other_bytes)}"
            + _no_code(x, plan.strict)
            for x in overwritten
        ]
    lines += _rebinds(plan.rebound, sites)
    if plan.cures:
        lines.append(f"Cures {counted(len(plan.cures), 'error')} doctor reports now:")
        lines += [f"  {c.what}" for c in plan.cures]
    if plan.preexisting:
        lines.append(
            f"Already broken before this change (not counted): {len(plan.preexisting)} "
            "(see `cudatx doctor`)"
        )
    if plan.trial is not None:
        lines += trial_lines(plan.trial)
    lines += [f"{sections.NOTE}: {n}" for n in plan.notes]
    if plan.replacing:
        words = " ".join(f"--replacing {p.name}" for p in plan.replacing)
        names = ", ".join(p.name for p in plan.replacing)
        lines.append(
            f"Suggested: {command} {words} --dry-run  (uninstalls {names} in the same "
            "transaction, so nothing stays holding the other's bytes; safe)"
        )
    # A suggestion only where it can make the plan safe: checked safe, or not checkable
    # without staging the wheels (the dry run it suggests checks it).
    if plan.repair is not None and sections.repair_suggested(plan):
        if plan.repair.safe is None:
            check = "that dry run checks it with the reinstalled wheels' bytes"
        else:
            check = "safe"
        names = ", ".join(p.name for p in plan.repair.reinstall)
        lines.append(
            f"Suggested: {command} --dry-run --repair  "
            f"(reinstalls {names} after the removal; {check})"
        )
    return as_text(lines)


def trial_lines(trial: Trial) -> list[str]:
    """The trial section: how the shadow was made, what it cost, the real breaks and every
    disagreement between model and trial (docs/trial.md)."""
    cost = f"uv {trial.uv_seconds:.1f} s, imports {trial.judge_seconds:.1f} s"
    lines = [f"{sections.TRIAL} (the change made in {trial.shadow}; {cost}):"]
    if trial.error is not None:
        lines.append(f"  the change could not be made in the shadow: {trial.error}")
        return lines
    broke = [r for r in trial.roots if r.trial == "breaks"]
    if broke:
        lines += [f"  x {r.check} fails: {r.error}" for r in broke]
    else:
        lines.append(f"  nothing that worked before fails after ({counted(trial.checks, 'check')})")
    before = sum(r.trial == "failed before" for r in trial.roots)
    if before:
        lines.append(f"  {counted(before, 'check')} failed before the change too (not counted)")
    if trial.before_kept:
        lines.append(
            "  the judgement before the change is an earlier trial's: none of the "
            f"{counted(trial.before_kept, 'file')} its checks read has changed since "
            "(--no-cache judges it again)"
        )
    if trial.disagreements:
        lines.append("  Model and trial disagree:")
        lines += [f"    {d}" for d in trial.disagreements]
    else:
        lines.append("  Model and trial agree.")
    return lines + gpu_lines(trial.gpu)


def gpu_lines(gpu: str | None) -> list[str]:
    """Whether the frameworks' GPU starts ran (their readers' GPU start steps,
    cudatx.trial.steps), as the probe found the machine: said either way, since a trial
    without them judged no GPU start."""
    if gpu is None:
        return []
    if gpu.startswith("no GPU"):
        return [f"  GPU starts not run: {gpu}"]
    return [f"  GPU starts run on {gpu} (each framework installed)"]
