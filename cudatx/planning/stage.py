"""What uv would do, and the files it would write, without touching the environment.

uv is asked twice. `uv pip install|sync --dry-run` says which distributions leave and which
arrive (its resolver, indexes and configuration, not ours). Then every arriving
distribution is installed with `--prefix` into a staging folder (`--no-deps`, pinned to
what the dry run chose), which fills uv's cache and gives the exact files and RECORD the
real install will write. The planner simulates with those bytes.

`--prefix` rather than `--target`: it lays the staging folder out as the environment is
(lib/pythonX.Y/site-packages, bin, ...), so RECORD paths are the ones the real install
writes, scripts as `../../../bin/x` included; `--target` puts every scheme under one
folder and writes `bin/x`, which cannot be told apart from a package named `bin`.
"""

from __future__ import annotations

import contextlib
import glob
import os
import re
import stat
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace

from cudatx.discover.dists import scan_distributions
from cudatx.models import Distribution, Frozen
from cudatx.names import canonical_name
from cudatx.uv import dry_run_argv, run_uv, staging_argv

# One line per change in the output of `uv pip install|sync --dry-run` (added in
# astral-sh/uv#1436; as uv 0.13.9 prints it: " - name==version", " + name==version",
# " + name @ url"). A line that does not match is uv's narration, not a change.
_CHANGE = re.compile(r"^ (?P<sign>[+-]) (?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)(?P<rest>==\S+| @ \S+)")


class Arrival(Frozen, kw_only=False):
    """A distribution uv would install: `spec` pins exactly what its dry run chose."""

    name: str  # canonical
    spec: str  # name==version, or name @ url


class UvPlan(Frozen, kw_only=False):
    leaving: tuple[tuple[str, str], ...]  # (canonical name, version) uv would uninstall
    arriving: tuple[Arrival, ...]


def parse_dry_run(output: str) -> UvPlan:
    leaving: list[tuple[str, str]] = []
    arriving: list[Arrival] = []
    for line in output.splitlines():
        match = _CHANGE.match(line)
        if match is None:
            continue
        name = canonical_name(match["name"])
        rest = match["rest"]
        if match["sign"] == "-":
            leaving.append((name, rest[2:] if rest.startswith("==") else ""))
        else:
            arriving.append(Arrival(name, f"{name}{rest}"))
    return UvPlan(tuple(leaving), tuple(arriving))


def ask_uv(
    uv: str,
    prefix: str,
    command: str,
    args: Sequence[str],
    options: Sequence[str],
    heard: Callable[[str], None] | None = None,
) -> UvPlan:
    """`uv pip COMMAND --dry-run OPTIONS ARGS` for the environment at `prefix`: what would
    change. `heard`: told each line uv writes on stderr (cudatx.uv.run_uv)."""
    with _no_new_lock_file(prefix):
        output = run_uv(uv, dry_run_argv(command, prefix, args, options), heard=heard)
    return parse_dry_run(output)


@contextlib.contextmanager
def _no_new_lock_file(prefix: str) -> Iterator[None]:
    """Even a dry run leaves the empty file uv locks the environment with (`PREFIX/.lock`,
    seen with uv 0.13.9); a dry run of ours must leave the environment as it found it, so
    a lock file that was not there before goes again (empty and regular only)."""
    lock = os.path.join(prefix, ".lock")
    existed = os.path.lexists(lock)
    try:
        yield
    finally:
        if not existed:
            with contextlib.suppress(OSError):
                st = os.lstat(lock)
                if stat.S_ISREG(st.st_mode) and st.st_size == 0:
                    os.unlink(lock)


def stage(
    uv: str,
    prefix: str,
    site: str,
    arriving: Sequence[Arrival],
    folder: str,
    options: Sequence[str],
    heard: Callable[[str], None] | None = None,
    timeout: float | None = None,
    flags: Sequence[str] = (),
) -> tuple[Distribution, ...]:
    """Install `arriving` under `folder` as uv would into the environment at `prefix`
    (whose site folder is `site`), and read them back: their `site` is the staged one;
    `heard` is told each line uv writes on stderr (its downloads); `timeout`: the seconds uv
    is given (cudatx.uv.run_uv); `flags`: the apply's own for these (a repair's
    `--reinstall-package NAME`, which has uv read a local wheel again rather than the copy
    its cache holds).

    `--python` gives uv the target interpreter, so it picks the wheels the real install
    would (same tags); `--no-deps` because the dry run already chose every distribution.
    """
    if not arriving:
        return ()
    with _no_new_lock_file(prefix):
        argv = staging_argv(prefix, folder, [a.spec for a in arriving], options, flags)
        run_uv(uv, argv, heard=heard, timeout=timeout)
    staged, _ = scan_distributions((staged_site(folder, site, prefix),))
    wanted = {a.name for a in arriving}
    return tuple(d for d in staged if d.name in wanted)


def staged_site(folder: str, site: str, prefix: str) -> str:
    """Where `uv pip install --prefix FOLDER` put what goes to `site`: uv lays the folder out
    "as if a virtual environment were present at that location" (uv's --prefix help), so
    `lib/pythonX.Y/site-packages`, whatever the target's own scheme (Debian's system Python
    installs into /usr/local/lib/python3.X/dist-packages). The target's own layout where
    that is not there."""
    found = [
        f
        for f in glob.glob(os.path.join(glob.escape(folder), "lib", "python*", "site-packages"))
        if os.path.isdir(f)
    ]
    return found[0] if len(found) == 1 else os.path.join(folder, os.path.relpath(site, prefix))


def relocate(dist: Distribution, site: str) -> Distribution:
    """The staged distribution as it will be once installed into `site`."""
    return replace(
        dist, site=site, metadata_dir=os.path.join(site, os.path.basename(dist.metadata_dir))
    )
