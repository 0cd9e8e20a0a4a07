"""The command line: parse, call one core function, render. Nothing else prints or exits.

Core modules are imported inside each command so that `--help` and `--version` stay quick.
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable
from typing import Any, TypeVar, cast

import click

from cudatx import __version__
from cudatx.errors import CudatxError, ExitCode

F = TypeVar("F", bound=Callable[..., Any])


def python_option(command: F) -> F:
    """--python, accepted by every subcommand."""
    return click.option(
        "--python",
        "-p",
        metavar="PATH",
        default=None,
        help="Interpreter or environment folder to inspect [default: as uv finds it: "
        "VIRTUAL_ENV, CONDA_PREFIX, .venv here or above, then cudatx's own Python].",
    )(command)


def _remember(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
    ctx.meta[f"cudatx.{param.name}"] = value
    return value


def target_options(command: F) -> F:
    """--python, --ld-library-path, --no-cache and --no-progress, for the subcommands that
    replay the loader. The last two reach _scan through the context, not the command.

    The target interpreter is asked about itself (a subprocess) as the command starts,
    before the command imports the core: the two overlap, and _scan collects the answer.
    """

    run = command

    @functools.wraps(run)
    def started(*args: Any, **kwargs: Any) -> Any:
        from cudatx.target import start_query

        meta = click.get_current_context().meta
        try:
            meta["cudatx.query"] = start_query(kwargs.get("python"))
            meta["cudatx.query_for"] = kwargs.get("python")
        except CudatxError:
            pass  # said by _scan, if the command scans that interpreter at all
        return run(*args, **kwargs)

    command = cast(F, started)
    for flag, text in (
        ("--no-progress", "Draw no progress bar on stderr (one shows only on a terminal)."),
        ("--no-cache", "Read every file afresh, and neither read nor write the scan cache."),
    ):
        command = click.option(
            flag, is_flag=True, expose_value=False, callback=_remember, help=text
        )(command)
    command = click.option(
        "--ld-library-path",
        metavar="PATH",
        default=None,
        help="LD_LIBRARY_PATH of the process that will load the libraries "
        "[default: the current value; '' for none].",
    )(command)
    return python_option(command)


def _command_line(
    command: str, args: tuple[str, ...], *options: tuple[str, tuple[str, ...]]
) -> str:
    """The cudatx command a plan's suggestion repeats (shell-quoted, without --dry-run)."""
    import shlex

    words = ["cudatx", command, *args]
    for flag, values in options:
        for value in values:
            words += [flag, value]
    return " ".join(shlex.quote(w) for w in words)


def _collect_less() -> None:
    """Tune the garbage collector for one short process, before the scan.

    The core's modules, classes and pydantic's validators are imported by now and live until
    exit: gc.freeze() moves them out of every later collection. A warm scan then builds some
    100,000 short-lived tuples (RECORD rows, the owners index); collecting the young
    generation every 10,000 allocations instead of 700 cut 25-30 ms from a 0.35 s warm
    `remove six --dry-run` (benchmarks/). Cycles are still collected: memory stays bounded.
    """
    import gc

    gc.freeze()
    gc.set_threshold(10_000, 10, 10)


def _scan(python: str | None, ld_library_path: str | None, *, echo: bool = True) -> Any:
    """Scan the target with the cache (written when the command ends) and a progress bar;
    `echo`: say which environment on stderr, as uv does."""
    from cudatx.progress import Bar, wanted
    from cudatx.scan import scan

    ctx = click.get_current_context()
    _collect_less()
    cache = None
    if not ctx.meta.get("cudatx.no_cache"):
        from cudatx.cache import open_cache

        cache = open_cache()
        if cache is not None:
            ctx.call_on_close(cache.close)
    stream = click.get_text_stream("stderr")
    bar = None
    if wanted(stream, os.environ, disabled=bool(ctx.meta.get("cudatx.no_progress"))):
        bar = Bar(stream, colour=not os.environ.get("NO_COLOR"))
    if ld_library_path is None:
        ld_library_path = os.environ.get("LD_LIBRARY_PATH")
    query = ctx.meta.pop("cudatx.query", None)
    if ctx.meta.get("cudatx.query_for") != python:
        query = None  # started for another interpreter than the one chosen since
    try:
        env = scan(
            python,
            ld_library_path=ld_library_path or None,
            cache=cache,
            progress=bar,
            query=query,
        )
    finally:
        if bar is not None:
            bar.finish()
    if echo:
        click.echo(
            f"Using Python {env.target.version} environment at: {env.target.prefix}", err=True
        )
    return env


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="cudatx")
def cli() -> None:
    """Plan and check package changes in CUDA Python environments before they break loading."""


