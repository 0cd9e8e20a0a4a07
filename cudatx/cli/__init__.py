"""The command line, one module per command family; `main` is the entry point."""

from __future__ import annotations

from cudatx.cli.app import cli, main
from cudatx.cli.change import install, remove, sync
from cudatx.cli.checkreq import check_requirements
from cudatx.cli.demo import demo
from cudatx.cli.history import history, rollback
from cudatx.cli.inspect import doctor, graph, why

for _command in (why, doctor, graph, remove, install, sync, check_requirements, rollback):
    cli.add_command(_command)
cli.add_command(history)
cli.add_command(demo)

__all__ = ["cli", "main"]
