"""The transaction store's commands: rollback, history (list, show, prune)."""

from __future__ import annotations

import sys

import click

from cudatx.cli.options import Target, format_option, python_option, python_target, store_target
from cudatx.cli.output import Output, confirm
from cudatx.errors import UsageError
from cudatx.names import counted


@click.command()
@click.argument("txn", metavar="[ID]", required=False)
@python_target
@click.option("--force", is_flag=True, help="Roll back even where files changed since.")
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@click.option(
    "--dry-run",
    is_flag=True,
    help="Say which transaction and what it would restore; change nothing.",
)
def rollback(
    txn: str | None,
    chosen: Target,
    force: bool,
    yes: bool,
    dry_run: bool,
    out: Output,
) -> int:
    """Put the environment back as it was before transaction ID (default: the latest), from
    the bytes cudatx saved: no network, no package index."""
    from cudatx.render.history import would_roll_back
    from cudatx.trust import refuse_target_writers
    from cudatx.txn.rollback import pending
    from cudatx.txn.rollback import rollback as roll_back

    chosen.require_environment()  # before its answer is awaited: never cudatx's own Python
    accepted = chosen.allow_other_writers
    target = chosen.asked().result()
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
    from cudatx.render import history as render
    from cudatx.txn.rollback import history as read_history

    prefix = store_target(python, out).asked().result().prefix
    journals = read_history(prefix)
    out.show(render.render(render.Report(journals, prefix), fmt))
    return 0


def _prefix(python: str | None, out: Output) -> str:
    """The environment of a `history` subcommand: its own --python, else the group's."""
    parent = click.get_current_context().parent  # the `history` group's, as click parsed it
    chosen = python or (parent.params.get("python") if parent is not None else None)
    return store_target(chosen, out).asked().result().prefix


@history.command("prune")
@click.option("--keep", type=click.IntRange(min=1), required=True, help="Snapshots to keep.")
@python_option
def history_prune(keep: int, python: str | None, out: Output) -> int:
    """Free the snapshots of older transactions (never the latest); journals stay."""
    from cudatx.txn.rollback import prune

    pruned = prune(_prefix(python, out), keep)
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

    journal = chosen(Store(_prefix(python, out)), txn, nothing="nothing to show")
    out.show(render.render_journal(journal, fmt))
    return 0
