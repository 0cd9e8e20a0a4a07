"""Options shared by several commands, each declared once, and the values they parse into."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar, cast

import click

from cudatx.cli.output import Output
from cudatx.errors import CudatxError, EnvironmentNotFound, UsageError

if TYPE_CHECKING:
    from cudatx.discover.target import Query
    from cudatx.planning.change import Planning
    from cudatx.sandbox import Confinement
    from cudatx.uv import UvOptions

F = TypeVar("F", bound=Callable[..., Any])


def _apply(command: F, decorators: list[Callable[[F], F]]) -> F:
    for decorator in reversed(decorators):
        command = decorator(command)
    return command


def python_option(command: F) -> F:
    """--python, accepted by every subcommand."""
    return click.option(
        "--python",
        "-p",
        metavar="PATH",
        default=None,
        help="Interpreter or environment folder to inspect [default: as uv finds it: "
        "VIRTUAL_ENV, CONDA_PREFIX, .venv here or above, then cudatx's own Python, but "
        "never for a command that changes an environment].",
    )(command)


def other_writers_option(command: F) -> F:
    """--allow-other-writers: the user accepts an environment or interpreter another user can
    write (cudatx.trust); the command receives it as `allow_other_writers`."""
    return click.option(
        "--allow-other-writers",
        is_flag=True,
        help="Change, roll back or run the interpreter of an environment that another user "
        "can write too [default: refused, as OpenSSH's StrictModes refuses; read-only "
        "commands run such an interpreter as its owner, never as root].",
    )(command)


class Target(NamedTuple):
    """The environment a command reads or changes, and how: resolved once as the command
    starts (target_options) and handed down as a value, as uv hands down its printer. The
    interpreter is asked once (`query`, whose answer every scan of the command reuses, the
    rescan after an apply included); what its site folders' files make of sys.path is read
    again at each scan (cudatx.discover.target.site_path)."""

    python: str | None  # as --python named it
    query: Query | None  # the interpreter, being asked; None where not found (or not sought)
    unfound: CudatxError | None  # why not (raised when the command first needs it)
    ld_library_path: str | None  # the option, else LD_LIBRARY_PATH; None for none
    use_cache: bool  # not --no-cache
    progress: bool  # not --no-progress (a bar still needs a terminal)
    allow_other_writers: bool
    output: Output  # --color, -q, -v: how the command talks
    # The confinement this machine gives uv and a trial (cudatx.sandbox), probed when a
    # command first applies or runs a trial, once for the command (see `prober`)
    sandbox: Callable[[], Confinement]

    def asked(self) -> Query:
        """The interpreter's query; the reason it has none, raised."""
        if self.query is None:
            assert self.unfound is not None
            raise self.unfound
        return self.query

    def require_environment(self) -> None:
        """Refuse a change where nothing named an environment (cudatx.discover.target)."""
        from cudatx.discover.target import refuse_fallback

        refuse_fallback(self.asked().found_by)

    def answered_for(self, prefix: str) -> bool:
        """Whether this target's interpreter is that of the environment at `prefix` (its
        answer, if it has one by now)."""
        from cudatx.errors import EnvironmentNotFound

        if self.query is None:
            return False
        try:
            return self.query.result().prefix == prefix
        except EnvironmentNotFound:
            return False

    def retarget(self, python: str) -> Target:
        """The same settings for another interpreter, asked now (check-requirements checks
        the environment its hook names, and an empty one it makes)."""
        query, unfound = _ask(python, self.allow_other_writers)
        return self._replace(python=python, query=query, unfound=unfound)


def _ask(python: str | None, accept: bool) -> tuple[Query | None, CudatxError | None]:
    """Find the interpreter as uv does and start asking it (a subprocess); or why not."""
    from cudatx.discover.target import start_query

    try:
        return start_query(python, accept_writers=accept), None
    except CudatxError as exc:
        return None, exc  # said when the command needs the interpreter, if it does


