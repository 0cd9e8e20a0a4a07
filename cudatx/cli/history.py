"""The transaction store's commands: rollback, history (list, show, prune)."""

from __future__ import annotations

import sys

import click

from cudatx.cli.options import format_option, other_writers_option, python_option
from cudatx.cli.output import Output, confirm
from cudatx.errors import UsageError
from cudatx.names import counted


@click.command()
@click.argument("txn", metavar="[ID]", required=False)
@python_option
@other_writers_option
@click.option("--force", is_flag=True, help="Roll back even where files changed since.")
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@click.option(
    "--dry-run",
    is_flag=True,
    help="Say which transaction and what it would restore; change nothing.",
)
def rollback(
    txn: str | None,
    python: str | None,
    allow_other_writers: bool,
    force: bool,
    yes: bool,
    dry_run: bool,
    out: Output,
) -> int:
    """Put the environment back as it was before transaction ID (default: the latest), from
    the bytes cudatx saved: no network, no package index."""
    from cudatx.discover.target import require_environment, start_query
    from cudatx.render.history import would_roll_back
    from cudatx.trust import refuse_target_writers
    from cudatx.txn.rollback import pending
    from cudatx.txn.rollback import rollback as roll_back

    require_environment(python)  # before the interpreter runs: it finds, and runs nothing
    accepted = allow_other_writers
    target = start_query(python, accept_writers=accepted).result()
    out.info(f"Using Python {target.version} environment at: {target.prefix}")
    if not dry_run:  # a dry run restores nothing: it may look at anyone's environment
        refuse_target_writers(target, accepted=accepted, what="restores")
    journal = pending(target.prefix, txn)
    if dry_run:
        out.echo(would_roll_back(journal), nl=False)
        return 0
    if not yes:
        if not sys.stdin.isatty():
            raise UsageError("not a terminal: pass --yes to roll back")
        out.echo(would_roll_back(journal), nl=False, err=True)
        confirm(f"Roll back transaction {journal.id}?")
    done, what = roll_back(target.prefix, journal.id, force=force)
    out.echo(f"Transaction {done}: {what}.")
    return 0


@click.group(invoke_without_command=True)
@python_option
@format_option("history", "the transactions")
@click.pass_context
def history(ctx: click.Context, python: str | None, fmt: str, out: Output) -> int:
    """The transactions recorded for this environment."""
    if ctx.invoked_subcommand is not None:
        return 0
    from cudatx.discover.target import find_target
    from cudatx.render import history as render
    from cudatx.txn.rollback import history as read_history

    prefix = find_target(python).prefix
    journals = read_history(prefix)
    out.show(render.render(render.Report(journals, prefix), fmt))
    return 0


def _prefix(python: str | None) -> str:
    """The environment of a `history` subcommand: its own --python, else the group's."""
    from cudatx.discover.target import find_target

    parent = click.get_current_context().parent  # the `history` group's, as click parsed it
    chosen = python or (parent.params.get("python") if parent is not None else None)
    return find_target(chosen).prefix


@history.command("prune")
@click.option("--keep", type=click.IntRange(min=1), required=True, help="Snapshots to keep.")
@python_option
def history_prune(keep: int, python: str | None, out: Output) -> int:
    """Free the snapshots of older transactions (never the latest); journals stay."""
    from cudatx.txn.rollback import prune

    pruned = prune(_prefix(python), keep)
    n = len(pruned)
    out.echo(f"Freed the snapshot{'s' * (n != 1)} of {counted(n, 'transaction')}.")
    return 0


@history.command("show")
@click.argument("txn", metavar="[ID]", required=False)
@python_option
@format_option("journal", "the whole journal")
def history_show(txn: str | None, python: str | None, fmt: str, out: Output) -> int:
    """Transaction ID (default: the latest, the one `rollback` takes): what it changed,
    each step, how it ended; --json: its journal."""
    from cudatx.render import history as render
    from cudatx.txn.rollback import chosen
    from cudatx.txn.store import Store

    journal = chosen(Store(_prefix(python)), txn, nothing="nothing to show")
    out.show(render.render_journal(journal, fmt))
    return 0
