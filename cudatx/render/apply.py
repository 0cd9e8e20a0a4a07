"""An apply as a person watches it: a line for each phase, then a summary in uv's words
("Uninstalled 2 packages in 0.41s"), the snapshot's size and the command that undoes it."""

from __future__ import annotations

import shlex

from cudatx.errors import one_line
from cudatx.models import SandboxUsed
from cudatx.names import counted
from cudatx.render import as_text
from cudatx.txn.apply import Applied, Phase
from cudatx.txn.journal import Package

_VERBS = {
    "snapshot": "Saving a snapshot of",
    "uninstall": "Uninstalling",
    "install": "Installing",
    "reinstall": "Reinstalling",
    "verify": "Verifying:",
    "commit": "Committing",
    "rollback": "Rolling back",
}


def size(n: int) -> str:
    """Bytes as uv writes them: binary units, one decimal."""
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{n} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def duration(seconds: float) -> str:
    return f"{seconds * 1000:.0f}ms" if seconds < 1 else f"{seconds:.2f}s"


def step(phase: Phase) -> str:
    """The line for a phase: `cudatx: Uninstalling 2 packages...` as it starts, the same
    with its time once it is done (or `failed after` its time)."""
    text = one_line(f"{_VERBS.get(phase.name, phase.name)} {phase.detail}".strip())
    if not phase.done:
        return f"cudatx: {text}..."
    if phase.failed:
        return f"cudatx: {text}: failed after {duration(phase.seconds)}"
    return f"cudatx: {text}: done in {duration(phase.seconds)}"


def _packages(verb: str, sign: str, packages: tuple[Package, ...], took: float | None) -> list[str]:
    if not packages:
        return []
    noun = "package" if len(packages) == 1 else "packages"
    head = f"{verb} {len(packages)} {noun}"
    if took is not None:
        head += f" in {duration(took)}"
    return [head, *(f" {sign} {p.name}=={p.version}" for p in packages)]


def _confinement(used: SandboxUsed | None) -> list[str]:
    """Which guarantee held while uv changed the environment (cudatx.sandbox)."""
    if used is None:
        return []
    if used.mode == "none":
        return [f"uv ran unconfined (none: {used.reason}): only cudatx's own checks held"]
    held = used.mode if used.locked else f"{used.mode}, not locked: {used.reason}"
    return [f"uv ran confined ({held})"]


def summary(applied: Applied, prefix: str) -> str:
    seconds = dict(applied.seconds)
    lines = [
        *_packages("Uninstalled", "-", applied.removed, seconds.get("uninstall")),
        *_packages("Installed", "+", applied.installed, seconds.get("install")),
        *_packages("Reinstalled", "~", applied.reinstalled, seconds.get("reinstall")),
        *_confinement(applied.sandbox),
    ]
    saved = applied.snapshot
    copied = saved.bytes - saved.linked
    lines.append(
        f"Snapshot: {counted(saved.files, 'file')}, {size(saved.bytes)} on disk "
        f"({size(saved.linked)} of it hard links to the old files, {size(copied)} copied) "
        f"in {applied.folder}; "
        f"`{shlex.join(['cudatx', 'history', 'prune', '--keep', '1', '--python', prefix])}` "
        "frees the older ones (the latest is always kept)"
    )
    total = sum(seconds.values())
    lines.append(f"Verified in {duration(seconds.get('verify', 0.0))}; {duration(total)} in all")
    undo = shlex.join(["cudatx", "rollback", applied.id, "--python", prefix])
    lines.append(f"Applied as transaction {applied.id}; undo it with: {undo}")
    return as_text(lines)