# `CUDATX_SANDBOX=off`: uv and the trial run unconfined, with only cudatx's own checks (a
# machine whose namespaces misbehave; the tests of the fallback). Read once, here.
SANDBOX_VARIABLE = "CUDATX_SANDBOX"


def prober(setting: str) -> Callable[[], Confinement]:
    """The command's probe (cudatx.sandbox.probe): run when first asked, its answer kept
    for the rest of the command, the trial's and the apply's alike; never run for a
    command that does neither (a dry run pays nothing). `setting`: CUDATX_SANDBOX's value."""
    found: list[Confinement] = []

    def probed() -> Confinement:
        if not found:
            from cudatx import sandbox

            if setting.strip().lower() == "off":
                found.append(sandbox.Confinement(sandbox.NONE, f"{SANDBOX_VARIABLE}=off"))
            else:
                found.append(sandbox.probe())
        return found[0]

    return probed


def target(
    python: str | None,
    ld_library_path: str | None,
    *,
    use_cache: bool,
    progress: bool,
    allow_other_writers: bool,
    output: Output,
    discover: bool = True,
) -> Target:
    """A Target, its interpreter being asked; a refusal to find the interpreter waits in the
    value until the command needs it. The one place a command's target is made.
    `discover`: False where no --python means the command finds its environment itself (the
    pre-commit hook's): then nothing is asked, and the target has no query."""
    import os

    query: Query | None = None
    unfound: CudatxError | None = EnvironmentNotFound("no --python, and none is looked for")
    if python or discover:
        query, unfound = _ask(python, allow_other_writers)
    if ld_library_path is None:
        ld_library_path = os.environ.get("LD_LIBRARY_PATH")
    return Target(
        sandbox=prober(os.environ.get(SANDBOX_VARIABLE, "")),
        python=python,
        query=query,
        unfound=unfound,
        ld_library_path=ld_library_path or None,
        use_cache=use_cache,
        progress=progress,
        allow_other_writers=allow_other_writers,
        output=output,
    )


def store_target(python: str | None, out: Output, *, allow_other_writers: bool = False) -> Target:
    """The target of a command that scans nothing (rollback, history, trace): --python found
    and asked as for every command (`target`), with the scan's settings left at their
    defaults, which such a command never reads."""
    return target(
        python,
        None,
        use_cache=True,
        progress=True,
        allow_other_writers=allow_other_writers,
        output=out,
    )


def python_target(command: F) -> F:
    """--python and --allow-other-writers, for the commands that scan nothing but read or
    write the environment's store (rollback, trace): the command receives them as `chosen:
    Target` (store_target), and its output settings as `out` still."""
    run = command

    @functools.wraps(run)
    def started(
        *args: Any, python: str | None, allow_other_writers: bool, out: Output, **kwargs: Any
    ) -> Any:
        chosen = store_target(python, out, allow_other_writers=allow_other_writers)
        return run(*args, chosen=chosen, out=out, **kwargs)

    return _apply(cast(F, started), [python_option, other_writers_option])


def target_options(command: F) -> F:
    """--python, --ld-library-path, --allow-other-writers, --no-cache and --no-progress, for
    the subcommands that replay the loader; the command receives them, with its output
    settings (`out`), as `target: Target`.

    The target interpreter is asked about itself (a subprocess) as the command starts,
    before the command imports the core: the two overlap, and the scan collects the answer.
    """
    return _target_options(command, hook=False)


def hook_target_options(command: F) -> F:
    """target_options for `check-requirements`, the pre-commit hook's command: under
    pre-commit with no --python nothing is asked as the command starts, since pre-commit's
    VIRTUAL_ENV is its own environment, never the one checked; the command finds the
    project's .venv (cudatx.discover.target.hook_target) and asks that, once."""
    return _target_options(command, hook=True)


