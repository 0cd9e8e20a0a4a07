"""`cudatx completion bash|zsh|fish`: the shell's completion script, from click's own."""

from __future__ import annotations

import click

from cudatx.cli.output import Output

SHELLS = ("bash", "zsh", "fish")


@click.command()
@click.argument("shell", type=click.Choice(SHELLS))
def completion(shell: str, out: Output) -> int:
    """Print the shell completion script for bash, zsh or fish."""
    from click.shell_completion import get_completion_class

    from cudatx.cli.app import cli

    found = get_completion_class(shell)
    assert found is not None  # every name in SHELLS is one click ships
    # The variable click's completion protocol reads: _CUDATX_COMPLETE=bash_complete etc.
    out.echo(found(cli, {}, "cudatx", "_CUDATX_COMPLETE").source())
    return 0
