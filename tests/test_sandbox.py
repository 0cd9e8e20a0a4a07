"""cudatx.sandbox with the real kernel: what a confined command can write, and what a
symlink inside its writable folder cannot reach. Every mount is made in the helper's own
namespaces, never in this process or the host's.

Each confined case runs the same command unconfined too, where its write lands: so each
would fail were the confinement absent.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from cudatx import sandbox
from cudatx.sandbox import NONE, ROOT, SETUP_FAILED, USER, Confinement, Mode

from .support.pure_world import PURE_FILES, build_pure_wheels, install_pure_world
from .support.users import SYSTEM_PYTHON, other_user
from .support.venvs import uv_bin, uv_env

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="namespaces are Linux's")


def _probed(mode: Mode) -> Confinement:
    if mode == ROOT and os.geteuid() != 0:
        pytest.skip("a plain mount namespace needs root")
    found = sandbox.probe((mode,))
    if not found.held:
        pytest.skip(f"this kernel makes no {mode} here: {found.reason}")
    return found


@pytest.fixture(params=[ROOT, USER])
def probed(request: pytest.FixtureRequest) -> Confinement:
    return _probed(request.param)


@pytest.fixture
def place(tmp_path: Path) -> Iterator[Path]:
    """A writable folder `w` and an outside folder `out` holding 4 files, side by side."""
    (tmp_path / "w").mkdir()
    out = tmp_path / "out"
    (out / "sub").mkdir(parents=True)
    for name in ("a.txt", "b.txt", "sub/c.txt", "sub/d.txt"):
        (out / name).write_text("outside\n")
    yield tmp_path


def _outside(place: Path) -> list[str]:
    return sorted(str(p.relative_to(place / "out")) for p in (place / "out").rglob("*"))


def _sh(script: str, **how: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["sh", "-c", script],
        capture_output=True,
        text=True,
        check=False,
        **how,  # type: ignore[call-overload]
    )


def _confined(
    probed: Confinement, script: str, writable: list[Path]
) -> subprocess.CompletedProcess[str]:
    how = sandbox.confine(["sh", "-c", script], [os.fspath(w) for w in writable], probed=probed)
    assert how.argv[-3:] == ("sh", "-c", script)
    done = subprocess.run(list(how.argv), capture_output=True, text=True, check=False, env=how.env)
    assert how.failure(done.returncode, done.stderr) is None, done.stderr
    return done


def test_the_probe_says_which_mode_holds(probed: Confinement) -> None:
    assert probed.mode in (ROOT, USER)
    assert probed.locked, probed.reason
    assert probed.describe() == probed.mode


def test_a_confined_write_lands_inside_and_is_refused_outside(
    probed: Confinement, place: Path
) -> None:
    script = f"echo in > {place}/w/new && echo out > {place}/out/new"
    done = _confined(probed, script, [place / "w"])
    assert (place / "w" / "new").read_text() == "in\n"
    assert not (place / "out" / "new").exists()
    assert done.returncode != 0
    assert "Read-only file system" in done.stderr
    # The same command unconfined: the write outside lands (what the sandbox stops).
    assert _sh(script).returncode == 0
    assert (place / "out" / "new").read_text() == "out\n"


def test_a_symlink_in_the_writable_folder_reaches_nothing_outside(
    probed: Confinement, place: Path
) -> None:
    (place / "w" / "pkg").symlink_to(place / "out")  # a package folder swapped for a link
    script = f"rm -rf {place}/w/pkg/; echo x > {place}/w/pkg/a.txt; rm -f {place}/w/pkg/b.txt"
    done = _confined(probed, script, [place / "w"])
    assert "Read-only file system" in done.stderr
    assert _outside(place) == ["a.txt", "b.txt", "sub", "sub/c.txt", "sub/d.txt"]
    assert (place / "out" / "a.txt").read_text() == "outside\n"
    # The link itself is the writable folder's: it can go.
    assert _confined(probed, f"rm {place}/w/pkg", [place / "w"]).returncode == 0
    assert not (place / "w" / "pkg").is_symlink()
    # Unconfined, the same rm -rf empties the outside folder.
    (place / "w" / "pkg").symlink_to(place / "out")
    _sh(script)
    assert _outside(place) != ["a.txt", "b.txt", "sub", "sub/c.txt", "sub/d.txt"]


def test_the_confined_command_cannot_make_the_file_system_writable_again(
    probed: Confinement, place: Path
) -> None:
    """The read-only flags are locked (a user namespace below the one that set them): not
    even a root command can remount, nor unmount the writable folder's bind to reach
    what it covers."""
    if shutil.which("mount") is None:
        pytest.skip("no mount(8) here")
    script = (
        f"mount -o remount,bind,rw {place}/out; mount -o remount,bind,rw /; "
        f"umount -l {place}/w; echo out > {place}/out/new"
    )
    _confined(probed, script, [place / "w"])
    assert not (place / "out" / "new").exists()


def test_proc_shows_only_the_sandbox_so_no_host_process_leads_out(
    probed: Confinement, place: Path
) -> None:
    """/proc/PID/root and /proc/PID/cwd of a process outside would lead into the host's
    writable mounts: the sandbox's /proc has its own processes only."""
    script = (
        f"echo out > /proc/{os.getpid()}/root{place}/out/new; "
        f"echo out > /proc/{os.getpid()}/cwd/new-{os.getpid()}; ls /proc"
    )
    done = _confined(probed, script, [place / "w"])
    assert not (place / "out" / "new").exists()
    assert not Path(f"new-{os.getpid()}").exists()
    pids = sorted(int(n) for n in done.stdout.split() if n.isdigit())
    assert pids and max(pids) < 10, pids


