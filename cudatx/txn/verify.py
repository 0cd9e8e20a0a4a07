"""After uv: did the change do what the plan said, and nothing else?"""

from __future__ import annotations

import os
import subprocess

from cudatx.analysis.ownership import hollow
from cudatx.environment import Environment
from cudatx.errors import VerificationFailed
from cudatx.names import canonical_name
from cudatx.planning.change import Change
from cudatx.planning.diff import diff
from cudatx.planning.models import Plan


def verify(plan: Plan, change: Change, before: Environment, after: Environment) -> None:
    """Raise VerificationFailed when the change did not happen (what leaves is still there,
    what arrives is not), the rescanned environment breaks what the plan did not predict,
    or a distribution no longer matches its RECORD where the plan did not say so."""
    happened(change, after)
    actual = diff(
        before,
        after,
        change.removing,
        change.reinstalling,
        plan.requirements_checked,
        change.staged,
        strict=plan.strict,
    )
    predicted = {(b.needed_by, b.soname) for b in plan.broken}
    surprises = [b for b in actual.broken if (b.needed_by, b.soname) not in predicted]
    if surprises:
        first = surprises[0]
        raise VerificationFailed(
            f"{first.soname} needed by {first.needed_by} broke, which the plan did not predict"
        )
    predicted_roots = {r.root for r in plan.broken_roots}
    new_roots = [r for r in actual.broken_roots if r.root not in predicted_roots]
    if new_roots:
        raise VerificationFailed(
            f"import of {new_roots[0].root} broke, which the plan did not predict"
        )
    # Whatever stays must match its RECORD, except what the plan said the removal would
    # leave hollow (shared paths it deletes and nothing reinstalls) and what already was.
    reinstalled = {d.name for d in (*change.reinstalling, *change.staged)}
    expected = {p.name for p in (*plan.left_hollow, *plan.overwritten)}
    already = {h.name for h in hollow(before)}
    damaged = [
        h
        for h in hollow(after)
        if h.name in reinstalled or (h.name not in expected and h.name not in already)
    ]
    if damaged:
        h = damaged[0]
        raise VerificationFailed(
            f"{h.name} {h.version} does not match its RECORD after the change "
            f"({h.missing} missing, {h.wrong} with other bytes, e.g. {h.examples[:1]})"
        )


def happened(change: Change, after: Environment) -> None:
    """uv said it succeeded; check it (a `--uv` that does nothing exits 0 too)."""
    now = {canonical_name(d.name): d for d in after.distributions}
    arriving = {canonical_name(d.name): d for d in (*change.staged, *change.reinstalling)}
    for dist in change.removing:
        name = canonical_name(dist.name)
        if name not in arriving and (name in now or os.path.lexists(dist.metadata_dir)):
            raise VerificationFailed(
                f"{dist.name} {dist.version} is still installed after uv removed it"
            )
    for name, dist in arriving.items():
        found = now.get(name)
        if found is None or found.version != dist.version:
            was = "missing" if found is None else f"{found.version} instead"
            raise VerificationFailed(
                f"{dist.name} {dist.version} is not installed after uv installed it ({was})"
            )


def run_verify(command: str, prefix: str) -> None:
    """The user's --verify command, in the environment; failing raises VerificationFailed."""
    env = dict(os.environ)
    env["VIRTUAL_ENV"] = prefix
    env["PATH"] = os.path.join(prefix, "bin") + os.pathsep + env.get("PATH", "")
    done = subprocess.run(command, shell=True, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        lines = [ln for ln in (done.stderr or done.stdout).strip().splitlines() if ln.strip()]
        last = lines[-1] if lines else f"exit status {done.returncode}"
        # All it said goes with the error (the CLI shows it above the one line): the last
        # line of a traceback rarely says enough.
        said = done.stdout + done.stderr
        raise VerificationFailed(f"--verify {command!r} failed: {last}", output=said)
