"""--color, -q and -v before and after the subcommand, added up into the one `Output` value a
command is handed (cudatx.cli.output.settled, cudatx.cli.app.with_output), as uv's global
options are."""

from __future__ import annotations

import click
import pytest
from click.testing import CliRunner

from cudatx.cli.app import Invocation, with_output
from cudatx.cli.output import Output, output_params


def _said(*args: str) -> tuple[Output, Output]:
    """What a command of a group made as cudatx makes its own is handed, and what the run's
    Invocation keeps for `main`."""
    handed: list[Output] = []

    @click.group()
    def group(color: str | None, quiet: int, verbose: int) -> None:
        pass

    @group.group()
    def middle(out: Output) -> None:
        pass

    @middle.command()
    def leaf(out: Output) -> None:
        handed.append(out)

    group.params.extend(output_params())
    for command in (middle, leaf):
        command.params.extend(output_params())
        with_output(command)
    run = Invocation(args, [])
    done = CliRunner().invoke(group, list(args), obj=run, catch_exceptions=False)
    assert done.exit_code == 0, done.output
    (out,) = handed
    return out, run.said[-1]


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (("middle", "leaf"), Output()),
        (("-v", "middle", "leaf", "-v"), Output(verbose=2)),
        (("-v", "middle", "-v", "leaf", "-v"), Output(verbose=3)),
        (("-q", "middle", "leaf"), Output(quiet=1)),
        (("--color", "never", "middle", "leaf", "--color", "always"), Output(color="always")),
        (("--color", "never", "middle", "leaf", "-q"), Output(color="never", quiet=1)),
    ],
)
def test_the_options_add_up_the_later_colour_counts(
    args: tuple[str, ...], expected: Output
) -> None:
    handed, kept = _said(*args)
    assert handed == expected
    assert kept == expected
