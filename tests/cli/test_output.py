"""--color, -q and -v before and after the subcommand, added up into the one `Output` value a
command is handed (cudatx.cli.output.settled, cudatx.cli.app.with_output), as uv's global
options are."""

from __future__ import annotations

import ast
from pathlib import Path

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


# Who else writes to stdout, and why it may: processes cudatx starts, which answer it there,
# and a developer's script; never the cudatx command.
_OWN_STDOUT = {
    "cudatx/sandbox.py": "the sandbox's probe answers its parent as JSON on its stdout",
    "cudatx/trial/session.py": "the trial's session and judge answer their parent as JSON",
    "cudatx/demo/build_prebuilt.py": "python -m cudatx.demo.build_prebuilt, a developer's tool",
}


def _writes_to_stdout(tree: ast.AST) -> list[int]:
    """The lines of `print(...)`, `click.echo`/`click.secho` and any use of `sys.stdout`."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            hit = node.func.id == "print"
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            hit = (node.value.id, node.attr) in {
                ("click", "echo"),
                ("click", "secho"),
                ("sys", "stdout"),
            }
        else:
            hit = False
        if hit:
            found.append(node.lineno)
    return found


def test_only_the_printer_writes_to_stdout() -> None:
    """Every byte cudatx prints goes through `Output` (cudatx/cli/output.py): a report by
    `Output.show` in the format asked for, whatever else by its other methods."""
    root = Path(__file__).resolve().parents[2]
    writers = {}
    for path in sorted((root / "cudatx").rglob("*.py")):
        name = path.relative_to(root).as_posix()
        lines = _writes_to_stdout(ast.parse(path.read_text(), filename=name))
        if lines and name != "cudatx/cli/output.py":
            writers[name] = lines
    assert sorted(writers) == sorted(_OWN_STDOUT), writers
