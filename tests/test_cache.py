"""The scan cache (cudatx/cache.py): what it keeps, when it lets go, and that it can never
make an answer wrong or a command fail.

Real libraries compiled here, real wheels installed by real uv; each test has its own cache
folder. Tests that call the core in-process set RACY_NS to 0 so that files written a moment
ago are kept (the CLI tests wait instead).
"""

from __future__ import annotations

import io
import json
import os
import sqlite3
import stat
import subprocess
import time
from pathlib import Path

import pytest

from cudatx import cache as cache_module
from cudatx.analysis import ownership
from cudatx.cache import DATABASE, cache_folder, open_cache
from cudatx.discover.target import start_query
from cudatx.environment import Environment
from cudatx.models import Distribution
from cudatx.progress import Bar, wanted
from cudatx.scan import scan
from tests.support import (
    build_wheel,
    compile_lib,
    make_venv,
    site_packages,
    uv_install,
)
from tests.support.cli import cudatx, start_cudatx
from tests.support.ext_world import ExtWorld, build_ext_world

DEP = "libcachedep.so.1"
OLD = "libolddep.so.1"  # a DT_NEEDED name nothing provides; rewritten to NEW in place
NEW = "libnewdep.so.1"


def _build(root: Path) -> ExtWorld:
    return build_ext_world(
        root, dist="cache-fixture", package="cachefix", lib=DEP, extra_needed_names=[OLD]
    )


@pytest.fixture
def env(tmp_path: Path) -> ExtWorld:
    return _build(tmp_path)


@pytest.fixture
def settled_now(monkeypatch: pytest.MonkeyPatch) -> None:
    """Keep files however new they are (in-process tests only)."""
    monkeypatch.setattr(cache_module, "RACY_NS", 0)


def _scan(env: ExtWorld, folder: Path) -> tuple[Environment, int, int]:
    """One in-process scan with the cache in `folder`: the environment, hits, misses."""
    cache = open_cache({"CUDATX_CACHE_DIR": str(folder)})
    assert cache is not None
    try:
        found = scan(start_query(str(env.venv)), ld_library_path=None, cwd=env.work, cache=cache)
    finally:
        hits, misses = cache.hits, cache.misses
        cache.close()
    return found, hits, misses


def _needs(found: Environment, path: Path) -> tuple[str, ...]:
    info = found.view.probe(str(path)).info
    assert info is not None
    return info.needed


def _rows(folder: Path) -> int:
    with sqlite3.connect(folder / DATABASE) as db:
        assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        count: int = db.execute("SELECT count(*) FROM entries").fetchone()[0]
        return count


def _rewrite_in_place(path: Path, data: bytes, *, keep_mtime: bool) -> None:
    """Write `data` into the same inode, as `cp` over an existing file does."""
    before = os.stat(path)
    with open(path, "r+b") as stream:
        stream.truncate(0)
        stream.write(data)
    if keep_mtime:  # as `cp -p` or `rsync -t` leave it
        os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = os.stat(path)
    assert after.st_ino == before.st_ino


# -- what is kept, and when it is read again --------------------------------------------


def test_warm_scan_reads_from_the_cache(env: ExtWorld, tmp_path: Path, settled_now: None) -> None:
    folder = tmp_path / "cache"
    cold, hits, _ = _scan(env, folder)
    assert hits == 0 and _rows(folder) > 0
    warm, hits, misses = _scan(env, folder)
    assert hits > 0 and misses == 0
    assert warm.loads == cold.loads and warm.distributions == cold.distributions
    assert warm.roots == cold.roots and warm.findings == cold.findings


