"""What doctor reports, one finding per root cause, and the commands that fix them."""

from __future__ import annotations

import os
import shlex
from enum import StrEnum

from cudatx.discover.dists import reinstall_spec
from cudatx.environment import Environment
from cudatx.models import Distribution, Frozen
from cudatx.paths import display_path


class Severity(StrEnum):
    ERROR = "error"  # something that loads, or a requirement, fails now
    WARNING = "warning"  # nothing fails yet; a change could make it


class Problem(Frozen):
    severity: Severity
    code: str  # stable identifier, documented in README.md
    what: str
    why: str
    fix: str | None = None  # a command the user can run, as printed
    paths: tuple[str, ...] = ()
    distributions: tuple[str, ...] = ()
    consequences: tuple[str, ...] = ()  # what fails because of it, one line each
    removes: tuple[str, ...] = ()  # what the fix removes (`cudatx remove ... --repair`)


def short(env: Environment, path: str) -> str:
    """A path as users know it: folders resolved (no `torch/lib/../..`), relative to the site
    folder when inside one. The loader's spelling depends on which root mapped it first."""
    return display_path(env.keys(path), env.target.site_packages)


def reinstall_command(env: Environment, dist: Distribution) -> str:
    """Restore a distribution's own bytes with the installer that put it there (a shell
    command: every word quoted, since a prefix or a direct URL may hold anything)."""
    spec = reinstall_spec(dist)
    prefix = env.target.prefix
    if (dist.installer or "").lower() == "uv":
        words = ["uv", "pip", "install", "--python", prefix, "--reinstall-package", dist.name]
        return shlex.join([*words, "--no-deps", spec])
    python = os.path.join(prefix, "bin", "python")
    return shlex.join([python, "-m", "pip", "install", "--force-reinstall", "--no-deps", spec])


def cudatx_command(env: Environment, *words: str) -> str:
    """A cudatx command for this environment that runs as printed, off a terminal too."""
    return shlex.join(["cudatx", *words, "--yes", "--python", env.target.prefix])
