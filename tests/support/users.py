"""A real second user, for the tests of whose environment cudatx acts on (cudatx.trust).

:func:`other_user` makes one with useradd for the test and removes it after (root only, else
the test is skipped, saying why); :func:`their_world` gives them a venv of the pure world's
wheels, made with the system's own Python (under /usr, which every user can run) in a folder
every user can reach (a test's tmp_path is private to root), and owned by them.
"""

from __future__ import annotations

import os
import pwd
import secrets
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from .pure_world import World, build_pure_wheels, install_pure_world


@dataclass(frozen=True)
class User:
    name: str
    uid: int
    gid: int

    def run(self, *argv: str, **how: object) -> subprocess.CompletedProcess[str]:
        """`argv` run as this user (runuser), to the end."""
        return subprocess.run(
            ["runuser", "-u", self.name, "--", *argv],
            capture_output=True,
            text=True,
            check=False,
            **how,  # type: ignore[call-overload]
        )


@contextmanager
def other_user() -> Iterator[User]:
    """A user made for the test (useradd), removed after it."""
    if os.geteuid() != 0:
        pytest.skip("a second user can only be made by root (useradd)")
    for tool in ("useradd", "userdel", "runuser"):
        if shutil.which(tool) is None:
            pytest.skip(f"no {tool} on this machine to make a second user")
    name = f"cdtx{secrets.token_hex(4)}"
    made = subprocess.run(
        ["useradd", "--no-create-home", "--shell", "/bin/sh", "--user-group", name],
        capture_output=True,
        text=True,
        check=False,
    )
    if made.returncode != 0:
        pytest.skip(f"useradd failed here: {made.stderr.strip()}")
    try:
        entry = pwd.getpwnam(name)
        yield User(name, entry.pw_uid, entry.pw_gid)
    finally:
        subprocess.run(["userdel", name], capture_output=True, check=False)


SYSTEM_PYTHON = "/usr/bin/python3"


@contextmanager
def their_world(user: User) -> Iterator[World]:
    """The pure world (tests/support/pure_world.py), its venv and work folder owned by
    `user`, in a folder under /tmp every user can reach; the sentinel stays root's."""
    if not os.access(SYSTEM_PYTHON, os.X_OK):
        pytest.skip(f"no {SYSTEM_PYTHON} that every user can run")
    top = Path(tempfile.mkdtemp(prefix="cudatx-users-", dir="/tmp"))
    try:
        top.chmod(0o755)
        world = install_pure_world(build_pure_wheels(top / "wheels"), top, SYSTEM_PYTHON)
        for path in (world.venv, world.work):
            subprocess.run(["chown", "-R", f"{user.uid}:{user.gid}", os.fspath(path)], check=True)
        yield world
    finally:
        shutil.rmtree(top, ignore_errors=True)
