"""Every plan says where the bytes of each install and reinstall come from, judged by what
real uv then installs.

Small real wheels: `left` and `right` both ship `shared/__init__.py`, so removing `left`
leaves `right` hollow and `--repair` reinstalls it. Other builds of `right==1.0` (other
bytes in `right_only.py`) sit in another find-links folder or on a local HTTP index, and
each is installed once first, so that uv's cache holds it, as a machine that has seen the
real wheels holds those. Each plan is then applied (cudatx's own `--yes`, the options the
plan was made with) and the bytes installed are compared with the file the plan named.
"""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
import subprocess
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.support import build_wheel, make_venv, site_packages, uv_bin, venv_python
from tests.support.cli import HIDDEN, cudatx
from tests.support.http_index import serve_index

FILE = "right-1.0-py3-none-any.whl"


def _right(folder: Path, build: str, tag: str = "py3-none-any") -> Path:
    files = {
        "shared/__init__.py": b"who = 'right'\n",
        "right_only.py": f"build = {build!r}\n".encode(),
        # moved out of the site folder by the installer (its shebang rewritten)
        "right-1.0.data/scripts/right-tool": b"#!python\nprint('right')\n",
    }
    return build_wheel(folder, "right", "1.0", files, tag=tag)


@dataclass(frozen=True)
class World:
    main: Path  # left and right, the builds the environment was installed from
    root: Path


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> World:
    root = tmp_path_factory.mktemp("sources")
    main = root / "main"
    main.mkdir()
    _right(main, "main")
    build_wheel(main, "left", "1.0", {"shared/__init__.py": b"who = 'left'\n", "left.py": b""})
    build_wheel(main, "newpkg", "0.1", {"newpkg.py": b"x = 1\n"})
    return World(main, root)


def _uv(cache: Path, *args: str | os.PathLike[str]) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("UV_", "PIP_"))}
    env |= {"UV_CACHE_DIR": str(cache), "UV_NO_CONFIG": "1", "UV_LINK_MODE": "copy"}
    subprocess.run([uv_bin(), *map(os.fspath, args)], env=env, check=True, capture_output=True)


def _environment(world: World, tmp: Path, cache: Path) -> Path:
    """right, then left over it, installed by name from the main folder (as from an index:
    no direct URL, so a reinstall is resolved again)."""
    venv = make_venv(tmp / "venv")
    for name in ("right==1.0", "left==1.0"):
        links = ("--offline", "--no-index", "--find-links", world.main)
        _uv(cache, "pip", "install", "--python", venv_python(venv), *links, name)
    return venv


def _warm(cache: Path, tmp: Path, *options: str | os.PathLike[str]) -> None:
    """Install right==1.0 with `options` into a throwaway environment: uv's cache holds
    that build from then on."""
    throwaway = make_venv(tmp / "throwaway")
    _uv(cache, "pip", "install", "--python", venv_python(throwaway), *options, "right==1.0")


def _cudatx(cache: Path, *args: str | os.PathLike[str]) -> subprocess.CompletedProcess[str]:
    env = {"UV_CACHE_DIR": str(cache), "UV_NO_CONFIG": "1", "UV_LINK_MODE": "copy"}
    return cudatx(*args, "--ignore-running", env=env, hide=HIDDEN | {"UV_*", "PIP_*"})


def _repair(
    cache: Path, venv: Path, *options: str | os.PathLike[str]
) -> tuple[str, dict[str, Any]]:
    """The repair plan of removing left, as text and as JSON; then applied."""
    args = ("remove", "left", "--repair", "--python", venv, *options)
    text = _cudatx(cache, *args, "--dry-run")
    assert text.returncode == 0, text.stdout + text.stderr
    as_json = _cudatx(cache, *args, "--dry-run", "--json")
    assert as_json.returncode == 0, as_json.stderr
    plan: dict[str, Any] = json.loads(as_json.stdout)
    done = _cudatx(cache, *args, "--yes")
    assert done.returncode == 0, done.stdout + done.stderr
    return text.stdout, plan


def _record(text: str) -> dict[str, str]:
    """path -> hash of a RECORD, what the installer writes or moves out of the site folder
    (a script, its shebang rewritten) left out."""
    rows = csv.reader(io.StringIO(text))
    aside = (".data/", ".dist-info/")
    return {
        r[0]: r[1]
        for r in rows
        if len(r) > 1 and r[1] and not r[0].startswith("../") and not any(a in r[0] for a in aside)
    }


def _installed_from(venv: Path, wheel: Path) -> bool:
    """Whether right, as installed in `venv`, is exactly what `wheel` holds: every file its
    RECORD lists with the wheel's hash, and right_only.py the wheel's bytes."""
    site = site_packages(venv)
    installed = _record((site / "right-1.0.dist-info" / "RECORD").read_text())
    with zipfile.ZipFile(wheel) as zf:
        listed = _record(zf.read("right-1.0.dist-info/RECORD").decode())
        member = zf.read("right_only.py")
    return listed == installed and (site / "right_only.py").read_bytes() == member


def _reinstalled(plan: dict[str, Any]) -> dict[str, Any]:
    [entry] = plan["reinstall"]
    assert entry["name"] == "right" and entry["version"] == "1.0"
    return entry