def test_exit_status_and_signals_pass_through_and_nothing_outlives_the_command(
    probed: Confinement, place: Path
) -> None:
    assert _confined(probed, "exit 7", [place / "w"]).returncode == 7
    assert _confined(probed, "kill -TERM $$", [place / "w"]).returncode == -15
    # SIGKILL takes no disposition: the helper still ends as the command did (it said
    # "Invalid argument" as a failure of its own: a uv killed with -9 read as no sandbox)
    assert _confined(probed, "kill -KILL $$", [place / "w"]).returncode == -9
    # A process the command leaves behind dies with it (the PID namespace's end).
    _confined(probed, f"(sleep 1; echo late > {place}/w/late) & exit 0", [place / "w"])
    time.sleep(2)
    assert not (place / "w" / "late").exists()


def test_a_writable_folder_swapped_before_the_sandbox_is_made_is_refused(
    probed: Confinement, place: Path
) -> None:
    how = sandbox.confine(["sh", "-c", "echo x > w/a.txt"], [os.fspath(place / "w")], probed=probed)
    (place / "w").rename(place / "was")
    (place / "w").symlink_to(place / "out")  # the folder cudatx stat'ed is gone
    done = subprocess.run(
        list(how.argv), capture_output=True, text=True, check=False, cwd=place, env=how.env
    )
    assert done.returncode == SETUP_FAILED
    why = how.failure(done.returncode, done.stderr)
    assert why is not None and "no longer the folder cudatx checked" in why
    with pytest.raises(sandbox.SandboxFailed, match="nothing was run"):
        how.check(done.returncode, done.stderr)
    assert (place / "out" / "a.txt").read_text() == "outside\n"


def test_tmp_is_writable_and_is_the_commands_tmpdir(probed: Confinement, place: Path) -> None:
    tmp = place / "tmp"
    tmp.mkdir()
    how = sandbox.confine(
        ["sh", "-c", 'echo t > "$TMPDIR/x"'], [os.fspath(place / "w")], probed=probed, tmp=str(tmp)
    )
    assert how.env is not None and how.env["TMPDIR"] == str(tmp)
    done = subprocess.run(list(how.argv), capture_output=True, text=True, env=how.env, check=False)
    assert done.returncode == 0, done.stderr
    assert (tmp / "x").read_text() == "t\n"


