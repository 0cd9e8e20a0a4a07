"""Command lines cudatx prints for a user to paste: one environment's, every word quoted.

A printed command must do what cudatx checked when pasted into another shell, where another
venv may be active or none at all: so it names the environment (`--python`), the library
path the plan was replayed with, and where uv found wheels (`--find-links`, the index
options); and it is `shlex.join`ed, since a prefix, a URL or a requirements file's path may
hold anything a shell would split or expand.
"""

from __future__ import annotations

import os
import shlex
import shutil
from collections.abc import Iterable, Sequence

from cudatx.analysis.ownership import foreign_record
from cudatx.discover.dists import reinstall_spec
from cudatx.discover.owners import Owner, grouped
from cudatx.environment import Environment
from cudatx.models import Distribution
from cudatx.uv import UvFailed, find_uv, reinstall_words


def cudatx_line(
    env: Environment, words: Sequence[str], *, uv: Sequence[str] = (), yes: bool = False
) -> str:
    """`cudatx WORDS [--yes] --python PREFIX [--ld-library-path P] UV...`. `yes`: it runs as
    printed off a terminal too (doctor's fixes); a plan's suggestion, a dry run, has none."""
    args = ["cudatx", *words, *(["--yes"] if yes else []), "--python", env.target.prefix]
    if env.ld_library_path:
        args += ["--ld-library-path", env.ld_library_path]
    return shlex.join([*args, *uv])


def cudatx_command(env: Environment, *words: str) -> str:
    """A cudatx command for this environment that runs as printed, off a terminal too."""
    return cudatx_line(env, words, yes=True, uv=_breaking(env))


def _breaking(env: Environment) -> list[str]:
    """`--break-system-packages` where the target is a Python its distributor manages (PEP
    668): cudatx, uv and pip (23.0 on) refuse a change there without it, and a fix doctor
    prints must run as printed (cudatx.discover.target.externally_managed)."""
    from cudatx.discover.target import externally_managed

    return ["--break-system-packages"] if externally_managed(env.target) else []


def owner_commands(
    env: Environment, verb: str, records: Iterable[Distribution], *, exact: bool = False
) -> list[tuple[Owner, list[Distribution], str]]:
    """For records of owners cudatx does not change (cudatx.analysis.ownership.foreign_record),
    by owner: the owner, its records, and the command a user runs to VERB them where cudatx
    will not act (`exact`: their installed builds, reinstalled)."""
    prefix = env.target.prefix
    return [
        (owner, listed, owner.command(prefix, verb, listed, exact=exact))
        for owner, listed in grouped(records).items()
    ]


def uv_word() -> str:
    """How a printed command names uv: `uv` where the shell finds one, else the binary of the
    uv package installed with cudatx (pipx and `uv tool install` put only cudatx on PATH)."""
    if shutil.which("uv") is not None:
        return "uv"
    try:
        return find_uv(None)
    except UvFailed:
        return "uv"


def reinstall_command(env: Environment, dist: Distribution) -> str:
    """Restore a distribution's own bytes with the installer that put it there."""
    return reinstall_commands(env, (dist,))[0]


def reinstall_commands(env: Environment, dists: Sequence[Distribution]) -> list[str]:
    """Restore the distributions' own bytes, each with the installer that put it there:
    one command per installer (uv, pip, an owner's such as conda), every distribution of that
    installer in it."""
    foreign: dict[str, Distribution] = {}
    by_uv: list[Distribution] = []
    by_pip: list[Distribution] = []
    for dist in dists:
        record = foreign_record(env, dist)  # another owner's package: that owner restores it
        if record is not None:
            foreign.setdefault(record.name, record)
        elif (dist.installer or "").lower() == "uv":
            by_uv.append(dist)
        else:
            by_pip.append(dist)
    prefix = env.target.prefix
    out = []
    if by_uv:
        words = reinstall_words(prefix, [d.name for d in by_uv], _breaking(env))
        out.append(shlex.join([uv_word(), *words, *map(reinstall_spec, by_uv)]))
    if by_pip:
        python = os.path.join(prefix, "bin", "python")
        words = [python, "-m", "pip", "install", "--force-reinstall", "--no-deps"]
        words += _breaking(env)
        out.append(shlex.join([*words, *map(reinstall_spec, by_pip)]))
    out += [c for _, _, c in owner_commands(env, "install", foreign.values(), exact=True)]
    return out
