"""`check-requirements`: would bringing the environment in line with a file break loading?

A file that pins every installed distribution (as `uv pip freeze` writes it), or a lock
file, is the complete environment: bringing the environment in line means `uv pip sync`,
which uninstalls what the file no longer lists. Any other file means `uv pip install -r`.
Either way the transaction is planned as `cudatx sync`/`install` plans it (uv's dry run,
staged, simulated). Where git tracks the file, the committed version is read too, so that
each distribution the plan touches is blamed on the line that changed.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import replace

from cudatx.analysis.commands import cudatx_line
from cudatx.environment import Environment
from cudatx.errors import CudatxError
from cudatx.models import Frozen
from cudatx.planning import building
from cudatx.planning.change import Planning, propose
from cudatx.planning.models import Plan
from cudatx.planning.plan import PlanOptions, plan_change
from cudatx.planning.reqfiles import Pin, RequirementsFile, read_requirements

# What `uv pip sync` keeps though a file does not list it (seen with uv 0.13.9: a freeze
# without pip and setuptools syncs to "Would make no changes").
SEED = frozenset({"pip", "setuptools", "wheel"})


class Blame(Frozen):
    name: str  # the distribution the plan changes
    change: str  # "uninstall", "install" or "upgrade"
    line: int | None  # in the file now (install, upgrade) or in the committed one (uninstall)
    text: str | None  # that line as written
    edited: bool  # the line differs from the committed version (False: no git, or drift)


class FileCheck(Frozen):
    path: str
    kind: str
    mode: str  # "sync" or "install"
    committed: bool  # a committed version was compared
    plan: Plan
    blame: tuple[Blame, ...]
    fix: tuple[str, ...]
    command: str  # the cudatx command that plans this file's change, as its plan repeats it


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


def _pinned(pin: Pin) -> bool:
    return pin.version is not None or pin.url is not None


def _complete(env: Environment, files: Sequence[RequirementsFile]) -> bool:
    """Whether the file (now or as committed) stands for the whole environment."""
    if any(f.lock for f in files):
        return True
    if not all(_pinned(p) for f in files for p in f.entries):
        return False
    listed = {p.name for f in files for p in f.entries}
    return all(d.name in listed or d.name in SEED for d in env.distributions)


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
    for nv in plan.install:
        pin = current.get(nv.name)
        was = old.get(nv.name)
        out.append(
            Blame(
                name=nv.name,
                change="upgrade" if nv.name in upgraded else "install",
                line=pin.line if pin else None,
                text=pin.text if pin else None,
                edited=before is not None and (was is None or was.text != (pin and pin.text)),
            )
        )
    return tuple(out)


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
) -> FileCheck:
    """`mode`: "sync", "install", or "auto" (sync for a lock, or for a file of pins that,
    now or as committed, lists every installed distribution)."""
    now = read_requirements(path, markers=env.target.markers, extras=extras)
    text = committed_text(path)
    before = None
    if text is not None:
        try:
            before = read_requirements(path, markers=env.target.markers, extras=extras, text=text)
        except CudatxError:
            before = None  # a committed version that does not parse blames nothing
    if mode == "auto":
        complete = _complete(env, [f for f in (now, before) if f is not None])
        mode = "sync" if complete else "install"
    if not planning.allow_build:
        # Named by their lines before uv sees them: a checked repository's own code (an
        # editable, a local folder, a VCS or sdist URL) must not run on a reviewer's machine.
        building.refuse(building.unbuilt_pins(now.entries))
    if mode == "install" and not now.entries:
        plan = plan_change(env, (), (), PlanOptions())  # nothing to install: nothing changes
    else:
        with tempfile.TemporaryDirectory(prefix="cudatx-check-") as folder:
            written = _write(now.entries, folder)
            args = [written] if mode == "sync" else ["-r", written]
            # The file's own options (`--index-url` in a requirements file) come with it.
            uv_options = (*planning.uv_options, *now.options)
            plan = propose(env, mode, args, replace(planning, uv_options=uv_options)).plan
    blame = _blame(plan, now, before)
    return FileCheck(
        path=path,
        kind=now.kind,
        mode=mode,
        committed=before is not None,
        plan=plan,
        blame=blame,
        fix=_fix(env, path, plan, blame, mode, planning.uv_options) if not plan.safe else (),
        command=cudatx_line(env, _words(mode, path), uv=planning.uv_options),
    )
