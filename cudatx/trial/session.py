"""One trial, run inside the shadow: `python -m cudatx.trial.session`, its spec as JSON on
stdin, its outcomes as JSON on stdout.

For an overlay it runs inside the user and mount namespace (cudatx.trial.shadow) and makes
the mount first, so that it and every process it starts (the judge's interpreters, uv, the
user's commands) see the shadow at the environment's own path, and nothing else on the
machine does. Then: make the planned change with uv (the
same steps, in the same order, as cudatx.txn.apply) where the spec asks for it, then judge.
The judgements before and after the change run in two shadows, each made fresh from the
original: whatever a check writes (a user's command may write anything) never reaches the
other judgement.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict
from typing import Any

from cudatx.codec import convert
from cudatx.discover.dists import scan_distributions
from cudatx.errors import CudatxError
from cudatx.models import Distribution
from cudatx.trial.judge import (
    Check,
    command_checks,
    import_checks,
    judge,
    judge_environ,
    step_checks,
)
from cudatx.txn.confine import withhold
from cudatx.uv import UvFailed, run_uv


def _checks(spec: dict[str, Any]) -> tuple[dict[str, tuple[str, ...]], list[Check]]:
    sites = tuple(spec["sites"])
    dists, _ = scan_distributions(sites)
    timeout = float(spec["timeout"])
    owners, checks = import_checks(spec["python"], dists, timeout)
    checks += step_checks(spec["python"], sites, timeout)
    checks += command_checks(spec["commands"])
    return owners, checks


def _judge(spec: dict[str, Any], cwd: str) -> dict[str, Any]:
    start = time.monotonic()
    owners, checks = _checks(spec)
    environ = judge_environ(spec["prefix"], spec["ld_library_path"])
    outcomes = judge(checks, environ, jobs=spec["jobs"], cwd=cwd)
    return {
        "seconds": time.monotonic() - start,
        "owners": owners,
        "outcomes": {label: asdict(o) for label, o in outcomes.items()},
    }


def _change(spec: dict[str, Any]) -> tuple[float, str | None]:
    """The planned change, made in the shadow: RECORD entries withheld as the transaction
    withholds them (cudatx.txn.confine), then uv's steps. (seconds, uv's error or None)."""
    start = time.monotonic()
    dists = tuple(convert(Distribution, d) for d in spec["withhold"])
    kept = {name: frozenset(paths) for name, paths in spec["kept"].items()}
    try:
        withhold(dists, spec["prefix"], kept)
    except CudatxError as exc:  # said, as uv's failure would be
        return time.monotonic() - start, f"cannot withhold RECORD entries: {exc.message}"
    for argv in spec["uv"]:
        try:
            run_uv(argv[0], argv[1:])
        except UvFailed as exc:  # uv's own error, as a change outside the shadow says it
            return time.monotonic() - start, exc.message
    return time.monotonic() - start, None


def run(spec: dict[str, Any]) -> dict[str, Any]:
    if spec["mount"]:
        done = subprocess.run(spec["mount"], capture_output=True, text=True, check=False)
        if done.returncode != 0:
            return {"error": f"cannot mount the overlay: {done.stderr.strip()}"}
    result: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="cudatx-trial-cwd-") as cwd:
        if spec["change"]:
            seconds, error = _change(spec)
            result["uv_seconds"] = seconds
            if error is not None:
                result["error"] = error
                return result
        result["judged"] = _judge(spec, cwd)
    return result


def main() -> int:
    spec = json.loads(sys.stdin.read())
    json.dump(run(spec), sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
