"""The README's quick start, run as printed on the demo environment.

Each line of the block between `<!-- quickstart -->` markers runs in a fresh folder, in
order, with `cudatx` being this checkout's; a line's `# exit N` comment is the exit code it
must have (else 0). A README whose quick start does not work fails here, not for a user.

It runs twice: with the module's empty uv cache, and with a cache that already holds other
builds of the demo's wheels (same names, same versions, other bytes), fetched from uv's
default index, as a machine that has installed torch 2.8 holds the registry's
nvidia-cudnn-cu12 9.10.2.21. The demo's wheels must not be mistaken for those.
"""

from __future__ import annotations

import hashlib
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

from cudatx.demo.build import COOWNED_PATHS, DEMO_WHEELS
from tests.support import build_wheel, site_packages, uv_bin
from tests.support.http_index import serve_index
from tests.support.paths import REPO

_BLOCK = re.compile(r"<!-- quickstart -->\n```sh\n(.*?)```\n<!-- /quickstart -->", re.S)
# The registry's NVIDIA wheels are manylinux wheels; the demo's are py3-none-any. Of two
# wheels of one name==version uv picks the one with the more specific tag, which is how the
# registry's build won over the demo's before the demo's versions carried a label of their own.
_REGISTRY_TAG = "py3-none-manylinux_2_17_x86_64"


def quick_start() -> list[str]:
    found = _BLOCK.search((REPO / "README.md").read_text())
    assert found is not None, "README.md has no quick start block"
    return [line for line in found.group(1).splitlines() if line.strip()]


def _tree(site: Path) -> dict[str, str]:
    """Every file of the site folder by its sha256 (bytecode aside: imports write it)."""
    return {
        os.fspath(p.relative_to(site)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(site.rglob("*"))
        if p.is_file() and "__pycache__" not in p.parts
    }


def run_quick_start(cwd: Path, env: Mapping[str, str] | None = None) -> None:
    """Each line as printed, in `cwd`: it exits as its comment says (else 0). The rollback's
    line must leave the site folder as the demo built it, byte for byte."""
    lines = quick_start()
    assert len(lines) <= 6, "a quick start of at most five or six commands"
    built: dict[str, str] = {}
    for line in lines:
        command, _, comment = line.partition("#")
        expected = re.search(r"\bexit (\d+)", comment)
        argv = shlex.split(command)
        assert argv[0] == "cudatx", line
        done = subprocess.run(
            [sys.executable, "-m", "cudatx", *argv[1:]],
            cwd=cwd,
            capture_output=True,
            text=True,
            check=False,
            timeout=600,
            env=None if env is None else dict(env),
        )
        want = int(expected.group(1)) if expected else 0
        assert done.returncode == want, f"{line}\n{done.stdout}\n{done.stderr}"
        site = site_packages(cwd / "cudatx-demo" / "venv")
        if argv[1] == "demo":
            built = _tree(site)
        elif argv[1] == "rollback":
            assert _tree(site) == built, f"{line} left other bytes than the demo built"


def test_the_quick_start_runs_as_printed(tmp_path: Path) -> None:
    run_quick_start(tmp_path)


def _registry_builds(folder: Path) -> list[str]:
    """Wheels of the demo's names at the versions the demo stands in for, as an index would
    serve them (manylinux), with other bytes at the demo's paths; their specs."""
    specs = []
    for wheel in DEMO_WHEELS:
        files: dict[str, bytes | Path] = {
            f"registry_{wheel.name.replace('-', '_')}/__init__.py": b"# the registry's build\n"
        }
        if wheel.name.startswith("nvidia-cudnn-"):
            files.update({path: b"the registry's bytes\n" for path in COOWNED_PATHS})
        build_wheel(folder, wheel.name, wheel.version, files, tag=_REGISTRY_TAG)
        specs.append(f"{wheel.name}=={wheel.version}")
    return specs


def test_the_quick_start_runs_where_uvs_cache_holds_other_builds(tmp_path: Path) -> None:
    """uv's cache holds other builds of every demo wheel, at the same name==version, from
    the default index (which the quick start, not naming one, still reads from that cache
    with --offline): the repair must reinstall the demo's own bytes, and every line exit as
    its comment says."""
    index, cache = tmp_path / "index", tmp_path / "uv-cache"
    index.mkdir()
    specs = _registry_builds(index)
    with serve_index(index) as (url, _):
        env = dict(os.environ, UV_CACHE_DIR=os.fspath(cache), UV_DEFAULT_INDEX=url)
        warm = tmp_path / "warm"
        subprocess.run([uv_bin(), "venv", "-q", warm], env=env, check=True)
        install = [uv_bin(), "pip", "install", "-q", "--python", warm, "--no-deps", *specs]
        subprocess.run(install, env=env, check=True, capture_output=True)
        work = tmp_path / "work"
        work.mkdir()
        run_quick_start(work, env)