def _target_options(command: F, *, hook: bool) -> F:
    run = command

    @functools.wraps(run)
    def started(
        *args: Any,
        python: str | None,
        ld_library_path: str | None,
        allow_other_writers: bool,
        no_cache: bool,
        no_progress: bool,
        out: Output,
        **kwargs: Any,
    ) -> Any:
        discover = True
        if hook:
            from cudatx.discover.target import under_pre_commit

            discover = not under_pre_commit()
        chosen = target(
            python,
            ld_library_path,
            use_cache=not no_cache,
            progress=not no_progress,
            allow_other_writers=allow_other_writers,
            output=out,
            discover=discover,
        )
        return run(*args, target=chosen, **kwargs)

    flags = [
        click.option(flag, is_flag=True, help=text)
        for flag, text in (
            ("--no-progress", "Draw no progress bar on stderr (one shows only on a terminal)."),
            ("--no-cache", "Read every file afresh, and neither read nor write the scan cache."),
        )
    ]
    return _apply(
        cast(F, started),
        [
            python_option,
            other_writers_option,
            click.option(
                "--ld-library-path",
                metavar="PATH",
                default=None,
                help="LD_LIBRARY_PATH of the process that will load the libraries "
                "[default: the current value; '' for none].",
            ),
            *flags,
        ],
    )


if TYPE_CHECKING:
    _Choice = click.Choice[str]
else:  # click.Choice takes a type parameter from click 8.4 on; cudatx runs on 8.1 too
    _Choice = click.Choice


class _Formats(_Choice):
    """The formats that write a kind of report (cudatx.render.formats), then `extra` (the
    ones a command makes itself: graph's pictures), as they are when they are asked for: a
    format registered after the command was declared is offered too."""

    def __init__(self, kind: str, extra: tuple[str, ...] = ()) -> None:
        super().__init__(())
        self.kind = kind
        self.extra = extra

    @property
    def choices(self) -> tuple[str, ...]:
        from cudatx.render.formats import formats

        return (*formats(self.kind), *self.extra)

    @choices.setter
    def choices(self, value: object) -> None:
        """click.Choice sets its choices as it is made: these are the registry's."""


def format_option(
    kind: str, what: str, more: str = "", extra: tuple[str, ...] = ()
) -> Callable[[F], F]:
    """--format FORMAT (`text` by default) and --json, its alias for `--format json`: how
    every command chooses what it prints, declared once. FORMAT is one of the formats that
    write the command's `kind` of report (cudatx.render.formats), or of `extra`, which the
    command makes itself; the command receives the format chosen as `fmt`. `more`: what the
    help adds about the formats past text and json."""

    def decorate(command: F) -> F:
        run = command

        @functools.wraps(run)
        def chosen(*args: Any, output_format: str | None, as_json: bool, **kwargs: Any) -> Any:
            if as_json and output_format not in (None, "json"):
                raise UsageError(f"--json is --format json, not --format {output_format}")
            return run(*args, fmt="json" if as_json else output_format or "text", **kwargs)

        return _apply(
            cast(F, chosen),
            [
                click.option(
                    "--format",
                    "output_format",
                    type=_Formats(kind, extra),
                    default=None,
                    help=f"Print {what} as text or JSON on stdout (the same at a terminal "
                    f"and in a pipe){more} [default: text].",
                ),
                click.option("--json", "as_json", is_flag=True, help="The same as --format json."),
            ],
        )

    return decorate


# NamedTuples, not dataclasses, here: importing dataclasses imports inspect, 12 ms of every
# `cudatx --version` (python -X importtime).
class UvSource(NamedTuple):
    """Which uv, and where it finds wheels."""

    uv: str | None
    options: UvOptions


