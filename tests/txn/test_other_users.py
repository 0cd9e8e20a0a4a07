"""Whose environment: root never changes, rolls back, or runs the interpreter of an
environment another user can write (cudatx.trust), as OpenSSH's StrictModes refuses a
~/.ssh others can write. That user could otherwise swap a folder for a symlink between
cudatx's checks and uv's deletions (the red team's /proc watcher made root's `cudatx remove`
delete root-owned files in 4 of 4 trials), or make the interpreter run their code as root.

With a real second user (useradd; skipped, saying why, where the tests do not run as root),
owning a real venv made by real uv (tests/support/users.py).
"""

from __future__ import annotations

import os
import shlex
import subprocess
from pathlib import Path

import pytest

from tests.support.cli import cudatx
from tests.support.digest import tree_digest
from tests.support.pure_world import World, run
from tests.support.txn_world import assert_same, error
from tests.support.users import SYSTEM_PYTHON, User, other_user, their_world

pytestmark = pytest.mark.reliability
UNSAFE_PATHS = 17  # cudatx/errors.py


@pytest.fixture
def user() -> object:
    with other_user() as made:
        yield made


@pytest.fixture
def theirs(user: User) -> object:
    with their_world(user) as world:
        yield world


def _refused(done: subprocess.CompletedProcess[str], user: User) -> str:
    assert done.returncode == UNSAFE_PATHS, done.stderr
    line = error(done)
    assert f"uid {user.uid} ({user.name})" in line and "--allow-other-writers" in line, line
    return line


def test_root_refuses_to_change_or_roll_back_another_users_environment(
    user: User, theirs: World, record_property: pytest.RecordProperty
) -> None:
    """remove, install (its dry run too: uv runs the interpreter), rollback and trace: one
    line naming the owner, exit 17, nothing changed and no store made; with
    --allow-other-writers root may, and rolls it back the same way."""
    before, outside = theirs.digest(), tree_digest(theirs.sentinel)
    cases = [
        ("remove", "pure", "--yes", "--ignore-running"),
        ("install", "pure", "--dry-run", "--offline"),
        ("rollback", "--yes"),
    ]
    for args in cases:
        _refused(run(theirs, *args), user)
    traced = cudatx("trace", "--python", theirs.venv, "--", "python", "-c", "pass", cwd=theirs.work)
    _refused(traced, user)
    assert_same(before, theirs.digest())
    assert not (theirs.venv / ".cudatx").exists()

    accepted = run(theirs, "remove", "pure", "--yes", "--ignore-running", "--allow-other-writers")
    assert accepted.returncode == 0, accepted.stderr
    _refused(run(theirs, "rollback", "--yes"), user)
    back = run(theirs, "rollback", "--yes", "--allow-other-writers")
    assert back.returncode == 0, back.stderr
    assert_same(before, theirs.digest())
    assert_same(outside, tree_digest(theirs.sentinel))
    record_property("cases", len(cases) + 3)
    record_property("outcome", "exit 17 naming the owner; --allow-other-writers applies and undoes")


def test_a_group_other_users_share_is_another_writer_and_a_private_one_is_not(
    user: User, theirs: World
) -> None:
    """Group write counts only where the group holds someone else (Debian's harmless
    group-writability): root's own group on its own venv is harmless, theirs is not."""
    subprocess.run(["chown", "-R", "0:0", os.fspath(theirs.venv)], check=True)
    theirs.site.chmod(0o775)
    dry = run(theirs, "remove", "pure", "--dry-run", "--repair", "--offline")
    assert dry.returncode in (0, 1), dry.stderr  # group root holds no one but root here
    subprocess.run(["chgrp", str(user.gid), os.fspath(theirs.site)], check=True)
    done = run(theirs, "remove", "pure", "--yes", "--ignore-running")
    assert done.returncode == UNSAFE_PATHS, done.stderr
    assert f"{theirs.site} (writable by group {user.gid} ({user.name}))" in error(done)


def _tattling_python(user: User, w: World) -> Path:
    """bin/python as a script that writes who runs it, then runs the real interpreter under
    the same name (so it still finds its pyvenv.cfg)."""
    said = w.work / "ran-as"
    python = w.venv / "bin" / "python"
    real = os.path.realpath(python)
    python.unlink()
    python.write_text(
        "#!/bin/bash\n"
        f"id -u >> {shlex.quote(os.fspath(said))}\n"
        f'exec -a "$0" {shlex.quote(real)} "$@"\n'
    )
    python.chmod(0o755)
    os.chown(python, user.uid, user.gid)
    return said


def test_doctor_as_root_runs_another_users_interpreter_as_them_and_says_so(
    user: User, theirs: World, record_property: pytest.RecordProperty
) -> None:
    """`doctor --python THEIR_ENV` as root: their bin/python runs as them, never as root
    (what it runs, it runs with their rights), and doctor names the owner."""
    said = _tattling_python(user, theirs)
    before = theirs.digest()
    for args in (("doctor",), ("remove", "pure", "--dry-run"), ("why", "libc.so.6")):
        done = run(theirs, *args)
        assert done.returncode in (0, 1, 4), (args, done.stderr)
        assert f"uid {user.uid} ({user.name})" in done.stderr, done.stderr
        assert f"its interpreter was run as uid {user.uid}, not as root" in done.stderr
    ran = said.read_text().split()
    assert ran and set(ran) == {str(user.uid)}, ran
    assert_same(before, theirs.digest())
    # The same interpreter is root's to run once root says so.
    accepted = run(theirs, "doctor", "--allow-other-writers")
    assert accepted.returncode in (0, 1), accepted.stderr
    assert said.read_text().split()[-1] == "0"
    record_property("cases", 4)
    record_property("outcome", f"ran as uid {user.uid}, never 0, until --allow-other-writers")


def test_a_system_python_is_no_other_users_to_write() -> None:
    """The system interpreter (root's, under /usr) is no reason to refuse anything."""
    from cudatx.trust import interpreter_paths, other_writers

    if not os.access(SYSTEM_PYTHON, os.X_OK):
        pytest.skip(f"no {SYSTEM_PYTHON}")
    assert other_writers(interpreter_paths(SYSTEM_PYTHON)) == []
