"""The transaction store's commands: rollback, history (list, show, prune)."""

from __future__ import annotations

import sys

import click

import cudatx.cli.output as output
from cudatx.cli.options import json_option, python_option
from cudatx.errors import UsageError


@click.command()
@click.argument("txn", metavar="[ID]", required=False)
@python_option
@click.option("--force", is_flag=True, help="Roll back even where files changed since.")
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
def rollback(txn: str | None, python: str | None, force: bool, yes: bool) -> int:
    """Put the environment back as it was before transaction ID (default: the latest), from
    the bytes cudatx saved: no network, no package index."""
    from cudatx.discover.target import find_target, require_environment
    from cudatx.txn.rollback import rollback as roll_back

    require_environment(python)
    target = find_target(python)
    output.info(f"Using Python {target.version} environment at: {target.prefix}")
    if not yes:
        if not sys.stdin.isatty():
            raise UsageError("not a terminal: pass --yes to roll back")
        click.confirm(f"Roll back {txn or 'the latest transaction'}?", abort=True, err=True)
    done, what = roll_back(target.prefix, txn, force=force)
    click.echo(f"Transaction {done}: {what}.")
    return 0


@click.group(invoke_without_command=True)
@python_option
@json_option("the transactions")
@click.pass_context
def history(ctx: click.Context, python: str | None, as_json: bool) -> int:
    """The transactions recorded for this environment."""
    ctx.meta["cudatx.history_python"] = python
    if ctx.invoked_subcommand is not None:
        return 0
    from cudatx.discover.target import find_target
    from cudatx.render import colour
    from cudatx.render import history as render
    from cudatx.txn.rollback import history as read_history

    prefix = find_target(python).prefix
    journals = read_history(prefix)
    if as_json:
        click.echo(render.to_json(journals, prefix), nl=False)
    else:
        output.echo(render.to_text(journals, prefix), nl=False, paint=colour.history)
    return 0


def _prefix(python: str | None) -> str:
    """The environment of a `history` subcommand: its own --python, else the group's."""
    from cudatx.discover.target import find_target

    chosen = python or click.get_current_context().meta.get("cudatx.history_python")
    return find_target(chosen).prefix


@history.command("prune")
@click.option("--keep", type=click.IntRange(min=1), required=True, help="Snapshots to keep.")
@python_option
def history_prune(keep: int, python: str | None) -> int:
    """Free the snapshots of older transactions (never the latest); journals stay."""
    from cudatx.txn.rollback import prune

    pruned = prune(_prefix(python), keep)
    n = len(pruned)
    click.echo(f"Freed the snapshot{'s' * (n != 1)} of {n} transaction{'s' * (n != 1)}.")
    return 0


@history.command("show")
@click.argument("txn", metavar="ID")
@python_option
@json_option("the whole journal")
def history_show(txn: str, python: str | None, as_json: bool) -> int:
    """One transaction: what it changed, each step, how it ended; --json: its journal."""
    from cudatx.render import colour
    from cudatx.render import history as render
    from cudatx.txn.store import Store

    store = Store(_prefix(python))
    if txn not in store.ids():
        raise UsageError(f"no transaction {txn}; `cudatx history` lists them")
    journal = store.read_journal(txn)
    if as_json:
        click.echo(render.show_json(journal), nl=False)
    else:
        output.echo(render.show(journal), nl=False, paint=colour.summary)
    return 0
