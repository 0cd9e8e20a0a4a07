"""Every `cudatx` command printed in README.md and docs/ parses as printed.

A command a user copies from the documentation must not die on "No such command" or
"Missing option" (the apply summary once said "`cudatx history prune` frees it", which
failed for want of `--keep`). Each one is taken from where a user copies commands: inline
code spans, ```sh fences, and indented code lines (`$ ` stripped, a trailing `# comment`
and anything after a shell `|` or `>` cut off), then:

- a concrete command (no placeholder) is parsed by cudatx's own click tree, down to its
  last subcommand, exactly as `cudatx ...` would parse it before running;
- a synopsis (`SPEC...`, `[ID]`, `bash|zsh|fish`, `...`) names a command that exists, and
  every option it shows is one that command (or a group above it) takes.

The quick start itself is run, not only parsed, by tests/test_readme.py.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import click
import pytest

from cudatx.cli import cli
from tests.support.paths import REPO

_SPAN = re.compile(r"`(cudatx(?: [^`]*)?)`")
_FENCE = re.compile(r"^```(\w*)")
# A placeholder: SPEC, FILE..., ID, SONAME|PATH, [ID], `...`.
_PLACEHOLDER = re.compile(r"^\[?[A-Z][A-Z_|]*\]?(\.\.\.)?$|\.\.\.|^\[|\|")


def _documents() -> list[Path]:
    return [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


def _commands(text: str) -> list[str]:
    """The `cudatx ...` commands of one Markdown text, in order."""
    found: list[str] = []
    shell = False
    fenced = False
    for line in text.splitlines():
        fence = _FENCE.match(line.strip())
        if fence:
            fenced = not fenced
            shell = fenced and fence.group(1) in {"sh", "bash", "console", "shell"}
            continue
        found.extend(match.group(1) for match in _SPAN.finditer(line))
        code = line.strip().removeprefix("$ ")
        indented = not fenced and line.startswith("    ")
        if (shell or indented) and code.startswith("cudatx ") and "`" not in code:
            found.append(code)
    return [re.sub(r"\s+#.*$", "", command) for command in found]


def _argv(command: str) -> list[str]:
    words = shlex.split(command)
    for stop in ("|", ">", ">>", "&&", ";"):
        if stop in words:
            words = words[: words.index(stop)]
    assert words[0] == "cudatx", command
    return words[1:]


def _cases() -> list[tuple[str, str]]:
    cases = {
        (path.relative_to(REPO).as_posix(), command)
        for path in _documents()
        for command in _commands(path.read_text())
    }
    return sorted(cases)


def _resolve(words: list[str]) -> tuple[list[click.Command], list[str]]:
    """The chain of commands `words` names (cudatx, then each subcommand) and what follows."""
    chain: list[click.Command] = [cli]
    rest = list(words)
    while isinstance(chain[-1], click.Group):
        group = chain[-1]
        # Options of a group come before its subcommand's name (`cudatx -q remove`).
        index = next((i for i, w in enumerate(rest) if not w.startswith("-")), None)
        if index is None:
            break
        sub = group.get_command(click.Context(group), rest[index])
        if sub is None:
            break
        chain.append(sub)
        rest = rest[index + 1 :]
    return chain, rest


def _parse(words: list[str]) -> None:
    """Parse as `cudatx WORDS` would, down to the last subcommand, without running it."""
    context = cli.make_context("cudatx", list(words))
    command: click.Command = cli
    while isinstance(command, click.Group):
        # click 8.2 renamed protected_args (deprecated since) to _protected_args.
        protected = (
            context._protected_args
            if hasattr(context, "_protected_args")
            else context.protected_args
        )
        rest = [*protected, *context.args]
        if not rest:
            break
        name, sub, rest = command.resolve_command(context, rest)
        assert sub is not None and name is not None
        context = sub.make_context(name, rest, parent=context)
        command = sub


def _options(chain: list[click.Command]) -> set[str]:
    return {
        flag
        for command in chain
        for param in command.params
        if isinstance(param, click.Option)
        for flag in (*param.opts, *param.secondary_opts)
    } | {"--help"}


@pytest.mark.parametrize(("document", "command"), _cases())
def test_a_documented_command_parses_as_printed(document: str, command: str) -> None:
    words = _argv(command)
    chain, rest = _resolve(words)
    if rest and chain[-1] is not cli and isinstance(chain[-1], click.Group):
        assert rest[0].startswith("-") or _PLACEHOLDER.search(rest[0]), (
            f"{document}: `{command}`: no command {rest[0]!r}"
        )
    if "--" in words:
        words = [*words[: words.index("--") + 1], "python"]  # then the traced command
    if any(_PLACEHOLDER.search(word) for word in words if not word.startswith("-")):
        if chain[-1].context_settings.get("allow_interspersed_args") is False:
            # A command that runs another (`trace`): its options end at the first word
            # that is not one.
            end = next((i for i, w in enumerate(rest) if not w.startswith("-")), len(rest))
            words = words[: len(words) - len(rest) + end]
        named = {w.split("=")[0] for w in words if w.startswith("-") and w != "--"}
        unknown = named - _options(chain)
        assert not unknown, f"{document}: `{command}`: no option {sorted(unknown)}"
        return
    try:
        _parse(words)
    except click.MissingParameter as exc:
        # Prose names a command (`cudatx remove`) without its arguments; a missing option
        # is still a failure: `cudatx history prune` can never run as printed.
        if not (isinstance(exc.param, click.Argument) and len(chain) == len(words) + 1):
            pytest.fail(f"{document}: `{command}` does not parse: {exc.format_message()}")
    except click.ClickException as exc:
        pytest.fail(f"{document}: `{command}` does not parse: {exc.format_message()}")


def test_the_documents_are_read() -> None:
    """The extraction finds the commands it is meant to, so the test above cannot pass on
    nothing: the README's quick start and the reference's examples are among them."""
    commands = {command for _, command in _cases()}
    assert len(commands) >= 40
    assert "cudatx doctor --python ./cudatx-demo/venv" in commands
    assert "cudatx history prune --keep N" in commands
    assert "cudatx graph | less" in commands


@pytest.mark.parametrize(
    "command",
    [
        "cudatx history prune",
        "cudatx rmove six",
        "cudatx remove six --dryrun",
        "cudatx history prune --keep N --frobnicate",
    ],
)
def test_a_broken_command_is_caught(command: str) -> None:
    """The same checks fail on what a stale document would show."""
    with pytest.raises((AssertionError, pytest.fail.Exception)):
        test_a_documented_command_parses_as_printed("doc.md", command)