@cli.command()
@click.argument("query", metavar="SONAME|PATH")
@target_options
@click.option("--json", "as_json", is_flag=True, help="Print the answer as JSON on stdout.")
def why(query: str, python: str | None, ld_library_path: str | None, as_json: bool) -> None:
    """Why a library is (or is not) found: who needs it, where the loader looked, what it took."""
    from cudatx.render import why as render
    from cudatx.why import explain

    env = _scan(python, ld_library_path)
    report = explain(env, query)
    if as_json:
        click.echo(render.to_json(report))
    else:
        click.echo(render.to_text(report, env.target.site_packages), nl=False)


@cli.command()
@target_options
@click.option("--json", "as_json", is_flag=True, help="Print the findings as JSON on stdout.")
def doctor(python: str | None, ld_library_path: str | None, as_json: bool) -> None:
    """What is already wrong here: libraries that cannot load, hollow or co-owned packages,
    mixed CUDA majors. Exit 1 when there is an error."""
    from cudatx.doctor import diagnose
    from cudatx.render import doctor as render

    report = diagnose(_scan(python, ld_library_path))
    click.echo(render.to_json(report) if as_json else render.to_text(report), nl=as_json)
    if report.errors:
        raise SystemExit(int(ExitCode.FINDINGS))


@cli.command()
@target_options
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["json", "dot", "graphml", "mermaid"]),
    default="json",
    show_default=True,
    help="Output format.",
)
@click.option(
    "--around",
    "around_name",
    metavar="NAME",
    default=None,
    help="Only the part around a distribution, soname or file (path or basename).",
)
@click.option(
    "--radius",
    type=click.IntRange(min=0),
    default=2,
    show_default=True,
    help="With --around: how many edges away to go, in either direction.",
)
def graph(
    python: str | None, ld_library_path: str | None, fmt: str, around_name: str | None, radius: int
) -> None:
    """The environment as a graph: distributions, ELF files and sonames, with their owns,
    needs, resolves and requires edges."""
    from cudatx.graph import around, build_graph
    from cudatx.render.graph import render

    result = build_graph(_scan(python, ld_library_path))
    if around_name is not None:
        result = around(result, around_name, radius)
    click.echo(render(result, fmt), nl=False)


def change_options(command: F) -> F:
    """The options every command that changes an environment takes (remove, install, sync),
    --json included."""
    for decorator in reversed(
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
            click.option("--offline", is_flag=True, help="Pass --offline to uv."),
            click.option(
                "--find-links",
                metavar="DIR|URL",
                multiple=True,
                help="Passed to uv for the installs (where their wheels are).",
            ),
            click.option(
                "--uv",
                metavar="PATH",
                default=None,
                help="The uv binary [default: the uv package's].",
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
                "--json", "as_json", is_flag=True, help="Print the plan as JSON on stdout."
            ),
        ]
    ):
        command = decorator(command)
    return command


