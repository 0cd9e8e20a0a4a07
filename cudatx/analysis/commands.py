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
from collections.abc import Sequence

from cudatx.analysis.ownership import conda_record_of
from cudatx.discover.dists import reinstall_spec
from cudatx.environment import Environment
from cudatx.models import Distribution


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
    return cudatx_line(env, words, yes=True)


def conda_command(env: Environment, verb: str, *records: Distribution, exact: bool = False) -> str:
    """`conda VERB -p PREFIX NAME...` for conda records (`exact`: the installed builds, as
    NAME=VERSION=BUILD, reinstalled): what a user runs where cudatx will not act (mamba
    takes the same words)."""
    specs = []
    for record in records:
        assert record.conda is not None
        specs.append(
            f"{record.conda.name}={record.version}={record.conda.build}"
            if exact
            else record.conda.name
        )
    words = ["conda", verb, "-p", env.target.prefix]
    if verb == "install" and exact:
        words.append("--force-reinstall")
    return shlex.join([*words, *specs])


def reinstall_command(env: Environment, dist: Distribution) -> str:
    """Restore a distribution's own bytes with the installer that put it there."""
    record = conda_record_of(env, dist)  # a conda package: conda restores it
    if record is not None:
        return conda_command(env, "install", record, exact=True)
    spec = reinstall_spec(dist)
    prefix = env.target.prefix
    if (dist.installer or "").lower() == "uv":
        words = ["uv", "pip", "install", "--python", prefix, "--reinstall-package", dist.name]
        return shlex.join([*words, "--no-deps", spec])
    python = os.path.join(prefix, "bin", "python")
    return shlex.join([python, "-m", "pip", "install", "--force-reinstall", "--no-deps", spec])
