"""`cudatx install` and `cudatx sync`: uv's dry run, staged, simulated; applied and rolled back.

The world is design.md section 1 in small (tests/support/cudnn_world.py): a fake CUDA 13
torch whose extension loads libcudnn.so.9 through its RPATH, and cu12/cu13 cuDNN wheels that
install the same paths with other bytes. Every prediction is checked against what real uv
then does and what glibc's loader then maps.
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.support import make_venv, observe_import, site_packages, uv_install, venv_python
from tests.support.cli import cudatx
from tests.support.cudnn_world import (
    CU12,
    CU12_VERSION,
    CU13,
    CUDNN,
    Wheels,
    build_cudnn_world,
    install_cudnn_world,
)
from tests.support.digest import diff, tree_digest

OFFLINE = ("--offline", "--find-links")
UV_FAILED, USAGE, FINDINGS = 13, 2, 1


@dataclass(frozen=True)
class World:
    wheels: Wheels
    work: Path


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> World:
    root = tmp_path_factory.mktemp("install")
    return World(build_cudnn_world(root), root)


def _venv(world: World, tmp_path: Path, *, with_cu12: bool = False) -> Path:
    return install_cudnn_world(world.wheels, tmp_path / "venv", cu12_last=with_cu12)


def _run(world: World, venv: Path, *args: str) -> subprocess.CompletedProcess[str]:
    links = ("--offline", "--find-links", str(world.wheels.folder))
    return cudatx(*args, *links, "--python", venv, "--ignore-running", cwd=world.work)


def _plan(done: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(done.stdout)
    return data


def _cudnn_bytes(venv: Path) -> bytes:
    return (site_packages(venv) / CUDNN).read_bytes()


def _wheel_cudnn(wheel: Path) -> bytes:
    from zipfile import ZipFile

    with ZipFile(wheel) as archive:
        return archive.read(CUDNN)


def test_installing_the_cu12_cudnn_under_cuda13_torch_is_a_rebinding(
    world: World, tmp_path: Path
) -> None:
    venv = _venv(world, tmp_path)
    before = tree_digest(venv)
    done = _run(world, venv, "install", CU12, "--dry-run", "--json")
    assert done.returncode == FINDINGS, done.stderr
    plan = _plan(done)
    assert [p["name"] for p in plan["install"]] == [CU12]
    assert plan["remove"] == []
    # cu12's sub-libraries dlopen CUDA 12 libraries this CUDA 13 world does not have.
    new_needs = {(b["soname"], b["needed_by_dist"]) for b in plan["broken"]}
    assert new_needs == {("libcublasLt.so.12", CU12), ("libnvrtc.so.12", CU12)}
    (rebound,) = [r for r in plan["rebound"] if r["soname"] == "libcudnn.so.9"]
    assert rebound["provider_before"] == rebound["provider_after"]  # same path, other bytes
    assert rebound["provider_after_owners"] == [CU12]
    assert rebound["cuda_major_after"] == 12
    mixed = {m["soname"]: m for m in plan["mixed"]}
    assert mixed["libcudnn.so.9"]["major"] == 12 and mixed["libcudnn.so.9"]["torch_cuda"] == "13.0"
    assert [p["name"] for p in plan["overwritten"]] == [CU13]
    assert not plan["safe"]
    text = _run(world, venv, "install", CU12, "--dry-run")
    assert text.returncode == FINDINGS
    assert f" + {CU12}=={CU12_VERSION}" in text.stdout
    assert "Would mix CUDA majors (torch is built for CUDA 13.0):" in text.stdout
    assert "libcudnn.so.9" in text.stdout and "is a CUDA 12 build" in text.stdout
    assert diff(before, tree_digest(venv)) == []  # staged elsewhere: nothing here changed

    # The judge: install it for real (forced), and the loader maps the cu12 bytes.
    applied = _run(world, venv, "install", CU12, "--force", "--yes")
    assert applied.returncode == 0, applied.stderr
    assert _cudnn_bytes(venv) == _wheel_cudnn(world.wheels.cudnn12)
    seen = observe_import(venv_python(venv), "torch._C")
    assert seen.ok and str(site_packages(venv) / CUDNN) in seen.maps, seen.error
    # The snapshot held the overwritten cu13 bytes: rollback puts back every byte.
    back = cudatx("rollback", "--yes", "--python", venv, cwd=world.work)
    assert back.returncode == 0, back.stderr
    assert diff(before, tree_digest(venv)) == []
    assert _cudnn_bytes(venv) == _wheel_cudnn(world.wheels.cudnn13)


def _freeze(venv: Path, drop: str) -> str:
    lines = [f"{d.name}=={d.version}" for d in _dists(venv) if d.name != drop]
    return "\n".join(sorted(lines)) + "\n"


def _dists(venv: Path) -> list[Any]:
    from cudatx.discover.dists import scan_distributions

    found, _ = scan_distributions((str(site_packages(venv)),))
    return list(found)


def test_sync_that_drops_the_dist_whose_bytes_are_on_disk(world: World, tmp_path: Path) -> None:
    venv = _venv(world, tmp_path, with_cu12=True)
    requirements = tmp_path / "requirements.txt"
    requirements.write_text(_freeze(venv, drop=CU12))
    before = tree_digest(venv)
    done = _run(world, venv, "sync", str(requirements), "--dry-run", "--json")
    assert done.returncode == FINDINGS, done.stderr
    plan = _plan(done)
    assert [p["name"] for p in plan["remove"]] == [CU12] and plan["install"] == []
    assert "libcudnn.so.9" in {b["soname"] for b in plan["broken"]}
    assert [p["name"] for p in plan["repair"]["reinstall"]] == [CU13]
    # cu12's bytes are on disk: restoring cu13's is checked by --repair, with its wheel
    assert plan["repair"]["safe"] is None
    repaired = _plan(
        _run(world, venv, "sync", str(requirements), "--dry-run", "--json", "--repair")
    )
    assert repaired["safe"] and [p["name"] for p in repaired["reinstall"]] == [CU13]
    assert diff(before, tree_digest(venv)) == []

    # With --repair it is safe; applied, torch imports with the cu13 bytes; rolled back,
    # every byte is as it was.
    applied = _run(world, venv, "sync", str(requirements), "--repair", "--yes")
    assert applied.returncode == 0, applied.stderr
    assert CU12 not in {d.name for d in _dists(venv)}
    assert _cudnn_bytes(venv) == _wheel_cudnn(world.wheels.cudnn13)
    assert observe_import(venv_python(venv), "torch._C").ok
    back = cudatx("rollback", "--yes", "--python", venv, cwd=world.work)
    assert back.returncode == 0, back.stderr
    assert diff(before, tree_digest(venv)) == []


def test_sync_that_adds_a_distribution_is_rolled_back_to_the_same_tree(
    world: World, tmp_path: Path
) -> None:
    venv = _venv(world, tmp_path)
    requirements = tmp_path / "requirements.txt"
    requirements.write_text(_freeze(venv, drop="") + f"{CU12}=={CU12_VERSION}\n")
    before = tree_digest(venv)
    applied = _run(world, venv, "sync", str(requirements), "--force", "--yes")
    assert applied.returncode == 0, applied.stderr
    assert CU12 in {d.name for d in _dists(venv)}
    back = cudatx("rollback", "--yes", "--python", venv, cwd=world.work)
    assert back.returncode == 0, back.stderr
    assert diff(before, tree_digest(venv)) == []


def test_bad_input_is_one_line_and_changes_nothing(world: World, tmp_path: Path) -> None:
    venv = _venv(world, tmp_path)
    before = tree_digest(venv)
    nothing = _run(world, venv, "install")
    assert nothing.returncode == USAGE and "nothing to install" in nothing.stderr
    unknown = _run(world, venv, "install", "no-such-distribution-here", "--dry-run")
    assert unknown.returncode == UV_FAILED, unknown.stderr
    (line,) = [ln for ln in unknown.stderr.splitlines() if ln.startswith("cudatx: error:")]
    assert "uv pip install failed" in line and "no-such-distribution-here" in line
    assert "Traceback" not in unknown.stderr
    missing = _run(world, venv, "sync", str(tmp_path / "absent.txt"), "--dry-run")
    assert missing.returncode != 0 and "Traceback" not in missing.stderr
    assert diff(before, tree_digest(venv)) == []


def test_rollback_restores_a_script_another_wheel_overwrote(tmp_path: Path) -> None:
    """Scripts land outside site-packages (`bin/`): the snapshot must still hold the bytes an
    arriving wheel writes over (staging with --prefix gives their real paths)."""
    from tests.support import build_wheel

    folder = tmp_path / "wheels"
    wheels = [
        build_wheel(
            folder,
            name,
            "1.0",
            {
                f"{stem}.py": b"",
                f"{stem}-1.0.data/scripts/tool": f"#!/bin/sh\necho {name}\n".encode(),
            },
        )
        for name, stem in (("tool-a", "tool_a"), ("tool-b", "tool_b"))
    ]
    venv = make_venv(tmp_path / "venv")
    uv_install(venv, [wheels[0]])
    script = venv / "bin" / "tool"
    assert b"tool-a" in script.read_bytes()
    before = tree_digest(venv)
    links = ("--offline", "--find-links", str(folder), "--ignore-running")
    # tool-a stays and its script would hold tool-b's bytes: unsafe (issue 22), so forced.
    dry = cudatx("install", "tool-b", "--dry-run", *links, "--python", venv, cwd=tmp_path)
    assert dry.returncode == 1 and " ~ tool-a==1.0 would hold other bytes at " in dry.stdout
    applied = cudatx(
        "install", "tool-b", "--yes", "--force", *links, "--python", venv, cwd=tmp_path
    )
    assert applied.returncode == 0, applied.stderr
    assert b"tool-b" in script.read_bytes()
    back = cudatx("rollback", "--yes", "--python", venv, cwd=tmp_path)
    assert back.returncode == 0, back.stderr
    assert diff(before, tree_digest(venv)) == []


def test_an_upgrade_is_planned_applied_and_rolled_back(tmp_path: Path) -> None:
    """uv's dry run says `- old` and `+ new`; the plan lists both; rollback brings the old
    version's files (and only them) back."""
    from tests.support import build_wheel

    folder = tmp_path / "wheels"
    old, _ = (
        build_wheel(folder, "solo", version, {f"solo/v{version[0]}.py": version.encode()})
        for version in ("1.0", "2.0")
    )
    venv = make_venv(tmp_path / "venv")
    uv_install(venv, [old])
    before = tree_digest(venv)
    links = ("--offline", "--find-links", str(folder), "--ignore-running")
    dry = cudatx(
        "install", "solo==2.0", "--dry-run", "--json", *links, "--python", venv, cwd=tmp_path
    )
    assert dry.returncode == 0, dry.stderr
    plan = _plan(dry)
    assert plan["remove"] == [{"name": "solo", "version": "1.0"}]
    [arriving] = plan["install"]
    assert (arriving["name"], arriving["version"]) == ("solo", "2.0")
    assert arriving["source"] == str(folder / "solo-2.0-py3-none-any.whl")
    applied = cudatx("install", "solo==2.0", "--yes", *links, "--python", venv, cwd=tmp_path)
    assert applied.returncode == 0, applied.stderr
    site = site_packages(venv)
    assert (site / "solo" / "v2.py").exists() and not (site / "solo" / "v1.py").exists()
    back = cudatx("rollback", "--yes", "--python", venv, cwd=tmp_path)
    assert back.returncode == 0, back.stderr
    assert diff(before, tree_digest(venv)) == []
