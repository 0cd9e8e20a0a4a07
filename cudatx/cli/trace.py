"""`cudatx trace`: run a command and record what the real loader mapped; list, clear."""

from __future__ import annotations

import click

from cudatx.cli.app import refuse_unfinished
from cudatx.cli.options import Target, format_option, python_target
from cudatx.cli.output import Output
from cudatx.errors import UsageError
from cudatx.names import counted


@click.command(context_settings={"allow_interspersed_args": False})
@click.argument("command", nargs=-1, type=click.UNPROCESSED, metavar="[--] CMD [ARGS]...")
@python_target
@click.option("--list", "listing", is_flag=True, help="List the records kept for the environment.")
@click.option(
    "--clear",
    is_flag=True,
    help="Remove the records: all of them, or those whose IDs follow.",
)
@format_option("traces", "the records (with --list)")
def trace(
    command: tuple[str, ...],
    chosen: Target,
    listing: bool,
    clear: bool,
    fmt: str,
    out: Output,
) -> int:
    """Run CMD in the environment with the loader reporting (LD_DEBUG), and keep what it
    mapped: plans and doctor then count those loads as `observed`. Exits with CMD's own
    exit code."""
    from cudatx.discover.traces import read_traces
    from cudatx.render import trace as render

    if listing and clear:
        raise UsageError("--list and --clear do not go together")
    if fmt != "text" and not listing:
        raise UsageError("--json goes with --list")
    if listing and command:
        raise UsageError("--list takes no command")
    if not (listing or clear or command):
        raise UsageError("trace needs a command: cudatx trace [--python ENV] -- CMD [ARGS...]")
    chosen.require_environment()  # a record is written into the environment: never cudatx's own
    target = chosen.asked().result()
    allow_other_writers = chosen.allow_other_writers
    if listing:
        traces, _ = read_traces(target.prefix, strict=True)
        out.show(render.render(render.Report(traces, target.prefix), fmt))
        return 0
    if clear:
        from cudatx.txn.trace import clear as clear_traces

        removed = clear_traces(target.prefix, command)
        out.echo(f"Removed {counted(len(removed), 'trace record')}.")
        return 0
    from cudatx.trust import refuse_target_writers
    from cudatx.txn.trace import trace as run_traced

    out.info(f"Using Python {target.version} environment at: {target.prefix}")
    refuse_unfinished(out, target.prefix)
    refuse_target_writers(target, accepted=allow_other_writers, what="runs")
    done = run_traced(target, command, accepted=allow_other_writers)
    out.info(render.recorded(done))
    return done.record.exit_code