def _carry_out(
    env: Any,
    plan: Any,
    command: str,
    removing: tuple[Any, ...],
    installing: tuple[tuple[Any, str], ...],
    flags: dict[str, Any],
    uv_args: tuple[str, ...] = (),
) -> None:
    """Show a plan; for a dry run, its verdict; otherwise confirm and apply it."""
    from cudatx.errors import Refused, UsageError
    from cudatx.render import plan as render

    if flags["as_json"]:
        click.echo(render.to_json(plan))
    else:
        click.echo(render.to_text(plan, command, env.target.site_packages), nl=False)
    if flags["dry_run"]:
        if not plan.safe:
            raise SystemExit(int(ExitCode.FINDINGS))
        return
    if not plan.safe and not flags["force"]:
        raise Refused(
            "refusing to apply an unsafe plan (see 'Would break' above); --force to apply it "
            "anyway, --repair to restore what co-owners lose"
        )
    if not flags["yes"]:
        if not sys.stdin.isatty():
            raise UsageError("not a terminal: pass --yes to apply the plan")
        click.confirm("Proceed?", abort=True, err=True)
    from cudatx.scan import scan
    from cudatx.txn import Options, apply_removal

    names = {p.name for p in plan.reinstall}
    txn = apply_removal(
        env,
        plan,
        removing,
        tuple(d for d in env.distributions if d.name in names),
        Options(
            uv=flags["uv"],
            offline=flags["offline"],
            find_links=flags["find_links"],
            verify=flags["verify"],
            ignore_running=flags["ignore_running"],
            command=" ".join(["cudatx", *sys.argv[1:]]),
            uv_args=uv_args,
        ),
        lambda: scan(flags["python"], ld_library_path=env.ld_library_path, cache=env.view.cache),
        installing,
    )
    click.echo(f"Applied as transaction {txn}; `cudatx rollback` undoes it.", err=True)


def _refuse_if_interrupted(env: Any) -> None:
    from cudatx.store import Store
    from cudatx.txn import refuse_if_interrupted

    store = Store(env.target.prefix)
    if store.ids():  # none recorded: nothing to complete (and no store is created)
        with store.lock():  # Busy while another transaction runs: not interrupted
            refuse_if_interrupted(store)


@cli.command()
@click.argument("specs", nargs=-1, metavar="SPEC...")
@click.option(
    "-r",
    "--requirement",
    "requirement_files",
    metavar="FILE",
    multiple=True,
    help="Remove the distributions named in a requirements file.",
)
@change_options
@target_options
def remove(
    specs: tuple[str, ...],
    requirement_files: tuple[str, ...],
    python: str | None,
    ld_library_path: str | None,
    **flags: Any,
) -> None:
    """Remove distributions, safely: SPEC is a name, a glob over names ('nvidia-*-cu13'), or
    cuda:N (every distribution whose libraries are CUDA N builds). Shows the plan first;
    applies it through uv with a snapshot that `cudatx rollback` restores. With --dry-run:
    exit 0 when safe, 1 when something that loads now would stop loading."""
    from cudatx.plan import plan_removal
    from cudatx.selection import select

    env = _scan(python, ld_library_path)
    if not flags["dry_run"]:
        _refuse_if_interrupted(env)
    chosen = select(env, specs, requirement_files)
    plan = plan_removal(
        env, chosen, repair=flags["repair"], check_requirements=not flags["no_requirements_check"]
    )
    command = _command_line("remove", specs, ("-r", requirement_files))
    _carry_out(env, plan, command, chosen, (), {**flags, "python": python})


def index_options(command: F) -> F:
    """Index options passed on to uv for the dry run, the staging and the install."""
    command = click.option("--extra-index-url", metavar="URL", multiple=True, help="Passed to uv.")(
        command
    )
    return click.option("--index-url", "-i", metavar="URL", default=None, help="Passed to uv.")(
        command
    )


