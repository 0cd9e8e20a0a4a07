"""cudatx.txn.running against real processes that really map a library compiled here."""

from __future__ import annotations

import json
import os
import pwd
import select
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import pytest

from cudatx.documents import load_json
from cudatx.errors import UnreadableFile
from cudatx.txn.running import Holder, InUseReport, Unknown, processes_using
from tests.support import compile_lib
from tests.support.paths import REPO

NOBODY = 65534
# Load the library given as argv[1] the way torch loads its CUDA libraries (dlopen), then wait.
HOLD = (
    "import ctypes, sys, time; ctypes.CDLL(sys.argv[1]); print('ready', flush=True); time.sleep(60)"
)


@pytest.fixture(scope="module")
def built_lib(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return compile_lib(tmp_path_factory.mktemp("running") / "libheld.so")


@pytest.fixture
def lib(built_lib: Path, tmp_path: Path) -> Path:
    """A fresh copy (its own inode) of the library, for tests that link, unlink or replace it."""
    out = tmp_path / "lib" / "libheld.so"
    out.parent.mkdir()
    shutil.copy(built_lib, out)
    return out


@contextmanager
def holding(
    lib: Path | str, prefix: Sequence[str] = (), python: str = sys.executable
) -> Iterator[int]:
    """A real process that has `lib` mapped; killed (and reaped) on the way out."""
    proc = subprocess.Popen(
        [*prefix, python, "-c", HOLD, os.fspath(lib)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd="/",
    )
    try:
        assert proc.stdout is not None
        ready, _, _ = select.select([proc.stdout], [], [], 10)
        line = proc.stdout.readline() if ready else b""
        if line != b"ready\n":
            proc.kill()
            _, err = proc.communicate()
            raise AssertionError(f"holder did not start: {line!r} {err.decode(errors='replace')}")
        yield proc.pid
    finally:
        proc.kill()
        proc.wait()


def me() -> str:
    try:
        return pwd.getpwuid(os.geteuid()).pw_name
    except KeyError:
        return str(os.geteuid())


def holder(report: InUseReport, pid: int) -> Holder:
    [found] = [h for h in report.holders if h.pid == pid]
    return found


def test_holder_of_a_mapped_library(lib: Path) -> None:
    with holding(lib) as pid:
        report = processes_using([str(lib)])
        h = holder(report, pid)
        assert h.user == me()
        assert "ctypes" in h.command and h.command.endswith(str(lib))
        assert h.files == (str(lib),)
        # Only this process maps a library compiled a moment ago.
        assert [x.pid for x in report.holders] == [pid]
        assert pid not in [u.pid for u in report.unknown]


def test_only_the_mapped_paths_are_listed(lib: Path, tmp_path: Path) -> None:
    other = tmp_path / "libother.so"
    shutil.copy(lib, other)
    with holding(lib) as pid:
        report = processes_using([str(other), str(lib), str(tmp_path / "missing.so")])
        assert holder(report, pid).files == (str(lib),)


def test_through_a_symlinked_folder(lib: Path, tmp_path: Path) -> None:
    # Like `lib64 -> lib`: the kernel names the mapping by the real folder only.
    (tmp_path / "lib64").symlink_to("lib")
    via_link = str(tmp_path / "lib64" / "libheld.so")
    with holding(via_link) as pid:
        assert holder(processes_using([via_link]), pid).files == (via_link,)
        assert holder(processes_using([str(lib)]), pid).files == (str(lib),)
        dotted = str(tmp_path / "lib64" / ".." / "lib" / "libheld.so")
        assert holder(processes_using([dotted]), pid).files == (dotted,)


def test_through_a_hard_link_by_identity(lib: Path, tmp_path: Path) -> None:
    # Another name for the same inode: no pathname in maps says it, only (dev, inode) does.
    other = tmp_path / "elsewhere.so"
    os.link(lib, other)
    with holding(lib) as pid:
        report = processes_using([str(other)])
        assert holder(report, pid).files == (str(other),)


def test_a_symlink_itself_is_not_held(lib: Path, tmp_path: Path) -> None:
    # Removing or replacing a link leaves the file it points to, and its mappings, alone.
    link = tmp_path / "libheld.so.1"
    link.symlink_to(lib)
    with holding(lib) as pid:
        assert pid not in [h.pid for h in processes_using([str(link)]).holders]


def test_a_file_nobody_maps(lib: Path) -> None:
    report = processes_using([str(lib)])
    assert report.holders == ()
    assert report == InUseReport(holders=(), unknown=report.unknown)


def test_nothing_asked_scans_nothing(tmp_path: Path) -> None:
    assert processes_using([]) == InUseReport()
    assert processes_using([str(tmp_path / "missing.so")]) == InUseReport()


def test_after_the_holder_is_killed(lib: Path) -> None:
    with holding(lib) as pid:
        assert holder(processes_using([str(lib)]), pid)
    report = processes_using([str(lib)])
    assert report.holders == ()
    assert pid not in [u.pid for u in report.unknown]


def test_exclude_pids(lib: Path) -> None:
    with holding(lib) as pid:
        assert processes_using([str(lib)], exclude_pids=[pid]).holders == ()


def test_the_calling_process_is_never_a_holder(lib: Path) -> None:
    import ctypes

    ctypes.CDLL(str(lib))  # stays mapped in this test process: harmless, it is a temp copy
    assert os.getpid() not in [h.pid for h in processes_using([str(lib)]).holders]


def test_deleted_after_mapping_is_skipped(lib: Path) -> None:
    # Nothing is left at the path to delete or overwrite; the process keeps its (deleted) copy.
    with holding(lib) as pid:
        lib.unlink()
        assert any(
            line.endswith(f"{lib} (deleted)")
            for line in Path(f"/proc/{pid}/maps").read_text().splitlines()
        )
        assert processes_using([str(lib)]).holders == ()


def test_replaced_after_mapping_is_not_held(lib: Path, built_lib: Path) -> None:
    # An upgrade already put a new file at the name: maps still shows the old name (deleted),
    # but deleting the new file takes nothing from the process, so the name must not match.
    with holding(lib) as pid:
        lib.unlink()
        shutil.copy(built_lib, lib)
        assert pid not in [h.pid for h in processes_using([str(lib)]).holders]


def test_an_unstatable_path_is_an_error(tmp_path: Path) -> None:
    # Not "missing": it cannot be told whether a file is there, so it cannot be called safe.
    (tmp_path / "loop").symlink_to("loop")
    with pytest.raises(UnreadableFile, match="cannot check whether it is in use"):
        processes_using([str(tmp_path / "loop" / "lib.so")])


# --- Unknown: the scanner run by an unprivileged user, who may not read root's maps ---------

SCAN = """
import sys
sys.path.insert(0, sys.argv[1])
from cudatx.documents import dump_json
from cudatx.txn.running import processes_using
print(dump_json(processes_using(sys.argv[2:])))
"""


def _modules_to_copy() -> list[str]:
    """Files and package folders outside the standard library that cudatx.txn.running imports,
    and pydantic's, which writes its report (cudatx.documents)."""
    probe = textwrap.dedent(
        """
        import json, os, site, sys
        sys.path.insert(0, sys.argv[1])
        import cudatx.txn.running
        import cudatx.txn.apply  # the check an apply makes (its note and its warning)
        import pydantic
        pydantic.TypeAdapter(cudatx.txn.running.InUseReport)
        sites = tuple(os.path.realpath(p) + os.sep for p in site.getsitepackages())
        out = set()
        for name, mod in list(sys.modules.items()):
            f = getattr(mod, "__file__", None)
            if "." in name or not f or not os.path.realpath(f).startswith(sites):
                continue
            out.add(os.path.dirname(f) if f.endswith("__init__.py") else f)
        print(json.dumps(sorted(out)))
        """
    )
    out = subprocess.run(
        [sys.executable, "-I", "-c", probe, str(REPO)], check=True, capture_output=True, text=True
    ).stdout
    return list(json.loads(out))


# An interpreter whose own files `uid` cannot see may still start (here pyenv's one under /root
# does, then falls back to another prefix's standard library): only accept one it can stat.
PROBE_VERSION = (
    "import os, sys; "
    "print('%d.%d' % sys.version_info[:2] if os.path.exists(sys.executable) else 'hidden')"
)


def _python_for(uid: int, setpriv: list[str]) -> str | None:
    """An interpreter of this Python version that `uid` can run (pyenv's lives under /root)."""
    version = f"{sys.version_info[0]}.{sys.version_info[1]}"
    candidates = [sys.executable, os.path.realpath(sys.executable)]
    candidates += [p for p in (shutil.which(f"python{version}"), f"/usr/bin/python{version}") if p]
    for python in dict.fromkeys(candidates):
        run = subprocess.run(
            [*setpriv, python, "-I", "-c", PROBE_VERSION],
            capture_output=True,
            text=True,
            cwd="/",
        )
        if run.returncode == 0 and run.stdout.strip() == version:
            return python
    return None


def _scanner_site(shared: Path) -> Path:
    """cudatx and what it imports, where an unprivileged scanner can import them."""
    site = shared / "site"
    site.mkdir()
    shutil.copytree(REPO / "cudatx", site / "cudatx", ignore=shutil.ignore_patterns("__pycache__"))
    for path in _modules_to_copy():
        if os.path.isdir(path):
            shutil.copytree(path, site / os.path.basename(path))
        else:
            shutil.copy(path, site)
    return site


def test_unreadable_maps_are_unknown(built_lib: Path) -> None:
    setpriv_bin = shutil.which("setpriv")
    if os.geteuid() != 0 or setpriv_bin is None:
        pytest.skip("needs root and setpriv to run the scanner as an unprivileged user")
    setpriv = [setpriv_bin, f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]
    python = _python_for(NOBODY, setpriv)
    if python is None:
        pytest.skip(
            f"no python{sys.version_info[0]}.{sys.version_info[1]} that uid {NOBODY} can run"
        )
    # pytest's tmp_path is private to root: nobody needs a folder it can reach.
    shared = Path(tempfile.mkdtemp(prefix="cudatx-running-"))
    try:
        shared.chmod(0o755)
        site = _scanner_site(shared)
        lib = shared / "libheld.so"
        shutil.copy(built_lib, lib)
        with holding(lib) as root_pid, holding(lib, setpriv, python) as nobody_pid:
            started = time.monotonic()
            run = subprocess.run(
                [*setpriv, python, "-I", "-c", SCAN, str(site), str(lib)],
                capture_output=True,
                text=True,
                cwd="/",
                timeout=30,
            )
            assert run.returncode == 0, run.stderr
            assert time.monotonic() - started < 10
        report = load_json(InUseReport, run.stdout)
    finally:
        shutil.rmtree(shared)

    nobody = holder(report, nobody_pid)
    try:
        nobody_name = pwd.getpwuid(NOBODY).pw_name
    except KeyError:
        nobody_name = str(NOBODY)
    assert nobody.user == nobody_name
    assert nobody.files == (str(lib),)
    assert root_pid not in [h.pid for h in report.holders]
    [unknown] = [u for u in report.unknown if u.pid == root_pid]
    assert isinstance(unknown, Unknown)
    assert unknown.user == pwd.getpwuid(0).pw_name
    assert unknown.command is not None and "ctypes" in unknown.command
    assert unknown.reason == "permission denied"


# --- Unknown, and unable to open the files: a note, not a warning (issue 34 item 5) -------

OTHER = 12345  # a uid of no one: the scanner (nobody) cannot read its processes' maps
# Tries to open each path given, says which it could, then waits: the judge of "cannot open".
TRY_OPEN = """
import json, os, sys, time
def opens(path):
    try:
        os.close(os.open(path, os.O_RDONLY))
        return True
    except OSError:
        return False
print(json.dumps([opens(p) for p in sys.argv[1:]]), flush=True)
time.sleep(60)
"""
# The same in a container of its own: a mount namespace whose root is a fresh tmpfs (argv[1]),
# as uid OTHER.
JAILED = (
    """
import ctypes, json, os, sys, time
libc = ctypes.CDLL(None, use_errno=True)
assert libc.unshare(0x20000) == 0  # CLONE_NEWNS
assert libc.mount(None, b"/", None, 16384 | (1 << 18), None) == 0  # MS_REC | MS_PRIVATE
assert libc.mount(b"jail", sys.argv[1].encode(), b"tmpfs", 0, None) == 0
os.chroot(sys.argv[1])
os.chdir("/")
os.setgid(OTHER)
os.setuid(OTHER)
""".replace("OTHER", str(OTHER))
    + TRY_OPEN.replace("sys.argv[1:]", "sys.argv[2:]")
)


# The check an apply makes before it changes anything (cudatx.txn.apply._check_running):
# what it says as a note and as a warning, for the files given.
CHECK = """
import json, sys
sys.path.insert(0, sys.argv[1])
from cudatx.txn.apply import ApplyOptions, _check_running
notes, warnings = [], []
_check_running(sys.argv[2:], ApplyOptions(warn=warnings.append, remark=notes.append))
print(json.dumps([notes, warnings]))
"""


@contextmanager
def _started(argv: list[str]) -> Iterator[tuple[int, list[bool]]]:
    """A process that said which files it can open (its pid and that), killed at the end."""
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd="/")
    try:
        assert proc.stdout is not None
        ready, _, _ = select.select([proc.stdout], [], [], 10)
        line = proc.stdout.readline() if ready else b""
        if not line:
            proc.kill()
            raise AssertionError(proc.communicate()[1].decode(errors="replace"))
        yield proc.pid, json.loads(line)
    finally:
        proc.kill()
        proc.wait()


def test_an_unreadable_process_that_cannot_open_the_files_is_told_apart(built_lib: Path) -> None:
    setpriv_bin = shutil.which("setpriv")
    if os.geteuid() != 0 or setpriv_bin is None:
        pytest.skip("needs root and setpriv to run processes as other users")
    as_nobody = [setpriv_bin, f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]
    as_other = [setpriv_bin, f"--reuid={OTHER}", f"--regid={OTHER}", "--clear-groups"]
    python, other_python = _python_for(NOBODY, as_nobody), _python_for(OTHER, as_other)
    if python is None or other_python is None:
        pytest.skip("no interpreter of this version that nobody and uid 12345 can run")
    shared = Path(tempfile.mkdtemp(prefix="cudatx-reach-"))
    try:
        shared.chmod(0o755)
        site = _scanner_site(shared)
        # An environment only nobody (who runs cudatx) can read, and one anyone can.
        closed, opened = shared / "closed", shared / "open"
        for folder, mode in ((closed, 0o700), (opened, 0o755)):
            folder.mkdir()
            shutil.copy(built_lib, folder / "libheld.so")
            for path in (folder, folder / "libheld.so"):
                os.chown(path, NOBODY, NOBODY)
            folder.chmod(mode)
        libs = [str(closed / "libheld.so"), str(opened / "libheld.so")]
        (shared / "jail").mkdir()
        jailed_argv = [sys.executable, "-c", JAILED, str(shared / "jail"), *libs]
        with (
            holding(libs[0]) as root_pid,
            _started([*as_other, other_python, "-c", TRY_OPEN, *libs]) as (other_pid, other),
            _started(jailed_argv) as (jailed_pid, jailed),
        ):
            reports = []
            for lib in libs:
                scan = subprocess.run(
                    [*as_nobody, python, "-I", "-c", SCAN, str(site), lib],
                    capture_output=True,
                    text=True,
                    cwd="/",
                    timeout=30,
                )
                assert scan.returncode == 0, scan.stderr
                reports.append(load_json(InUseReport, scan.stdout))
            check = subprocess.run(
                [*as_nobody, python, "-I", "-c", CHECK, str(site), libs[0]],
                capture_output=True,
                text=True,
                cwd="/",
                timeout=30,
            )
            assert check.returncode == 0, check.stderr
            checked = json.loads(check.stdout)
    finally:
        shutil.rmtree(shared)

    # The judge: what each process could really open. Root maps the closed one.
    assert other == [False, True] and jailed == [False, False]
    for report, at in zip(reports, range(2), strict=True):
        found = {u.pid: u for u in report.unknown}
        assert found[root_pid].cannot_open is None  # root may open anything
        assert (found[other_pid].cannot_open is None) == other[at], found[other_pid]
        assert found[jailed_pid].cannot_open == "its mounts do not hold these files"
    # The apply's check, as nobody: the jailed and the closed-out process in one note; root's
    # (and the machine's other root processes) in the warning: they may map the file.
    notes, warnings = checked
    assert len(notes) == 1 and len(warnings) == 1, checked
    assert f"pid {other_pid} (" in notes[0] and f"pid {jailed_pid} (" in notes[0], notes
    assert "cannot open the files this change takes away either" in notes[0]
    assert f"pid {root_pid} (" not in notes[0]
    assert warnings[0].startswith("could not check "), warnings
    said = reports[0].unknown
    [closed_said] = [u.cannot_open for u in said if u.pid == other_pid]
    assert closed_said == f"uid {OTHER} cannot search {closed} (mode 0700)"
