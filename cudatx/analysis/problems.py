"""What doctor reports, one finding per root cause, and the commands that fix them."""

from __future__ import annotations

from enum import StrEnum

from cudatx.environment import Environment
from cudatx.models import Frozen, SystemPackage
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
    reinstalls: tuple[str, ...] = ()  # what the fix reinstalls, its own bytes restored
    # the system packages (dpkg, rpm) whose files the finding is about: what would have to
    # change, which cudatx never changes
    system_packages: tuple[SystemPackage, ...] = ()


def short(env: Environment, path: str) -> str:
    """A path as users know it: folders resolved (no `torch/lib/../..`), relative to the site
    folder when inside one. The loader's spelling depends on which root mapped it first."""
    return display_path(env.keys(path), env.target.site_packages)
