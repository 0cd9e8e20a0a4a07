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
import os
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
from cudatx.sandbox import Confinement, SandboxFailed, confine
from cudatx.trial.judge import (
    Check,
    Reads,
    command_checks,
    gpu_present,
    import_checks,
    judge,
    judge_environ,
    step_checks,
)
from cudatx.trial.told import tell
from cudatx.txn.confine import withhold
from cudatx.uv import UvFailed, run_uv


def _checks(spec: dict[str, Any], gpu: bool) -> tuple[dict[str, tuple[str, ...]], list[Check]]:
    sites = tuple(spec["sites"])
    dists, _ = scan_distributions(sites)
    timeout = float(spec["timeout"])
    owners, checks = import_checks(spec["python"], dists, timeout)
    checks += step_checks(spec["python"], sites, timeout, gpu=gpu)
    checks += command_checks(spec["commands"])
    return owners, checks


def _judged_here(spec: dict[str, Any], cwd: str) -> dict[str, Any]:
    start = time.monotonic()
    environ = judge_environ(spec["prefix"], spec["ld_library_path"])
    gpu, said = gpu_present(spec["python"], environ, float(spec["timeout"]))
    owners, checks = _checks(spec, gpu)
    where = spec.get("progress")

    def told(done: int, total: int, what: str) -> None:
        tell(where, "checks", done, total, what)

    # What the checks read, where the trial would keep this judgement (cudatx.trial.kept)
    reads = Reads(tempfile.gettempdir()) if spec.get("reads") else None
    outcomes = judge(checks, environ, jobs=spec["jobs"], cwd=cwd, told=told, reads=reads)
    judged: dict[str, Any] = {
        "seconds": time.monotonic() - start,
        "owners": owners,
        "outcomes": {label: asdict(o) for label, o in outcomes.items()},
        # whose each framework step is (cudatx.trial.judge.Stepped), for the verdict
        "steps": {c.label: list(c.step) for c in checks if c.step is not None},
        "gpu": said,
    }
    if reads is not None:
        judged["reads"] = {
            "files": sorted(reads.files),
            "folders": sorted(reads.folders),
            "complete": reads.complete,  # a user's command left it False (judge._run)
        }
    return judged


# The judge, run again confined: this very cudatx, wherever it was imported from.
_PARENT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_JUDGE = (
    f"import sys; sys.path.insert(0, {_PARENT!r}); "
    "from cudatx.trial.session import judge_main; sys.exit(judge_main())"
)


def _judge(
    spec: dict[str, Any], cwd: str, confinement: Confinement | None
) -> tuple[dict[str, Any], tuple[str, ...]]:
    """The judgement, and the folders its code could write. Confined, every import, step
    and `--trial-cmd` runs in one sandbox where only the shadow's prefix and the session's
    own temporary folder (its TMPDIR, which holds the working folder `cwd`) can be written:
    not uv's cache, not the user's files; a write elsewhere fails with EROFS."""
    if confinement is None:
        return _judged_here(spec, cwd), ()
    scratch = tempfile.gettempdir()
    writable = [spec["prefix"], *([] if _under(cwd, scratch) else [cwd]), scratch]
    how = confine([sys.executable, "-c", _JUDGE], writable, probed=confinement)
    done = subprocess.run(
        list(how.argv),
        input=json.dumps({**spec, "cwd": cwd}),
        capture_output=True,
        text=True,
        check=False,
        env=how.env,
    )
    how.check(done.returncode, done.stderr)
    if done.returncode != 0:
        lines = done.stderr.strip().splitlines() or [f"exit status {done.returncode}"]
        raise SandboxFailed(f"the confined judge failed: {lines[-1]}")
    judged: dict[str, Any] = json.loads(done.stdout)
    return judged, how.writable


def _under(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def judge_main() -> int:
    """The confined judge's entry point: the spec (with `cwd`) on stdin, the judgement as
    JSON on stdout."""
    spec = json.loads(sys.stdin.read())
    json.dump(_judged_here(spec, spec["cwd"]), sys.stdout)
    return 0


def _confinement(spec: dict[str, Any]) -> Confinement | None:
    """The guarantee the command's probe found, as this session makes it (uid 0 of the
    overlay's user namespace: the plain mount namespace mode); None where none held."""
    said = spec.get("sandbox")
    if not said or said["mode"] == "none":
        return None
    probed = Confinement(said["mode"], str(said["reason"]), bool(said["locked"]))
    return probed.inside_namespace()


def _change(spec: dict[str, Any], confinement: Confinement | None) -> tuple[float, str | None]:
    """The planned change, made in the shadow: RECORD entries withheld as the transaction
    withholds them (cudatx.txn.confine), then uv's steps. (seconds, uv's error or None)."""
    start = time.monotonic()
    dists = tuple(convert(Distribution, d) for d in spec["withhold"])
    kept = {name: frozenset(paths) for name, paths in spec["kept"].items()}
    try:
        withhold(dists, spec["prefix"], kept)
    except CudatxError as exc:  # said, as uv's failure would be
        return time.monotonic() - start, f"cannot withhold RECORD entries: {exc.message}"
    # uv may write the shadow and its cache, nothing else (cudatx.sandbox)
    writable = [spec["prefix"], *([spec["uv_cache"]] if spec.get("uv_cache") else [])]
    confined = (confinement, writable) if confinement is not None else None
    for done, argv in enumerate(spec["uv"]):
        tell(spec.get("progress"), "uv", done, len(spec["uv"]), "uv " + " ".join(argv[1:3]))
        try:
            run_uv(argv[0], argv[1:], confined=confined)
        except UvFailed as exc:  # uv's own error, as a change outside the shadow says it
            return time.monotonic() - start, exc.message
    return time.monotonic() - start, None


def run(spec: dict[str, Any]) -> dict[str, Any]:
    if spec["mount"]:
        done = subprocess.run(spec["mount"], capture_output=True, text=True, check=False)
        if done.returncode != 0:
            return {"error": f"cannot mount the overlay: {done.stderr.strip()}"}
    result: dict[str, Any] = {}
    confinement = _confinement(spec)
    try:
        with tempfile.TemporaryDirectory(prefix="cudatx-trial-cwd-") as cwd:
            if spec["change"]:
                seconds, error = _change(spec, confinement)
                result["uv_seconds"] = seconds
                if error is not None:
                    result["error"] = error
                    return result
            result["judged"], writable = _judge(spec, cwd, confinement)
            result["writable"] = list(writable)
    except SandboxFailed as exc:
        # The sandbox the probe promised could not be made: the trial did not run as it
        # must, which is no verdict on the change (TrialFailed, cudatx.trial.run).
        return {"sandbox_failed": exc.message}
    return result


def main() -> int:
    spec = json.loads(sys.stdin.read())
    json.dump(run(spec), sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
