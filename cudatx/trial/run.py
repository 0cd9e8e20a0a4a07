"""A trial: the planned change made for real in a shadow of the environment, judged by the
real interpreter before and after (cudatx.trial.session), the original never written.

It runs the environment's code (every top-level package's import, each framework's load
steps, the user's commands), as `--verify` does: only when asked (`--trial`), and never as
root on an environment another user can write (refuse_root_on_shared).
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from cudatx import interrupts
from cudatx.codec import encode
from cudatx.environment import Environment
from cudatx.errors import CudatxError, ExitCode
from cudatx.models import PythonTarget, SandboxUsed
from cudatx.planning.change import Change, uv_steps
from cudatx.sandbox import Confinement, probe
from cudatx.trial import kept
from cudatx.trial.judge import IMPORT_TIMEOUT, Outcome, Stepped, judge_environ
from cudatx.trial.shadow import METHODS, Shadow, shadow
from cudatx.trial.told import TrialStep, heard
from cudatx.trust import refuse_root_running_code
from cudatx.uv import UvOptions, cache_dir


class TrialFailed(CudatxError):
    """The trial itself could not run (its session died, the namespace vanished)."""

    exit_code = ExitCode.TRIAL


@dataclass(frozen=True)
class Judged:
    """One judgement of the shadow: outcomes by check, who installs each module, and whose
    each framework step is."""

    outcomes: dict[str, Outcome]
    owners: dict[str, tuple[str, ...]]
    seconds: float
    gpu: str = ""  # what the GPU probe found (cudatx.trial.judge.gpu_present), in words
    steps: dict[str, Stepped] = field(default_factory=dict)  # by label


@dataclass(frozen=True)
class TrialRun:
    shadow: Shadow
    before: Judged  # in a shadow of its own
    after: Judged | None  # None: no change asked (doctor), or the change failed
    uv_seconds: float
    error: str | None  # uv's error in the shadow
    # the confinement the trial's code ran under, and what it could write (cudatx.sandbox)
    sandbox: SandboxUsed | None = None
    # the judgement before was kept from an earlier trial (cudatx.trial.kept): the number
    # of files and folders it read, none changed since; 0: judged in this trial
    before_kept: int = 0


@dataclass(frozen=True)
class TrialOptions:
    commands: tuple[str, ...] = ()  # --trial-cmd
    methods: tuple[str, ...] = METHODS  # shadow methods, in order of preference
    timeout: float = IMPORT_TIMEOUT  # each import and step
    jobs: int | None = None  # at once; None: the cores
    # The confinement this machine gives (cudatx.sandbox), asked once by the trial: the
    # CLI's probe of the command (cudatx.cli.options.prober), shared with its apply
    sandbox: Callable[[], Confinement] = field(default=probe)
    # where the trial is, as it goes (cudatx.trial.told): what a person at a terminal sees
    progress: Callable[[TrialStep], None] = field(default=lambda step: None)


def refuse_root_on_shared(target: PythonTarget) -> None:
    """A trial runs the environment's code: as root, never where another user can change
    any of it, who would choose that code (as OpenSSH's StrictModes refuses such files,
    auth.c safe_path). Everything the interpreter could import or execute is walked, not
    only the top of the site folders (cudatx.trust.code_writers); no --allow-other-writers
    excuses it."""
    refuse_root_running_code(target, what="a trial")


# Nothing is built in a trial, as in a dry run: uv_steps gives uv `--only-binary :all:`
# unless the user passed --allow-build (cudatx.uv.pip_argv; uv refuses --no-build beside
# it). --link-mode copy: uv's default hard-links files from its cache, and a write in the
# shadow (a user's command) would then change the cache's bytes, which later installs copy.
_INSTALL = ("--link-mode", "copy")


def _judged(data: dict[str, object]) -> Judged:
    outcomes = data["outcomes"]
    owners = data["owners"]
    seconds = data["seconds"]
    steps = data.get("steps", {})
    assert isinstance(outcomes, dict) and isinstance(owners, dict) and isinstance(steps, dict)
    assert isinstance(seconds, float | int)
    return Judged(
        {label: Outcome(bool(o["ok"]), str(o["error"])) for label, o in outcomes.items()},
        {name: tuple(who) for name, who in owners.items()},
        float(seconds),
        str(data.get("gpu", "")),
        {label: Stepped(str(framework), bool(gpu)) for label, (framework, gpu) in steps.items()},
    )


def run_trial(
    env: Environment,
    change: Change | None,
    uv: str | None,
    uv_options: UvOptions | Sequence[str],
    options: TrialOptions,
) -> TrialRun:
    """Judge the environment in a shadow; with `change`, make it in a second shadow, fresh
    from the original, and judge again (a check of the first judgement, a user's command,
    may write anything in its shadow: it must not reach the second)."""
    target = env.target
    refuse_root_on_shared(target)
    # SIGTERM and SIGHUP end a trial as ^C does (cudatx.interrupts): each shadow's `with`
    # takes it down, and each session's process group is killed, on the way out.
    confinement = options.sandbox()
    with interrupts.raised():
        return _both(env, change, uv, uv_options, options, confinement)


def _both(
    env: Environment,
    change: Change | None,
    uv: str | None,
    uv_options: UvOptions | Sequence[str],
    options: TrialOptions,
    confinement: Confinement,
) -> TrialRun:
    held = {"mode": confinement.mode, "reason": confinement.reason, "locked": confinement.locked}
    how = _How(held, "")
    if change is not None and uv is not None and confinement.held:
        # The cache uv writes to, made before the sandbox binds it (as the apply does)
        cache = cache_dir(uv)
        if cache:
            os.makedirs(cache, exist_ok=True)
        how = _How(held, cache)
    started = time.time_ns()
    target = env.target
    scan_cache = env.view.cache if not options.commands else None
    looked_up = kept.facts(
        target.python,
        target.site_packages,
        env.ld_library_path,
        judge_environ(target.prefix, env.ld_library_path),
        options.timeout,
        held,
    )
    remembered = None
    if change is not None:
        remembered = kept.recall(scan_cache, target.prefix, looked_up, target.site_packages)
    made_after = None  # the session after the change, where it ran first
    if remembered is not None:
        made_after = _session(env, change, uv, uv_options, options, how, "after")
        second, after, uv_seconds, error, writable, _ = made_after
        earlier = replace(_judged(remembered[0]), seconds=0.0)  # no time of this trial's
        # The GPU probe runs in every trial: a machine that answers otherwise now (a
        # driver installed) is judged before the change again, beside that session.
        if after is None or after.gpu == earlier.gpu:
            used = confinement.used(writable)
            return TrialRun(second, earlier, after, uv_seconds, error, used, remembered[1])
    alone = "before" if change is not None else "as is"  # doctor's: no change to judge
    first, before, _, _, writable, judged = _session(
        env, None, uv, uv_options, options, how, alone, reads=scan_cache is not None
    )
    assert before is not None  # _session raises where a judgement without a change fails
    assert judged is not None
    kept.keep(
        scan_cache,
        target.prefix,
        looked_up,
        judged,
        target.site_packages,
        first.original_path,
        started,
    )
    if change is None:
        return TrialRun(first, before, None, 0.0, None, confinement.used(writable))
    second, after, uv_seconds, error, writable, _ = made_after or _session(
        env, change, uv, uv_options, options, how, "after"
    )
    both = replace(
        first,
        seconds=first.seconds + second.seconds,
        bytes_copied=first.bytes_copied + second.bytes_copied,
    )
    return TrialRun(both, before, after, uv_seconds, error, confinement.used(writable))


@dataclass(frozen=True)
class _How:
    """What each session is told of its sandbox: the probe's answer, uv's cache."""

    sandbox: dict[str, object]
    uv_cache: str


# The session runs this very cudatx, wherever it was imported from (an installed package, a
# checkout put on sys.path by hand): its folder goes first on the child's sys.path.
_SESSION = (
    f"import sys; sys.path.insert(0, {os.path.dirname(os.path.dirname(__file__))!r}); "
    "from cudatx.trial.session import main; sys.exit(main())"
)


def _session(
    env: Environment,
    change: Change | None,
    uv: str | None,
    uv_options: UvOptions | Sequence[str],
    options: TrialOptions,
    how: _How,
    judging: str,
    *,
    reads: bool = False,
) -> tuple[Shadow, Judged | None, float, str | None, tuple[str, ...], dict[str, Any] | None]:
    """One shadow, made fresh: the change made in it (where given), then judged; the
    folders the judged code could write (none where it ran unconfined); and the judgement
    as the session said it. `judging`: which judgement, as its progress says
    (cudatx.trial.told.TrialStep); `reads`: the checks say what they read, for keeping the
    judgement (cudatx.trial.kept)."""
    target = env.target
    options.progress(TrialStep(judging, "shadow"))
    with shadow(target.prefix, options.methods) as shade:
        spec: dict[str, Any] = {
            "mount": list(shade.mount),
            "python": shade.relocate(target.python),
            "prefix": shade.prefix,
            "sites": [shade.relocate(s) for s in target.site_packages],
            "ld_library_path": env.ld_library_path,
            "timeout": options.timeout,
            "jobs": options.jobs or os.cpu_count() or 1,
            "commands": list(options.commands),
            "change": change is not None,
            "uv": [],
            "withhold": [],
            "kept": {},
            "sandbox": how.sandbox,
            "uv_cache": how.uv_cache,
            "reads": reads,
        }
        if change is not None:
            assert uv is not None
            touched = (*change.removing, *change.reinstalling)
            steps = uv_steps(uv, shade.prefix, change, uv_options, _INSTALL)
            spec["uv"] = [list(step.argv) for step in steps]
            spec["withhold"] = [json.loads(encode(_relocated(shade, d))) for d in touched]
            spec["kept"] = {name: sorted(paths) for name, paths in change.kept.items()}
        argv = [*shade.wrap, sys.executable, "-c", _SESSION]
        # The session's temporary files (its working folder, uv's, a `--trial-cmd`'s) go in
        # the shadow's folder, which goes with the shadow, however the trial ends.
        scratch = os.path.join(shade.folder, "tmp")
        os.makedirs(scratch, 0o700, exist_ok=True)
        environ = {**os.environ, "TMPDIR": scratch}
        spec["progress"] = os.path.join(scratch, "progress.json")
        try:
            # In a process group of its own, killed whole when the wait ends: the imports
            # and the user's commands it started never outlive the trial.
            with heard(spec["progress"], judging, options.progress):
                done = interrupts.run_in_group(argv, input=json.dumps(spec), env=environ)
        except OSError as exc:
            raise TrialFailed(f"cannot start the trial: {exc.strerror or exc}") from None
        if done.returncode != 0:
            lines = done.stderr.strip().splitlines() or [f"exit status {done.returncode}"]
            raise TrialFailed(f"the trial failed: {lines[-1]}")
        result = json.loads(done.stdout)
    if "sandbox_failed" in result:
        # Not a verdict on the change: the trial could not run as promised.
        raise TrialFailed(f"the trial failed: {result['sandbox_failed']}")
    judged = result.get("judged")
    error = result.get("error")
    if judged is None and error is None:
        raise TrialFailed("the trial failed: its session said nothing")
    if judged is None and change is None:
        raise TrialFailed(f"the trial failed: {error}")
    return (
        shade,
        _judged(judged) if judged is not None else None,
        float(result.get("uv_seconds", 0.0)),
        error,
        tuple(result.get("writable", ())),
        judged,
    )


def _relocated(shade: Shadow, dist: object) -> object:
    from cudatx.models import Distribution

    assert isinstance(dist, Distribution)
    return replace(
        dist, site=shade.relocate(dist.site), metadata_dir=shade.relocate(dist.metadata_dir)
    )