def test_a_repair_plan_names_the_wheel_it_reinstalls_from(world: World, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    venv = _environment(world, tmp_path, cache)
    wheel = world.main / FILE
    text, plan = _repair(cache, venv, "--offline", "--find-links", world.main)
    assert f" ~ right==1.0 (from {wheel})" in text.splitlines()
    assert _reinstalled(plan) == {
        "name": "right",
        "version": "1.0",
        "source": str(wheel),
        "source_note": None,
    }
    assert plan["remove"] == [{"name": "left", "version": "1.0"}]  # no source: it leaves
    assert _installed_from(venv, wheel)


@pytest.mark.parametrize("other_first", [True, False])
def test_a_cache_holding_another_build_names_what_uv_installs(
    world: World, tmp_path: Path, other_first: bool
) -> None:
    """Another find-links folder holds another build under the same file name, installed
    once (in the cache). With both folders given, uv lists both files and installs one:
    the plan names the one whose bytes are then installed, whichever the folders' names
    make it; with only the main folder, the main build, whatever the cache holds."""
    cache = tmp_path / "cache"
    other = tmp_path / ("a-other" if other_first else "c-other")
    other.mkdir()
    _right(other, "other")
    _warm(cache, tmp_path, "--offline", "--no-index", "--find-links", other)

    venv = _environment(world, tmp_path, cache)
    _, plan = _repair(cache, venv, "--offline", "--find-links", world.main)
    assert _reinstalled(plan)["source"] == str(world.main / FILE)
    assert _installed_from(venv, world.main / FILE)

    mine = tmp_path / "b-main"  # the main build, in a folder named between the two others'
    mine.mkdir()
    shutil.copy(world.main / FILE, mine)
    venv = _environment(world, tmp_path / "both", cache)
    links = ("--find-links", other, "--find-links", mine)
    text, plan = _repair(cache, venv, "--offline", *links)
    named = Path(_reinstalled(plan)["source"])
    assert named in (mine / FILE, other / FILE)
    assert _installed_from(venv, named), f"the plan named {named}; uv installed another"
    assert any(ln.startswith(f" ~ right==1.0 (from {named}; ") for ln in text.splitlines())


@pytest.mark.parametrize("tag", ["py3-none-any", "py311-none-any"])
def test_an_index_build_in_the_cache(world: World, tmp_path: Path, tag: str) -> None:
    """The quick start's trap: an index's build of the same name==version sits in uv's
    cache, and the plan runs --offline with --find-links but no --no-index. The index's
    build under the same file name, or under a name whose tag the target ranks higher (uv
    then prefers it): the plan names what uv installs."""
    cache = tmp_path / "cache"
    served = tmp_path / "index"
    served.mkdir()
    indexed = _right(served, "index", tag)
    with serve_index(served) as (url, _):
        _warm(cache, tmp_path, "--index-url", url)
    venv = _environment(world, tmp_path, cache)
    options = ("--offline", "--find-links", world.main, "--index-url", url)
    text, plan = _repair(cache, venv, *options)
    entry = _reinstalled(plan)
    # uv prefers the wheel whose tag the target ranks higher, wherever it is
    assert entry["source"].startswith("http://") or tag == "py3-none-any"
    if entry["source"].startswith("http://"):
        assert entry["source"] == f"{url.removesuffix('/simple')}/files/{indexed.name}"
        assert _installed_from(venv, indexed)
    else:
        assert entry["source"] == str(world.main / FILE)
        assert _installed_from(venv, world.main / FILE)
    assert f" ~ right==1.0 (from {entry['source']}" in text


def test_an_install_plan_names_its_wheel(world: World, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    venv = _environment(world, tmp_path, cache)
    args = ("install", "newpkg", "--dry-run", "--python", venv, "--offline")
    args += ("--find-links", world.main)
    wheel = world.main / "newpkg-0.1-py3-none-any.whl"
    text = _cudatx(cache, *args)
    assert text.returncode == 0, text.stderr
    assert f" + newpkg==0.1 (from {wheel})" in text.stdout.splitlines()
    done = _cudatx(cache, *args, "--json")
    assert json.loads(done.stdout)["install"] == [
        {"name": "newpkg", "version": "0.1", "source": str(wheel), "source_note": None}
    ]


def test_a_stale_cache_entry_is_said(world: World, tmp_path: Path) -> None:
    """A find-links wheel rebuilt in place with its old modification time: uv keys a local
    file by its path and mtime, so a plain install takes the build its cache holds (seen
    with uv 0.13.9), while a reinstall (`--reinstall-package`, as the apply runs a repair)
    reads the file again. The install plan names the file and says its RECORD lists other
    bytes than uv staged; the repair plan stages as its apply installs, the rebuilt file."""
    cache = tmp_path / "cache"
    folder = tmp_path / "links"
    folder.mkdir()
    wheel = _right(folder, "first")
    then = os.stat(wheel)
    links = ("--offline", "--find-links", folder)
    _warm(cache, tmp_path, *links)
    _right(folder, "rebuilt")
    os.utime(wheel, ns=(then.st_atime_ns, then.st_mtime_ns))

    fresh = make_venv(tmp_path / "fresh")
    args = ("install", "right==1.0", "--python", fresh, *links)
    dry = _cudatx(cache, *args, "--dry-run", "--json")
    assert dry.returncode == 0, dry.stderr
    [entry] = json.loads(dry.stdout)["install"]
    assert entry["source"] == str(wheel)
    assert "other bytes than this file's RECORD lists" in entry["source_note"]
    assert _cudatx(cache, *args, "--yes").returncode == 0
    assert (site_packages(fresh) / "right_only.py").read_text() == "build = 'first'\n"

    venv = _environment(world, tmp_path, cache)
    text, plan = _repair(cache, venv, *links)
    assert _reinstalled(plan)["source"] == str(wheel)
    assert _reinstalled(plan)["source_note"] is None, text
    assert _installed_from(venv, wheel)
    assert (site_packages(venv) / "right_only.py").read_text() == "build = 'rebuilt'\n"
