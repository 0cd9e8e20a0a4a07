"""The command line, one module per command family; `main` is the entry point."""

from __future__ import annotations

import click

from cudatx.cli import _startup  # noqa: F401  # first: its effect is on what follows
from cudatx.cli.app import cli, main, with_output
from cudatx.cli.change import install, remove, sync
from cudatx.cli.checkreq import check_requirements
from cudatx.cli.completion import completion
from cudatx.cli.demo import demo
from cudatx.cli.history import history, history_prune, history_show, rollback
from cudatx.cli.inspect import doctor, graph, why
from cudatx.cli.output import output_params
from cudatx.cli.trace import trace

_CACHE = "CUDATX_CACHE_DIR  where the scan cache lives [default: ~/.cache/cudatx]"
_QUERY = "CUDATX_QUERY_TIMEOUT  seconds the target Python has to answer [default: 60]"
_DPKG = "CUDATX_DPKG_ADMINDIR  the dpkg database system owners come from [default: /var/lib/dpkg]"

# Each command's one-line summary in `cudatx --help` (click would cut the docstring's first
# sentence at the width left beside the names), its examples, and the CUDATX_* variables
# that change what it does; all shown in its own --help.
_HELP: dict[click.Command, tuple[str, tuple[str, ...], tuple[str, ...]]] = {
    why: (
        "Which file a library loads from, whose bytes, and why.",
        ("cudatx why libcudnn.so.9 --python .venv", "cudatx why torch/lib/libtorch_cuda.so"),
        (_CACHE, _QUERY, _DPKG),
    ),
    doctor: (
        "What is already wrong here, by root cause, with fixes.",
        ("cudatx doctor --python .venv", "cudatx doctor --json"),
        (_CACHE, _QUERY, _DPKG),
    ),
    graph: (
        "The environment as a graph: a text tree, JSON, DOT, SVG.",
        (
            "cudatx graph --around nvidia-cudnn-cu13",
            "cudatx graph --around libcudnn.so.9 --format svg > cudnn.svg",
        ),
        (_CACHE, _QUERY),
    ),
    remove: (
        "Remove distributions, safely (plan, snapshot, uv).",
        (
            "cudatx remove nvidia-cudnn-cu13 --dry-run",
            "cudatx remove 'nvidia-*-cu13' --repair --yes --python .venv",
        ),
        (_CACHE, _QUERY, _DPKG),
    ),
    install: (
        "Install or upgrade distributions, safely.",
        ("cudatx install torchvision==0.28.0 --no-deps --dry-run",),
        (_CACHE, _QUERY, _DPKG),
    ),
    sync: (
        "Make the environment match requirements files, safely.",
        ("cudatx sync requirements.txt --dry-run", "cudatx sync pylock.toml --yes"),
        (_CACHE, _QUERY, _DPKG),
    ),
    check_requirements: (
        "Would these requirements files break loading here?",
        ("cudatx check-requirements requirements.txt", "cudatx check-requirements uv.lock"),
        (_CACHE, _QUERY, _DPKG),
    ),
    rollback: (
        "Put the environment back as it was before a transaction.",
        ("cudatx rollback --python .venv", "cudatx rollback 20260102T030405-1a2b --yes"),
        (_QUERY,),
    ),
    history: (
        "The transactions recorded for this environment.",
        ("cudatx history --python .venv", "cudatx history --json"),
        (_QUERY,),
    ),
    history_show: (
        "One transaction: what it changed, its steps, its plan.",
        ("cudatx history show --python .venv", "cudatx history show 20260102T030405-1a2b --json"),
        (_QUERY,),
    ),
    history_prune: (
        "Free the snapshots of older transactions.",
        ("cudatx history prune --keep 3",),
        (_QUERY,),
    ),
    demo: (
        "Build a small cu12/cu13 trap offline and look at it.",
        ("cudatx demo", "cudatx demo --keep /tmp/cudatx-demo"),
        (_QUERY,),
    ),
    trace: (
        "Run a command and record what the real loader maps.",
        (
            "cudatx trace -- python train.py --epochs 1",
            "cudatx trace --list --python .venv",
            "cudatx trace --clear",
        ),
        (_QUERY,),
    ),
    completion: (
        "Print the shell completion script (bash, zsh, fish).",
        (
            'eval "$(cudatx completion bash)"   # in ~/.bashrc',
            'eval "$(cudatx completion zsh)"    # in ~/.zshrc',
            "cudatx completion fish > ~/.config/fish/completions/cudatx.fish",
        ),
        (),
    ),
}


def _document(command: click.Command) -> None:
    summary, examples, variables = _HELP[command]
    command.short_help = summary
    # \b: click keeps the next paragraph's lines as written instead of re-wrapping them.
    parts = ["\b\nExamples:\n" + "\n".join(f"  {e}" for e in examples)]
    if variables:
        parts.append("\b\nEnvironment:\n" + "\n".join(f"  {v}" for v in variables))
    command.epilog = "\n\n".join(parts)
    # --color, -q and -v after the subcommand too, as uv takes its global options anywhere;
    # the command receives them, and the group's, as `out`.
    command.params.extend(output_params())
    with_output(command)


def _registered(group: click.Group) -> list[click.Command]:
    """Every command the group runs, a subgroup's own commands too (`history show`)."""
    found: list[click.Command] = []
    for command in group.commands.values():
        found.append(command)
        if isinstance(command, click.Group):
            found += _registered(command)
    return found


for _command in (why, doctor, graph, remove, install, sync, check_requirements, rollback):
    cli.add_command(_command)
for _command in (trace, history, demo, completion):
    cli.add_command(_command)
# Each registered command, not each listed in _HELP: a command added without its help is a
# KeyError here, never one without --color, -q and -v.
for _command in _registered(cli):
    _document(_command)
cli.params.extend(output_params())

__all__ = ["cli", "main"]