def test_a_plans_lost_files_check_is_kept_until_a_folder_of_its_code_changes(
    env: ExtWorld, tmp_path: Path, settled_now: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ownership.losing_code: a distribution's answer is kept while its RECORD and the
    folders of its modules and libraries keep their state; a library deleted since is
    seen (its folder's entries changed), and nothing is stat'ed for a kept answer."""
    looked: list[str] = []
    look = ownership._look

    def counted(dist: Distribution) -> tuple[object, bool]:
        looked.extend(ownership._code_paths(dist))
        return look(dist)

    monkeypatch.setattr(ownership, "_look", counted)

    def losing(folder: Path) -> tuple[str, ...]:
        cache = open_cache({"CUDATX_CACHE_DIR": str(folder)})
        assert cache is not None
        try:
            found = scan(
                start_query(str(env.venv)), ld_library_path=None, cwd=env.work, cache=cache
            )
            return ownership.losing_code(found)
        finally:
            cache.close()

    folder = tmp_path / "cache"
    assert losing(folder) == ()
    assert str(env.lib) in looked and str(env.ext) in looked
    looked.clear()
    assert losing(folder) == () and looked == []  # kept
    env.lib.unlink()
    assert losing(folder) == ("cache-fixture",)
    assert str(env.lib) in looked
    looked.clear()
    assert losing(folder) == ("cache-fixture",) and looked == []  # the loss is kept too


def test_library_rewritten_in_place_with_a_new_needed_is_seen(
    env: ExtWorld, tmp_path: Path, settled_now: None
) -> None:
    folder = tmp_path / "cache"
    before, _, _ = _scan(env, folder)
    assert OLD in _needs(before, env.lib)
    # A library built anew: another size and mtime.
    rebuilt = compile_lib(tmp_path / "again" / DEP, soname=DEP, extra_needed_names=[NEW, OLD])
    _rewrite_in_place(env.lib, rebuilt.read_bytes(), keep_mtime=False)
    after, _, _ = _scan(env, folder)
    assert NEW in _needs(after, env.lib)
    assert any(r.name == NEW for r in after.resolutions())


def test_same_size_and_mtime_rewrite_is_seen(
    env: ExtWorld, tmp_path: Path, settled_now: None
) -> None:
    """The edge the ctime is in the key for: same inode, same size, mtime put back."""
    folder = tmp_path / "cache"
    before, _, _ = _scan(env, folder)
    assert OLD in _needs(before, env.lib) and NEW not in _needs(before, env.lib)
    old = os.stat(env.lib)
    data = env.lib.read_bytes()
    assert data.count(OLD.encode()) >= 1 and len(OLD) == len(NEW)
    _rewrite_in_place(env.lib, data.replace(OLD.encode(), NEW.encode()), keep_mtime=True)
    new = os.stat(env.lib)
    assert (new.st_size, new.st_mtime_ns) == (old.st_size, old.st_mtime_ns)
    after, _, _ = _scan(env, folder)
    assert NEW in _needs(after, env.lib) and OLD not in _needs(after, env.lib)


def test_a_file_written_just_now_is_not_kept(env: ExtWorld, tmp_path: Path) -> None:
    """Racily new files (ctime younger than RACY_NS) are read, never stored."""
    folder = tmp_path / "cache"
    _rewrite_in_place(env.lib, env.lib.read_bytes(), keep_mtime=False)
    _scan(env, folder)
    with sqlite3.connect(folder / DATABASE) as db:
        keys = {k for (k,) in db.execute("SELECT key FROM entries WHERE kind = 'elf'")}
    st = os.stat(env.lib)
    assert f"{st.st_dev}:{st.st_ino}" not in keys


def test_dist_info_changed_is_read_again(env: ExtWorld, tmp_path: Path, settled_now: None) -> None:
    folder = tmp_path / "cache"
    _scan(env, folder)
    (meta,) = site_packages(env.venv).glob("cache_fixture-1.0.dist-info")
    metadata = meta / "METADATA"
    metadata.write_text(metadata.read_text().replace("Version: 1.0", "Version: 1.0.post1"))
    after, _, _ = _scan(env, folder)
    dist = after.distribution("cache-fixture")
    assert dist is not None and dist.version == "1.0.post1"


@pytest.mark.parametrize(
    ("name", "value"),
    [("__version__", "999"), ("source_crc", lambda package: 12345)],
    ids=["another version", "another fingerprint of the sources"],
)
def test_another_version_or_fingerprint_empties_the_cache(
    env: ExtWorld,
    tmp_path: Path,
    settled_now: None,
    monkeypatch: pytest.MonkeyPatch,
    name: str,
    value: object,
) -> None:
    folder = tmp_path / "cache"
    _scan(env, folder)
    assert _rows(folder) > 0
    cache_module._fingerprint.cache_clear()
    monkeypatch.setattr(cache_module, name, value)
    try:
        opened = open_cache({"CUDATX_CACHE_DIR": str(folder)})
        assert opened is not None
        opened.close()
        assert _rows(folder) == 0
    finally:
        cache_module._fingerprint.cache_clear()


def _package_copy(tmp_path: Path) -> Path:
    import shutil

    copy = tmp_path / "cudatx"
    shutil.copytree(Path(cache_module.__file__).parent, copy)
    return copy


@pytest.mark.parametrize(
    "module",
    # Among them the ones the hand-kept list omitted, and one nobody would think of listing.
    ["discover/owners/conda.py", "discover/frameworks/__init__.py", "analysis/ownership.py",
     "codec.py", "elf/symtab.py", "data/loadlists.json", "render/plan.py"],
)  # fmt: skip
def test_editing_any_module_changes_the_fingerprint(tmp_path: Path, module: str) -> None:
    """The fingerprint is derived from every module's bytes, not from a list: a fix in any
    module makes the cache forget what the old code read."""
    package = _package_copy(tmp_path)
    before = cache_module.source_crc(package)
    assert cache_module.source_crc(package) == before  # stable: a walk in sorted order
    path = package / module
    path.write_bytes(path.read_bytes() + b"\n")
    assert cache_module.source_crc(package) != before


def test_a_new_module_changes_the_fingerprint(tmp_path: Path) -> None:
    package = _package_copy(tmp_path)
    before = cache_module.source_crc(package)
    (package / "discover" / "newreader.py").write_text("")
    assert cache_module.source_crc(package) != before


def test_a_failure_of_the_reading_code_is_never_kept_as_a_fact(
    env: ExtWorld, tmp_path: Path, settled_now: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An exception no check of ours names (here: a fault injected into the header reader)
    is reported for this run only; the next run, the fault gone, reads the file right."""
    from cudatx.elf import reader

    real = reader._read_header

    def faulty(path: str, stream: io.BufferedReader) -> object:
        if path == str(env.lib):
            raise KeyError("a bug of the reading code")
        return real(path, stream)

    folder = tmp_path / "cache"
    monkeypatch.setattr(reader, "_read_header", faulty)
    bad, _, _ = _scan(env, folder)
    assert bad.view.probe(str(env.lib)).info is None  # this run: the file is unreadable
    monkeypatch.setattr(reader, "_read_header", real)
    good, _, _ = _scan(env, folder)
    assert OLD in _needs(good, env.lib)
    with sqlite3.connect(folder / DATABASE) as db:
        rows = db.execute("SELECT value FROM entries WHERE value LIKE '%bug of%'").fetchall()
    assert rows == []


def test_a_missing_module_of_cudatx_is_an_error_not_a_malformed_file(
    env: ExtWorld, tmp_path: Path, settled_now: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """pyelftools missing used to read as "malformed ELF: No module named 'elftools'" for every
    library, and was cached so; it is cudatx's install that is broken, and it says so."""
    from cudatx.elf import reader

    def missing(path: str, stream: io.BufferedReader) -> object:
        raise ModuleNotFoundError("No module named 'elftools'")

    monkeypatch.setattr(reader, "_read_header", missing)
    with pytest.raises(ImportError):
        _scan(env, tmp_path / "cache")


# -- a damaged cache is rebuilt, never trusted -------------------------------------------


def _damage_truncate(path: Path) -> None:
    size = path.stat().st_size
    with open(path, "r+b") as stream:
        stream.truncate(size // 2)


def _damage_garbage(path: Path) -> None:
    path.write_bytes(os.urandom(4096) * 4)


def _damage_row(path: Path) -> None:
    with sqlite3.connect(path) as db:
        db.execute("UPDATE entries SET value = '{\"info\": null}' WHERE kind = 'elf'")


@pytest.mark.parametrize("damage", [_damage_truncate, _damage_garbage, _damage_row])
def test_damaged_cache_is_rebuilt(
    env: ExtWorld, tmp_path: Path, settled_now: None, damage: object
) -> None:
    folder = tmp_path / "cache"
    truth, _, _ = _scan(env, folder)
    assert callable(damage)
    damage(folder / DATABASE)
    again, hits, _ = _scan(env, folder)
    assert again.loads == truth.loads and again.distributions == truth.distributions
    # Rebuilt: a sound database with every entry again, and the next run reads from it.
    _scan(env, folder)
    assert _rows(folder) > 0
    _, hits, misses = _scan(env, folder)
    assert hits > 0 and misses == 0


def test_unusable_cache_folder_means_no_cache(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    link = tmp_path / "link"
    link.symlink_to(elsewhere)
    assert open_cache({"CUDATX_CACHE_DIR": str(link)}) is None
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    assert open_cache({"CUDATX_CACHE_DIR": str(shared)}) is None
    blocked = tmp_path / "file"
    blocked.write_text("")
    assert open_cache({"CUDATX_CACHE_DIR": str(blocked)}) is None
    assert os.listdir(elsewhere) == [] and os.listdir(shared) == []


def test_cache_folder_is_created_private(tmp_path: Path) -> None:
    folder = tmp_path / "a" / "cudatx"
    opened = open_cache({"CUDATX_CACHE_DIR": str(folder)})
    assert opened is not None
    opened.close()
    assert stat.S_IMODE(os.stat(folder).st_mode) == 0o700


def test_cache_folder_resolution(tmp_path: Path) -> None:
    home = str(tmp_path / "home")
    assert cache_folder({"HOME": home}) == Path(home, ".cache", "cudatx")
    assert cache_folder({"HOME": home, "XDG_CACHE_HOME": "/x/cache"}) == Path("/x/cache/cudatx")
    # A relative XDG_CACHE_HOME is invalid (XDG Base Directory spec): ignored.
    assert cache_folder({"HOME": home, "XDG_CACHE_HOME": "rel"}) == Path(home, ".cache", "cudatx")
    both = {"HOME": home, "XDG_CACHE_HOME": "/x/cache", "CUDATX_CACHE_DIR": "/y/c"}
    assert cache_folder(both) == Path("/y/c")


def test_the_suite_never_uses_the_users_cache() -> None:
    assert cache_folder() != Path.home() / ".cache" / "cudatx"


# -- the command line --------------------------------------------------------------------


def _run(env: ExtWorld, *args: str) -> subprocess.CompletedProcess[str]:
    return cudatx(*args, "--python", env.venv, cwd=env.work)


def test_cli_warm_run_answers_as_cold_and_sees_a_rewrite(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = _build(tmp_path)
    time.sleep(cache_module.RACY_NS / 1e9 + 0.1)  # let the files settle, so they are kept
    folder = tmp_path / "cache"
    monkeypatch.setenv("CUDATX_CACHE_DIR", str(folder))
    cold = _run(env, "graph", "--no-cache")
    assert cold.returncode == 0, cold.stderr
    assert not folder.exists()  # --no-cache neither reads nor writes it
    first = _run(env, "graph")
    assert first.stdout == cold.stdout and _rows(folder) > 0
    warm = _run(env, "graph")
    assert warm.stdout == cold.stdout
    data = env.lib.read_bytes()
    _rewrite_in_place(env.lib, data.replace(OLD.encode(), NEW.encode()), keep_mtime=True)
    after = _run(env, "graph")
    assert NEW in after.stdout and NEW not in cold.stdout


def test_cli_processes_at_once_share_the_cache(env: ExtWorld, tmp_path: Path) -> None:
    folder = tmp_path / "cache"
    hide = ("VIRTUAL_ENV", "CONDA_PREFIX")
    environ = {"CUDATX_CACHE_DIR": str(folder)}
    argv = ("graph", "--python", env.venv)
    for _ in range(2):  # a cold start, then warm ones
        runs = [
            start_cudatx(*argv, cwd=env.work, hide=hide, env=environ, text=False) for _ in range(4)
        ]
        outputs = [run.communicate(timeout=120) for run in runs]
        assert all(run.returncode == 0 for run in runs), [err for _, err in outputs]
        assert len({out for out, _ in outputs}) == 1
        assert not any(b"error" in err for _, err in outputs)
    with sqlite3.connect(folder / DATABASE) as db:
        assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)


def test_cli_cache_cannot_fail_a_command(
    env: ExtWorld, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "cache"
    monkeypatch.setenv("CUDATX_CACHE_DIR", str(folder))
    truth = _run(env, "graph", "--no-cache")
    folder.mkdir(mode=0o700)
    (folder / DATABASE).mkdir()  # not a file at all, and cudatx may not remove it
    done = _run(env, "graph")
    assert done.returncode == 0 and done.stdout == truth.stdout, done.stderr


# -- progress ------------------------------------------------------------------------------


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_only_on_a_terminal() -> None:
    assert wanted(_Tty(), {}, disabled=False)
    assert not wanted(io.StringIO(), {}, disabled=False)
    assert not wanted(_Tty(), {}, disabled=True)  # --no-progress
    assert not wanted(_Tty(), {"TERM": "dumb"}, disabled=False)


def test_progress_waits_draws_and_clears(monkeypatch: pytest.MonkeyPatch) -> None:
    stream = _Tty()
    bar = Bar(stream, colour=False)
    bar("reading libraries", 1, 10)
    assert stream.getvalue() == ""  # not before half a second
    monkeypatch.setattr("cudatx.progress.DELAY_S", 0.0)
    bar = Bar(stream, colour=False)
    bar("reading libraries", 5, 10)
    drawn = stream.getvalue()
    assert "reading libraries" in drawn and "5/10" in drawn and "\x1b" not in drawn
    bar.finish()
    assert stream.getvalue().endswith("\r") and stream.getvalue().count("\r") == 3
    coloured = _Tty()
    bar = Bar(coloured, colour=True)
    bar("replaying imports", 1, 2)
    assert "\x1b[" in coloured.getvalue()  # NO_COLOR unset: colour


def test_progress_never_reaches_a_pipe_or_json(env: ExtWorld, tmp_path: Path) -> None:
    done = cudatx("doctor", "--json", "--no-cache", "--python", env.venv, cwd=env.work)
    assert done.returncode in (0, 1), done.stderr
    json.loads(done.stdout)
    assert "\r" not in done.stderr and "cudatx: reading" not in done.stderr


def test_progress_on_a_terminal_stays_off_stdout(env: ExtWorld) -> None:
    """stderr a terminal (a pty), stdout a pipe: the JSON is whole whatever stderr shows."""
    import pty

    leader, follower = pty.openpty()
    try:
        done = cudatx(
            "graph",
            "--format",
            "json",
            "--no-cache",
            "--python",
            env.venv,
            cwd=env.work,
            hide=("VIRTUAL_ENV", "CONDA_PREFIX", "TERM"),
            stderr=follower,
            text=False,
        )
    finally:
        os.close(follower)
        os.close(leader)
    assert done.returncode == 0
    json.loads(done.stdout)


def test_a_warm_plan_reports_requirements_as_a_cold_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The unmet Requires-Dist of the installed set are kept in the cache: a warm plan must
    still say which removal breaks which, and what was unmet already."""

    folder = tmp_path / "wheels"
    wheels = [
        build_wheel(folder, "base", "1.0", {"base.py": b""}),
        build_wheel(folder, "user", "1.0", {"user.py": b""}, requires=["base"]),
        build_wheel(folder, "needer", "1.0", {"needer.py": b""}, requires=["base>=2"]),
    ]
    venv = make_venv(tmp_path / "venv")
    uv_install(venv, wheels)
    monkeypatch.setenv("CUDATX_CACHE_DIR", str(tmp_path / "cache"))

    def plan(*extra: str) -> dict[str, object]:
        done = cudatx(
            "remove", "base", "--dry-run", "--json", "--python", venv, *extra, cwd=tmp_path
        )
        assert done.returncode == 1, done.stderr
        data: dict[str, object] = json.loads(done.stdout)
        return data

    cold, first, warm = plan("--no-cache"), plan(), plan()
    assert cold == first == warm
    assert cold["requirements_broken"] == [{"dist": "user", "requirement": "base"}]
    assert "needer 1.0 requires base>=2, which is installed at 1.0" in json.dumps(
        cold["preexisting"]
    )