def test_without_namespaces_the_probe_says_none_and_why() -> None:
    """User namespaces off (user.max_user_namespaces=0, set inside a namespace of the test's
    own) and no CAP_SYS_ADMIN: no sandbox, and the reason says so; confine then runs the
    command as it is."""
    for tool in ("unshare", "setpriv"):
        if shutil.which(tool) is None:
            pytest.skip(f"no {tool} here")
    root = os.path.dirname(os.path.dirname(sandbox.__file__))
    code = (
        f"import sys, json; sys.path.insert(0, {root!r}); "
        "from cudatx import sandbox; p = sandbox.probe(); print(json.dumps([p.mode, p.reason]))"
    )
    inner = (
        "echo 0 > /proc/sys/user/max_user_namespaces && "
        f'exec setpriv --inh-caps=-all --bounding-set=-all {sys.executable} -I -c "$0"'
    )
    done = subprocess.run(
        ["unshare", "--user", "--map-root-user", "sh", "-c", inner, code],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot turn user namespaces off here: {done.stderr.strip()}")
    mode, reason = json.loads(done.stdout)
    assert mode == NONE
    assert "not available" in reason and "user namespace" in reason, reason
    none = Confinement(NONE, reason)
    assert none.describe().startswith("none: not available")
    how = sandbox.confine(["true"], ["/nonexistent"], probed=none)
    assert how.argv == ("true",)


def test_an_unprivileged_user_gets_a_user_namespace() -> None:
    """As a real second user (useradd): the probe finds a user namespace, and a confined
    write outside fails with EROFS where the same write unconfined lands."""
    if not os.access(SYSTEM_PYTHON, os.X_OK):
        pytest.skip(f"no {SYSTEM_PYTHON} that every user can run")
    top = Path(tempfile.mkdtemp(prefix="cudatx-sandbox-", dir="/tmp"))
    try:
        top.chmod(0o755)
        with other_user() as user:
            for name in ("w", "out"):
                (top / name).mkdir()
                os.chown(top / name, user.uid, user.gid)
            root = os.path.dirname(os.path.dirname(sandbox.__file__))
            code = (
                f"import sys, subprocess; sys.path.insert(0, {root!r}); "
                "from cudatx import sandbox; p = sandbox.probe(); print(p.describe()); "
                "assert p.held, p.reason; "
                f"how = sandbox.confine(['sh', '-c', 'id -u; echo in > {top}/w/x; "
                f"echo out > {top}/out/x'], ['{top}/w'], probed=p); "
                "done = subprocess.run(how.argv, capture_output=True, text=True); "
                "print(done.stdout + done.stderr)"
            )
            done = user.run(SYSTEM_PYTHON, "-I", "-c", code, cwd=top)
            said = done.stdout + done.stderr
            if "none: " in said:
                pytest.skip(f"this kernel gives {user.name} no user namespace: {said.strip()}")
            assert said.startswith(USER), said
            assert str(user.uid) in said.splitlines()  # the command runs as the user's uid
            assert (top / "w" / "x").read_text() == "in\n"
            assert not (top / "out" / "x").exists()
            assert "Read-only file system" in said
            unconfined = user.run("sh", "-c", f"echo out > {top}/out/x")
            assert unconfined.returncode == 0 and (top / "out" / "x").exists()
    finally:
        shutil.rmtree(top, ignore_errors=True)


def test_uv_uninstalling_through_a_swapped_package_folder_deletes_nothing_outside(
    probed: Confinement, tmp_path: Path
) -> None:
    """Issue 32's measurement: `pure/` swapped for a symlink to an outside folder holding
    files of the same names after cudatx's check. Unconfined, uv deletes them through the
    link; confined, it fails (EROFS) and every outside file is still there."""
    wheels = build_pure_wheels(tmp_path / "wheels")
    env = uv_env()
    cache = Path(env["UV_CACHE_DIR"])
    results = {}
    for confined in (False, True):
        top = tmp_path / ("confined" if confined else "unconfined")
        top.mkdir()
        world = install_pure_world(wheels, top)
        outside = top / "outside"
        for name, data in PURE_FILES.items():
            path = outside / name.removeprefix("pure/")
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
        shutil.rmtree(world.site / "pure")
        (world.site / "pure").symlink_to(outside)
        argv = [uv_bin(), "pip", "uninstall", "--python", os.fspath(world.venv), "pure"]
        scratch = top / "tmp"
        scratch.mkdir()
        if confined:
            how = sandbox.confine(
                argv,
                [os.fspath(world.venv), os.fspath(cache)],
                probed=probed,
                env=env,
                tmp=os.fspath(scratch),
            )
            argv, env_run = list(how.argv), how.env
        else:
            env_run = env
        done = subprocess.run(argv, capture_output=True, text=True, env=env_run, check=False)
        left = sorted(str(p.relative_to(outside)) for p in outside.rglob("*.py"))
        results[confined] = (done.returncode, done.stderr, left)
    all_four = ["__init__.py", "mod.py", "sub/__init__.py", "sub/deep.py"]
    rc, said, left = results[False]
    assert left != all_four, f"unconfined uv deleted nothing outside: {said}"
    rc, said, left = results[True]
    assert left == all_four, said
    assert rc != 0 and "Read-only file system" in said, said


def test_before_mount_setattr_each_mount_is_remounted_read_only(
    probed: Confinement, place: Path
) -> None:
    """The fallback for kernels before 5.12 (mount(2) MS_REMOUNT of each mount in
    /proc/self/mountinfo, keeping its locked flags), forced where mount_setattr exists."""
    (place / "w" / "pkg").symlink_to(place / "out")
    script = f"echo in > {place}/w/new; rm -rf {place}/w/pkg/; echo out > {place}/out/new"
    spec = {
        "writable": [[os.fspath(place / "w"), *_dev_ino(place / "w")]],
        "modes": [probed.mode],
        "by_remount": True,
    }
    done = subprocess.run(
        sandbox.helper_argv(spec, ["sh", "-c", script]), capture_output=True, text=True
    )
    assert done.returncode != SETUP_FAILED, done.stderr
    assert (place / "w" / "new").read_text() == "in\n"
    assert not (place / "out" / "new").exists()
    assert _outside(place) == ["a.txt", "b.txt", "sub", "sub/c.txt", "sub/d.txt"]
    assert "Read-only file system" in done.stderr


def _dev_ino(path: Path) -> tuple[int, int]:
    st = path.stat()
    return st.st_dev, st.st_ino