def uv_options(command: F) -> F:
    """--uv, --offline, --find-links, --index-url, --extra-index-url and --allow-build, passed
    on to every uv that resolves, stages or installs; the command receives them as
    `source: UvSource`."""
    run = command

    @functools.wraps(run)
    def parsed(
        *args: Any,
        uv: str | None,
        offline: bool,
        find_links: tuple[str, ...],
        index_url: str | None,
        extra_index_url: tuple[str, ...],
        allow_build: bool,
        **kwargs: Any,
    ) -> Any:
        from cudatx.uv import UvOptions  # subprocess and shutil: not for --help

        no_deps = bool(kwargs.pop("no_deps", False))  # only where no_deps_option is given
        options = UvOptions(offline, find_links, index_url, extra_index_url, no_deps, allow_build)
        return run(*args, source=UvSource(uv, options), **kwargs)

    return _apply(
        cast(F, parsed),
        [
            click.option("--offline", is_flag=True, help="Pass --offline to uv."),
            click.option(
                "--find-links",
                metavar="DIR|URL",
                multiple=True,
                help="Passed to uv (where wheels are).",
            ),
            click.option("--index-url", "-i", metavar="URL", default=None, help="Passed to uv."),
            click.option("--extra-index-url", metavar="URL", multiple=True, help="Passed to uv."),
            click.option(
                "--allow-build",
                is_flag=True,
                help="Let uv build sdists, local folders, editables and VCS checkouts (runs "
                "their setup.py or build backend) [default: wheels only; what needs a build "
                "is named and refused].",
            ),
            click.option(
                "--uv",
                metavar="PATH",
                default=None,
                help="The uv binary [default: the uv package's].",
            ),
        ],
    )


def no_deps_option(command: F) -> F:
    """--no-deps, for the commands that install: passed to uv, which then installs only what
    is named (how prebuilt extensions and NVIDIA wheels are installed). Give it above
    `uv_options`, which receives it."""
    return click.option(
        "--no-deps",
        is_flag=True,
        help="Pass --no-deps to uv: install only what is named, not its dependencies "
        "(`uv pip sync` installs exactly what its files list anyway).",
    )(command)


class ChangeRequest(NamedTuple):
    """How to carry out a change (remove, install, sync), as the command line asks."""

    dry_run: bool
    force: bool
    yes: bool
    ignore_running: bool
    strict_running: bool
    verify: str | None
    repair: bool
    check_requirements: bool
    strict: bool
    fmt: str  # --format: which format the plan is printed in (cudatx.render.formats)
    # change a Python its distributor manages (PEP 668's EXTERNALLY-MANAGED), as uv's flag
    break_system_packages: bool = False


class TrialRequest(NamedTuple):
    """A trial as the command line asks for one (--trial, --trial-cmd): None without."""

    commands: tuple[str, ...]
    methods: tuple[str, ...]  # the shadow's ways, in order of preference


TRIAL_HELP = (
    "Make the change in a shadow of the environment first (an overlay in a user namespace, "
    "a reflink copy or a copy: the environment is never written) and import every "
    "top-level package there before and after, with each framework's load steps; what "
    "worked before and fails after makes the plan unsafe, and an apply stops before "
    "touching the environment. This RUNS THE ENVIRONMENT'S CODE (as --verify does): never "
    "without this flag, and never as root on an environment another user can write."
)


_METHODS = ("overlay", "reflink", "copy")  # cudatx.trial.shadow.METHODS, not imported to parse


def trial_options(help_text: str = TRIAL_HELP) -> Callable[[F], F]:
    """--trial and --trial-cmd; the command receives them as `trial: TrialRequest | None`."""

    def decorate(command: F) -> F:
        run = command

        @functools.wraps(run)
        def parsed(
            *args: Any, trial: bool, trial_cmds: tuple[str, ...], trial_shadow: str, **kwargs: Any
        ) -> Any:
            methods = _METHODS if trial_shadow == "auto" else (trial_shadow,)
            asked = trial or trial_cmds or trial_shadow != "auto"
            request = TrialRequest(trial_cmds, methods) if asked else None
            return run(*args, trial=request, **kwargs)

        return _apply(
            cast(F, parsed),
            [
                click.option("--trial", is_flag=True, help=help_text),
                click.option(
                    "--trial-cmd",
                    "trial_cmds",
                    metavar="CMD",
                    multiple=True,
                    help="Your own check, run by the shell in the shadow before and after "
                    "the change, the shadow's bin/ first on PATH (implies --trial; "
                    "repeatable). Failing after and not before is a real break.",
                ),
                click.option(
                    "--trial-shadow",
                    type=click.Choice(["auto", "overlay", "reflink", "copy"]),
                    default="auto",
                    show_default=True,
                    help="How the trial's shadow is made (implies --trial): auto takes the "
                    "first this machine allows of an overlay in a user namespace, a reflink "
                    "copy and a full copy.",
                ),
            ],
        )

    return decorate


