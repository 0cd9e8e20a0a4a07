"""A removal plan in uv's shape (Would uninstall / Would reinstall / Would break) and as JSON."""

from __future__ import annotations

import os
import shlex
from collections import defaultdict

from cudatx.paths import site_relative
from cudatx.plan import Broken, NameVersion, Plan


def to_json(plan: Plan) -> str:
    return plan.model_dump_json(indent=2)


def _packages(verb: str, items: tuple[NameVersion, ...], why: str = "") -> list[str]:
    noun = "package" if len(items) == 1 else "packages"
    lines = [f"Would {verb} {len(items)} {noun}{why}"]
    lines += [f" - {p.name}=={p.version}" for p in items]
    return lines


def _short(path: str | None, sites: tuple[str, ...]) -> str:
    if path is None:
        return "-"
    if ".." in path.split("/"):
        # The loader's spelling (`torch/lib/../../nvidia`); show the file it reached.
        path = os.path.join(os.path.realpath(os.path.dirname(path)), os.path.basename(path))
    return site_relative(path, sites)


def _broken(by_soname: dict[str, list[Broken]], sites: tuple[str, ...]) -> list[str]:
    lines = []
    for soname, group in sorted(by_soname.items()):
        lines.append(f"  {soname}")
        for b in group:
            owner = f" [{b.needed_by_dist}]" if b.needed_by_dist else ""
            lines.append(f"    needed by {_short(b.needed_by, sites)}{owner} ({b.evidence.value})")
        first = group[0]
        if first.provider:
            owners = ", ".join(first.provider_owners) or "no distribution"
            lines.append(f"    was {_short(first.provider, sites)} [{owners}]")
        lines.append(f"    {first.reason}")
    return lines


def to_text(plan: Plan, specs: tuple[str, ...], sites: tuple[str, ...]) -> str:
    lines = _packages("uninstall", plan.remove)
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
                f"  import of {_short(r.root, sites)} [{r.dist or '-'}] would fail: "
                f"{r.first_missing} not found"
            )
    if plan.requirements_broken:
        lines.append("Would leave requirements unmet:")
        lines += [f"  {r.dist} requires {r.requirement}" for r in plan.requirements_broken]
    if plan.left_hollow:
        lines.append("Would leave hollow (installed, but missing files their RECORD lists):")
        lines += [f" ! {p.name}=={p.version}" for p in plan.left_hollow]
    if plan.rebound:
        lines.append("Would rebind (the loader finds another file):")
        for rb in plan.rebound:
            major = f", CUDA {rb.cuda_major_after}" if rb.cuda_major_after else ""
            lines.append(
                f"  {rb.soname} for {_short(rb.needed_by, sites)}: "
                f"{_short(rb.provider_after, sites)}{major}"
            )
    if plan.preexisting:
        lines.append(
            f"Already broken before this change (not counted): {len(plan.preexisting)} "
            "(see `cudatx doctor`)"
        )
    lines += [f"note: {n}" for n in plan.notes]
    # --dry-run stays until applying arrives (transactions): the suggestion must run as shown.
    command = "cudatx remove " + " ".join(shlex.quote(s) for s in specs) + " --dry-run"
    if plan.safe:
        lines.append("Safe: nothing that loads now would stop loading.")
    else:
        lines.append("Unsafe.")
    if plan.repair is not None:
        verdict = "safe" if plan.repair.safe else "still unsafe"
        names = ", ".join(p.name for p in plan.repair.reinstall)
        lines.append(
            f"Suggested: {command} --repair  (reinstalls {names} after the removal; {verdict})"
        )
    return "\n".join(lines) + "\n"