def _uv_options(flags: dict[str, Any]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """uv's words for --offline and --find-links, and for the index options."""
    offline = ["--offline"] if flags["offline"] else []
    offline += [a for link in flags["find_links"] for a in ("--find-links", link)]
    index = [] if flags["index_url"] is None else ["--index-url", flags["index_url"]]
    index += [a for url in flags["extra_index_url"] for a in ("--extra-index-url", url)]
    return tuple(offline), tuple(index)


def _propose_and_carry_out(
    uv_command: str,
    args: tuple[str, ...],
    command: str,
    python: str | None,
    ld_library_path: str | None,
    flags: dict[str, Any],
) -> None:
    from cudatx.change import propose
    from cudatx.uvrun import find_uv

    offline, uv_args = _uv_options(flags)
    env = _scan(python, ld_library_path)
    if not flags["dry_run"]:
        _refuse_if_interrupted(env)
    proposal = propose(
        env,
        find_uv(flags["uv"]),
        uv_command,
        args,
        [*offline, *uv_args],
        repair=flags["repair"],
        check_requirements=not flags["no_requirements_check"],
    )
    _carry_out(
        env,
        proposal.plan,
        command,
        proposal.removing,
        proposal.installing,
        {**flags, "python": python},
        uv_args,
    )


@cli.command()
@click.argument("specs", nargs=-1, metavar="SPEC...")
@click.option(
    "-r",
    "--requirement",
    "requirement_files",
    metavar="FILE",
    multiple=True,
    help="Install what a requirements file names (as `uv pip install -r`).",
)
@change_options
@index_options
@target_options
def install(
    specs: tuple[str, ...],
    requirement_files: tuple[str, ...],
    python: str | None,
    ld_library_path: str | None,
    **flags: Any,
) -> None:
    """Install or upgrade distributions, safely: what `uv pip install SPEC...` would do,
    staged and simulated first (files written over shared paths change their bytes), then
    applied with a snapshot that `cudatx rollback` restores. With --dry-run: exit 0 when
    safe, 1 when something that loads now would stop loading or mix CUDA majors."""
    from cudatx.errors import UsageError

    if not specs and not requirement_files:
        raise UsageError("nothing to install: give at least one SPEC or -r FILE")
    args = (*specs, *(a for f in requirement_files for a in ("-r", f)))
    command = _command_line("install", specs, ("-r", requirement_files))
    _propose_and_carry_out("install", args, command, python, ld_library_path, flags)


@cli.command()
@click.argument("files", nargs=-1, required=True, metavar="FILE...")
@change_options
@index_options
@target_options
def sync(
    files: tuple[str, ...], python: str | None, ld_library_path: str | None, **flags: Any
) -> None:
    """Make the environment match requirements or pylock files exactly, safely: what
    `uv pip sync FILE...` would do (uninstall what they do not list, install and upgrade
    what they pin), staged and simulated first, then applied with a snapshot."""
    command = _command_line("sync", files)
    _propose_and_carry_out("sync", files, command, python, ld_library_path, flags)


def _hook_python(python: str | None) -> str | None:
    """The environment check-requirements checks, or None when there is none to check.

    pre-commit runs hooks with VIRTUAL_ENV pointing at its own environment (for Python
    hooks), so under pre-commit (PRE_COMMIT set) VIRTUAL_ENV is never trusted: --python
    from the hook's args, else the project's .venv. Elsewhere, uv's discovery, but never
    cudatx's own interpreter: a requirements file is not about the tool's environment.
    """
    if python:
        return python
    if os.environ.get("PRE_COMMIT"):
        venv = os.path.join(os.getcwd(), ".venv")
        return venv if os.path.isdir(venv) else None
    from cudatx.errors import EnvironmentNotFound
    from cudatx.target import find_target

    try:
        target = find_target(None)
    except EnvironmentNotFound:
        return None
    return None if target.found_by == "cudatx's interpreter" else target.prefix


@cli.command("check-requirements")
@click.argument("files", nargs=-1, metavar="FILE...")
@click.option(
    "--extra",
    "extras",
    metavar="NAME",
    multiple=True,
    help="Optional dependencies to include (pyproject.toml, uv.lock, pylock.toml).",
)
@click.option(
    "--mode",
    type=click.Choice(["auto", "sync", "install"]),
    default="auto",
    show_default=True,
    help="sync: the file is the whole environment (uv pip sync); install: uv pip install "
    "-r; auto: sync for lock files and for pins that list every installed distribution "
    "(now or as committed).",
)
@click.option(
    "--require-env",
    is_flag=True,
    help="Fail (exit 3) when there is no environment to check, instead of skipping.",
)
@click.option("--offline", is_flag=True, help="Pass --offline to uv.")
@click.option("--find-links", metavar="DIR|URL", multiple=True, help="Passed to uv.")
@click.option("--uv", metavar="PATH", default=None, help="The uv binary.")
@index_options
@target_options
@click.option("--json", "as_json", is_flag=True, help="Print the results as JSON on stdout.")
def check_requirements(
    files: tuple[str, ...],
    extras: tuple[str, ...],
    mode: str,
    require_env: bool,
    python: str | None,
    ld_library_path: str | None,
    as_json: bool,
    **flags: Any,
) -> None:
    """Would bringing the environment in line with FILE break loading? For requirements
    files, pyproject.toml, uv.lock and pylock.toml: a file that pins every installed
    distribution (or a lock) means `uv pip sync`, any other `uv pip install -r`. Changes
    nothing. Quiet and exit 0 when safe; exit 1 with the broken libraries, the line
    responsible (against the committed version, where git tracks the file) and the fix."""
    from cudatx.checkreq import check_file
    from cudatx.errors import EnvironmentNotFound
    from cudatx.render import checkreq as render
    from cudatx.uvrun import find_uv

    if not files:
        return
    chosen = _hook_python(python)
    if chosen is None:
        message = (
            "no environment to check (pass --python, in a pre-commit hook through its args, "
            "or create .venv)"
        )
        if require_env:
            raise EnvironmentNotFound(message)
        click.echo(f"cudatx: {message}; skipped", err=True)
        return
    env = _scan(chosen, ld_library_path, echo=False)
    uv = find_uv(flags["uv"])
    offline, index = _uv_options(flags)
    options = [*offline, *index]
    checks = [check_file(env, uv, f, extras=extras, uv_options=options, mode=mode) for f in files]
    if as_json:
        click.echo(render.to_json(checks))
    else:
        click.echo(render.to_text(checks, env.target.site_packages), nl=False)
    if not all(c.plan.safe for c in checks):
        raise SystemExit(int(ExitCode.FINDINGS))


@cli.command()
@click.argument("txn", metavar="[ID]", required=False)
@python_option
@click.option("--force", is_flag=True, help="Roll back even where files changed since.")
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
def rollback(txn: str | None, python: str | None, force: bool, yes: bool) -> None:
    """Put the environment back as it was before transaction ID (default: the latest), from
    the bytes cudatx saved: no network, no package index."""
    from cudatx.errors import UsageError
    from cudatx.target import find_target
    from cudatx.txn import rollback as roll_back

    target = find_target(python)
    click.echo(f"Using Python {target.version} environment at: {target.prefix}", err=True)
    if not yes:
        if not sys.stdin.isatty():
            raise UsageError("not a terminal: pass --yes to roll back")
        click.confirm(f"Roll back {txn or 'the latest transaction'}?", abort=True, err=True)
    done, what = roll_back(target.prefix, txn, force=force)
    click.echo(f"Transaction {done}: {what}.")


@cli.group(invoke_without_command=True)
@python_option
@click.pass_context
def history(ctx: click.Context, python: str | None) -> None:
    """The transactions recorded for this environment."""
    ctx.obj = python
    if ctx.invoked_subcommand is not None:
        return
    from cudatx.target import find_target
    from cudatx.txn import history as read_history

    for entry in read_history(find_target(python).prefix):
        changes = len(entry.get("remove", [])) + len(entry.get("reinstall", []))
        click.echo(
            f"{entry['id']}  {entry.get('created', '?')}  {entry.get('state', '?'):<12}  "
            f"{changes} changes  {entry.get('command', '')}"
        )


@history.command("prune")
@click.option("--keep", type=click.IntRange(min=1), required=True, help="Snapshots to keep.")
@python_option
@click.pass_obj
def history_prune(group_python: str | None, keep: int, python: str | None) -> None:
    """Free the snapshots of older transactions (never the latest); journals stay."""
    from cudatx.target import find_target
    from cudatx.txn import prune

    pruned = prune(find_target(python or group_python).prefix, keep)
    click.echo(f"Freed the snapshots of {len(pruned)} transactions.")


@history.command("show")
@click.argument("txn", metavar="ID")
@python_option
@click.pass_obj
def history_show(group_python: str | None, txn: str, python: str | None) -> None:
    """One transaction's journal, as JSON."""
    import json

    from cudatx.errors import UsageError
    from cudatx.store import Store
    from cudatx.target import find_target

    store = Store(find_target(python or group_python).prefix)
    if txn not in store.ids():
        raise UsageError(f"no transaction {txn}; `cudatx history` lists them")
    click.echo(json.dumps(store.read_journal(txn), indent=2, sort_keys=True))


@cli.command()
@click.option(
    "--keep",
    metavar="DIR",
    type=click.Path(file_okay=False),
    default=None,
    help="Build in DIR (missing or empty) and keep it [default: a temporary folder].",
)
@click.option(
    "--compiler",
    metavar="CC",
    default=None,
    help="C compiler for the tiny libraries ['none': use the prebuilt ones; default: $CC, cc].",
)
def demo(keep: str | None, compiler: str | None) -> None:
    """Build, offline, a small environment caught in the cu12/cu13 shared-path trap (real
    libraries, real wheels, real uv), then run `doctor`, `why libcudnn.so.9` and a dry run
    of removing the CUDA 13 cuDNN on it."""
    import shutil
    import tempfile
    from pathlib import Path

    from cudatx.demo import build_demo
    from cudatx.doctor import diagnose
    from cudatx.plan import plan_removal
    from cudatx.render import doctor as render_doctor
    from cudatx.render import plan as render_plan
    from cudatx.render import why as render_why
    from cudatx.scan import scan
    from cudatx.selection import select
    from cudatx.why import explain

    folder = Path(keep) if keep else Path(tempfile.mkdtemp(prefix="cudatx-demo-"))
    try:
        built = build_demo(folder, compiler=compiler)
        click.echo("Built a demo environment:")
        for line in built.story:
            click.echo(f"  {line}")
        env = scan(str(built.venv), ld_library_path=None)
        click.echo(f"\n$ cudatx doctor --python {built.venv}")
        click.echo(render_doctor.to_text(diagnose(env)), nl=False)
        click.echo(f"\n$ cudatx why libcudnn.so.9 --python {built.venv}")
        report = explain(env, "libcudnn.so.9")
        click.echo(render_why.to_text(report, env.target.site_packages), nl=False)
        click.echo(f"\n$ cudatx remove nvidia-cudnn-cu13 --dry-run --python {built.venv}")
        chosen = select(env, ("nvidia-cudnn-cu13",))
        plan = plan_removal(env, chosen, repair=False)
        click.echo(
            render_plan.to_text(plan, "cudatx remove nvidia-cudnn-cu13", env.target.site_packages),
            nl=False,
        )
        if keep:
            click.echo(f"\nThe environment stays at {built.venv}.")
    finally:
        if not keep:
            shutil.rmtree(folder, ignore_errors=True)


def main(argv: list[str] | None = None) -> None:
    """Entry point: every refusal is one line on stderr and a documented exit code."""
    try:
        code = cli.main(args=argv, prog_name="cudatx", standalone_mode=False)
    except CudatxError as exc:
        click.echo(f"cudatx: error: {exc.message}", err=True)
        sys.exit(int(exc.exit_code))
    except click.exceptions.Abort:
        click.echo("cudatx: aborted", err=True)
        sys.exit(130)
    except click.ClickException as exc:
        click.echo(f"cudatx: error: {exc.format_message()}", err=True)
        sys.exit(ExitCode.USAGE if exc.exit_code == 2 else exc.exit_code)
    except KeyboardInterrupt:
        click.echo("cudatx: interrupted", err=True)
        sys.exit(130)
    except Exception as exc:  # a bug: say so in one line; the traceback only on request
        if os.environ.get("CUDATX_DEBUG"):
            raise
        click.echo(
            f"cudatx: internal error: {type(exc).__name__}: {exc} "
            "(set CUDATX_DEBUG=1 for a traceback)",
            err=True,
        )
        sys.exit(int(ExitCode.INTERNAL))
    sys.exit(code if isinstance(code, int) else 0)