def strict_option(command: F) -> F:
    return click.option(
        "--strict",
        is_flag=True,
        help="Count what only a soname-shaped string in .rodata says is loaded (may fail at "
        "run time) in the verdict too.",
    )(command)


def planning(
    source: UvSource,
    out: Output,
    *,
    repair: bool,
    check_requirements: bool,
    strict: bool,
    quiet_waits: bool = False,
) -> Planning:
    """How the core plans, from the command line: the verdict's options, uv (looked up only
    once a plan needs it) with where it finds wheels, and how its waits on uv are shown
    (`quiet_waits`: not at all, for --json and --no-progress)."""
    import functools

    from cudatx.planning.change import Planning
    from cudatx.planning.plan import PlanOptions
    from cudatx.uv import find_uv

    return Planning(
        options=PlanOptions(
            repair=repair,
            check_requirements=check_requirements,
            strict=strict,
            no_deps=source.options.no_deps,
        ),
        uv=lambda: find_uv(source.uv),
        uv_options=tuple(source.options.args()),
        waiting=functools.partial(out.waiting, disabled=quiet_waits),
    )


def change_options(command: F) -> F:
    """The options of every command that changes an environment; the command receives them
    as `request: ChangeRequest`."""
    run = command

    @functools.wraps(run)
    def parsed(
        *args: Any,
        dry_run: bool,
        force: bool,
        yes: bool,
        ignore_running: bool,
        strict_running: bool,
        verify: str | None,
        repair: bool,
        no_requirements_check: bool,
        strict: bool,
        fmt: str,
        break_system_packages: bool,
        **kwargs: Any,
    ) -> Any:
        request = ChangeRequest(
            dry_run=dry_run,
            force=force,
            yes=yes,
            ignore_running=ignore_running,
            strict_running=strict_running,
            verify=verify,
            repair=repair,
            check_requirements=not no_requirements_check,
            strict=strict,
            fmt=fmt,
            break_system_packages=break_system_packages,
        )
        return run(*args, request=request, **kwargs)

    return _apply(
        cast(F, parsed),
        [
            click.option(
                "--dry-run", is_flag=True, help="Only say what would happen; change nothing."
            ),
            click.option("--force", is_flag=True, help="Apply even an unsafe plan."),
            click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation."),
            click.option(
                "--ignore-running",
                is_flag=True,
                help="Apply even while processes map affected files.",
            ),
            click.option(
                "--strict-running",
                is_flag=True,
                help="Refuse while any process cannot be checked (its /proc/PID/maps "
                "unreadable) [default: name them in a warning and go on].",
            ),
            click.option(
                "--verify",
                metavar="CMD",
                default=None,
                help="A command run in the environment after the change; failing rolls it back.",
            ),
            click.option(
                "--repair",
                is_flag=True,
                help="After the change, reinstall (--no-deps, same version) the distributions "
                "that listed the deleted shared paths too.",
            ),
            click.option(
                "--no-requirements-check",
                is_flag=True,
                help="Leave unmet Requires-Dist out of the verdict.",
            ),
            click.option(
                "--break-system-packages",
                is_flag=True,
                help="Change a Python its distributor manages (an EXTERNALLY-MANAGED marker, "
                "PEP 668), as uv's flag of that name does (passed to uv) [default: refused, "
                "with the marker's message, as uv and pip refuse].",
            ),
            strict_option,
            format_option("plan", "the plan"),
        ],
    )
