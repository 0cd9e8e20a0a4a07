"""A plan in uv's shape (Would uninstall / Would install / Would break) and as JSON."""

from __future__ import annotations

from collections import defaultdict

from cudatx.paths import display_path as shown
from cudatx.planning.models import Broken, NameVersion, Plan


def to_json(plan: Plan) -> str:
    return plan.model_dump_json(indent=2)


def _packages(
    verb: str, items: tuple[NameVersion, ...], why: str = "", sign: str = "-"
) -> list[str]:
    noun = "package" if len(items) == 1 else "packages"
    lines = [f"Would {verb} {len(items)} {noun}{why}"]
    lines += [f" {sign} {p.name}=={p.version}" for p in items]
    return lines


def _broken(by_soname: dict[str, list[Broken]], sites: tuple[str, ...]) -> list[str]:
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
    return lines


def to_text(plan: Plan, command: str, sites: tuple[str, ...]) -> str:
    """`command` is the cudatx command line that made the plan, without --dry-run."""
    lines = _packages("uninstall", plan.remove) if plan.remove or not plan.install else []
    if plan.install:
        lines += _packages("install", plan.install, sign="+")
    if plan.reinstall:
        lines += _packages("reinstall", plan.reinstall, " (--no-deps, restoring their own files)")
    by_soname: dict[str, list[Broken]] = defaultdict(list)
    for b in plan.broken:
        by_soname[b.soname].append(b)
    if by_soname or plan.broken_roots:
        lines.append("Would break:")
        lines += _broken(by_soname, sites)
        for r in plan.broken_roots:
            lines.append(
                f"  import of {shown(r.root, sites)} [{r.dist or '-'}] would fail: "
                f"{r.first_missing} not found"
            )
    if plan.requirements_broken:
        lines.append("Would leave requirements unmet:")
        lines += [f"  {r.dist} requires {r.requirement}" for r in plan.requirements_broken]
    if plan.mixed:
        lines.append(f"Would mix CUDA majors (torch is built for CUDA {plan.mixed[0].torch_cuda}):")
        for m in plan.mixed:
            lines.append(
                f"  {m.soname} for {shown(m.needed_by, sites)}: {shown(m.path, sites)} "
                f"is a CUDA {m.major} build ({m.reason})"
            )
    if plan.left_hollow:
        lines.append("Would leave hollow (installed, but missing files their RECORD lists):")
        lines += [f" ! {p.name}=={p.version}" for p in plan.left_hollow]
    if plan.overwritten:
        lines.append(
            "Would overwrite shared paths of (still installed, their RECORD names other bytes):"
        )
        lines += [f" ~ {p.name}=={p.version}" for p in plan.overwritten]
    if plan.rebound:
        lines.append("Would rebind (the loader finds another file):")
        for rb in plan.rebound:
            major = f", CUDA {rb.cuda_major_after}" if rb.cuda_major_after else ""
            if rb.provider_after == rb.provider_before:
                owners = ", ".join(rb.provider_after_owners)
                where = f"{shown(rb.provider_after, sites)} with {owners}'s bytes"
            else:
                where = shown(rb.provider_after, sites)
            lines.append(f"  {rb.soname} for {shown(rb.needed_by, sites)}: {where}{major}")
    if plan.preexisting:
        lines.append(
            f"Already broken before this change (not counted): {len(plan.preexisting)} "
            "(see `cudatx doctor`)"
        )
    lines += [f"note: {n}" for n in plan.notes]
    if plan.safe:
        lines.append("Safe: nothing that loads now would stop loading.")
    else:
        lines.append("Unsafe.")
    if plan.repair is not None:
        verdict = "safe" if plan.repair.safe else "still unsafe"
        names = ", ".join(p.name for p in plan.repair.reinstall)
        lines.append(
            f"Suggested: {command} --dry-run --repair  "
            f"(reinstalls {names} after the removal; {verdict})"
        )
    return "\n".join(lines) + "\n"
