"""A conda environment: `conda-meta/` records own files in the same graph as RECORDs.

A real venv made conda-style: conda packages installed by hand as conda's link step leaves
them (tests/support/conda.py: real files, real PrefixRecords written by the documented
format, since no conda channel is reachable here): `cudnn` (a tiny real library named
`lib/libcudnn.so.9`, a softlink, a header and a text file with a prefix placeholder,
depending on `cuda-version >=12,<13.0a0`), `cuda-version` 12.4, and `fxpy`, a Python package
whose dist-info conda lists. Then real uv installs `fx-cudnn-cu12`, a wheel whose data
files put another `libcudnn.so.9` at the same path (`../../libcudnn.so.9` in its RECORD:
site-packages/../.. is lib/), and `cudnnuser`, an extension module that loads it through its
RUNPATH. The real loader judges each import in a subprocess.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from cudatx.analysis.cuda import cuda_major_of_dist
from cudatx.discover.catalog import load_catalog
from cudatx.discover.owners.conda import read_conda_records
from cudatx.discover.target import start_query
from cudatx.errors import ExitCode
from cudatx.scan import scan
from tests.loader.test_symbols_judge import ext_source
from tests.support import (
    build_wheel,
    compile_extension,
    compile_lib,
    ext_suffix,
    make_venv,
    observe_import,
    record_hash,
    site_packages,
    uv_install,
    uv_uninstall,
    venv_python,
)
from tests.support.cli import cudatx
from tests.support.conda import PLACEHOLDER, CondaPackage, install_conda_package
from tests.support.digest import diff, tree_digest

EXT = ext_suffix()
CUDNN = "libcudnn.so.9"
WHEEL = "fx-cudnn-cu12"
VERSION = "9.1.0.70"
BUILD = "h93bb076_0"
CUDNN_FILES = 11  # libcudnn.so.9, its 7 sub-libraries, a link, a header, a script


def _library(out: Path, build: int, name: str = CUDNN) -> Path:
    """A cuDNN library whose bytes tell the build apart (RUNPATH $ORIGIN, as conda's and
    NVIDIA's are); every libcudnn.so.9 defines what cudnnuser calls."""
    source = f"int fx_build(void) {{ return {build}; }}\n"
    if name == CUDNN:
        source += "int cudnnGetVersion(void) { return 9100; }\n"
    return compile_lib(out / name, soname=name, source=source, runpath="$ORIGIN")


@dataclass(frozen=True)
class CondaWorld:
    venv: Path
    site: Path
    work: Path

    @property
    def cudnn(self) -> Path:
        return self.venv / "lib" / CUDNN

    def json(self, *args: str | os.PathLike[str]) -> tuple[int, dict[str, Any]]:
        done = cudatx(*args, "--python", self.venv, "--json", cwd=self.work)
        assert done.stdout, done.stderr
        data: dict[str, Any] = json.loads(done.stdout)
        return done.returncode, data


def build_conda_world(root: Path) -> CondaWorld:
    build = root / "build"
    conda_lib = _library(build / "conda", 1)
    wheel_lib = _library(build / "wheel", 2)
    # The extension loads $PREFIX/lib/libcudnn.so.9 through RUNPATH, as conda's interpreter
    # (RPATH $ORIGIN/../lib) would: site-packages/cudnnuser -> ../../../../lib.
    user = compile_extension(
        build / "user",
        "_ext",
        source=ext_source("_ext", calls=["cudnnGetVersion"]),
        needed=[conda_lib],
        runpath="$ORIGIN/../../../../lib",
    )
    venv = make_venv(root / "venv")
    site = site_packages(venv)
    py = os.path.relpath(site, venv)  # lib/python3.X/site-packages
    install_conda_package(
        venv,
        CondaPackage(
            name="cuda-version",
            version="12.4",
            build="h3060b56_3",
            depends=("__cuda >=12",),
        ),
    )
    # cuDNN's sub-libraries, which libcudnn.so.9 dlopens (cudatx/data/runtime.json), and the
    # CUDA 12 libraries two of them load, as conda-forge's cudnn, libcublas and cuda-nvrtc
    # put them in lib/.
    loads, _ = load_catalog().known_loads(CUDNN, None)
    files: dict[str, bytes | Path] = {f"lib/{n}": _library(build / "conda", 1, n) for n in loads}
    files |= {f"lib/{CUDNN}": conda_lib, "include/cudnn.h": b"#define CUDNN_MAJOR 9\n"}
    for name, version, lib in (
        ("libcublas", "12.4.5.8", "libcublasLt.so.12"),
        ("cuda-nvrtc", "12.4.127", "libnvrtc.so.12"),
    ):
        install_conda_package(
            venv,
            CondaPackage(
                name=name,
                version=version,
                build="h0_0",
                files={f"lib/{lib}": compile_lib(build / lib, soname=lib)},
                depends=("cuda-version >=12.4,<12.5.0a0",),
            ),
        )
    install_conda_package(
        venv,
        CondaPackage(
            name="cudnn",
            version=VERSION,
            build=BUILD,
            files=files,
            links={"lib/libcudnn.so": CUDNN},
            text_with_prefix={"bin/cudnn-config": f"#!/bin/sh\necho {PLACEHOLDER}/include\n"},
            depends=("cuda-version >=12,<13.0a0", "libgcc-ng >=12"),
        ),
    )
    dist_info = f"{py}/fxpy-1.0.dist-info"
    metadata = b"Metadata-Version: 2.1\nName: fxpy\nVersion: 1.0\n"
    init = b"VALUE = 1\n"
    record = (  # as pip writes it when conda-build installs the package
        f"fxpy/__init__.py,{record_hash(init)},{len(init)}\n"
        f"fxpy-1.0.dist-info/METADATA,{record_hash(metadata)},{len(metadata)}\n"
        "fxpy-1.0.dist-info/INSTALLER,,\nfxpy-1.0.dist-info/RECORD,,\n"
    )
    install_conda_package(
        venv,
        CondaPackage(
            name="fxpy",
            version="1.0",
            build="pyhd8ed1ab_0",
            files={
                f"{py}/fxpy/__init__.py": init,
                f"{dist_info}/METADATA": metadata,
                f"{dist_info}/INSTALLER": b"conda\n",
                f"{dist_info}/RECORD": record.encode(),
            },
            subdir="noarch",
        ),
    )
    wheels = root / "wheels"
    cudnn_wheel = build_wheel(
        wheels,
        WHEEL,
        VERSION,
        {f"fx_cudnn_cu12-{VERSION}.data/data/lib/{CUDNN}": wheel_lib},
        tag="py3-none-linux_x86_64",
    )
    user_wheel = build_wheel(
        wheels,
        "cudnnuser",
        "1.0",
        {"cudnnuser/__init__.py": b"", f"cudnnuser/_ext{EXT}": user},
        tag="py3-none-linux_x86_64",
    )
    uv_install(venv, [cudnn_wheel, user_wheel])
    work = root / "work"
    work.mkdir()
    return CondaWorld(venv=venv, site=site, work=work)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> CondaWorld:
    return build_conda_world(tmp_path_factory.mktemp("conda"))


def test_the_wheel_really_installs_over_the_conda_file(world: CondaWorld) -> None:
    record = (world.site / f"fx_cudnn_cu12-{VERSION}.dist-info" / "RECORD").read_text()
    assert f"../../{CUDNN}," in record  # site-packages/../.. is lib/
    assert b"fx_build" in world.cudnn.read_bytes()
    assert observe_import(venv_python(world.venv), "cudnnuser._ext").ok


def test_conda_records_read_by_the_documented_format(world: CondaWorld) -> None:
    dists, findings = read_conda_records(str(world.venv))
    assert findings == []
    by_name = {d.name: d for d in dists}
    assert set(by_name) == {
        f"conda:{n}" for n in ("cuda-version", "cudnn", "fxpy", "libcublas", "cuda-nvrtc")
    }
    cudnn = by_name["conda:cudnn"]
    assert cudnn.package is not None and cudnn.package.build == BUILD
    assert cudnn.site == str(world.venv) and cudnn.owner == "conda"
    rows = {e.path: e for e in cudnn.records}
    assert len(rows) == CUDNN_FILES
    assert {"lib/libcudnn.so", "include/cudnn.h", "bin/cudnn-config"} < set(rows)
    assert rows[f"lib/{CUDNN}"].hash_algorithm == "sha256" and rows[f"lib/{CUDNN}"].size
    assert rows["lib/libcudnn.so"].hash_digest is None  # a link: only that it is there
    # rewritten at install: its size is the package's, so only sha256_in_prefix is kept
    assert rows["bin/cudnn-config"].size is None and rows["bin/cudnn-config"].hash_digest


def test_doctor_names_the_co_owned_path_with_both_owners(world: CondaWorld) -> None:
    code, report = world.json("doctor")
    assert code == 0, report["verdict"]  # the import works: warnings only
    key = str(Path(os.path.realpath(world.venv / "lib")) / CUDNN)
    (shared,) = [p for p in report["problems"] if p["code"] == "co-owned"]
    assert shared["paths"] == [key]
    assert shared["distributions"] == [WHEEL, "conda:cudnn"]
    assert f"listed by {WHEEL} {VERSION} and conda:cudnn {VERSION}" in shared["what"]
    assert f"the bytes on disk are {WHEEL}'s" in shared["why"]
    assert shared["why"].endswith(
        "cudatx never changes conda's packages (conda:cudnn): conda restores their own files "
        f"with conda install -p {world.venv} --force-reinstall cudnn={VERSION}={BUILD}"
    )
    assert shared["fix"] is None
    # Its bytes are the wheel's: conda's cudnn is hollow by one file, and only that one (the
    # prefix-rewritten text file and the softlink are what its record says).
    (hollow,) = [p for p in report["problems"] if p["code"] == "hollow"]
    assert hollow["distributions"] == ["conda:cudnn"]
    assert hollow["paths"] == [f"lib/{CUDNN}"]
    assert f"1 of its {CUDNN_FILES} files has other bytes" in hollow["what"]
    assert hollow["fix"] == (
        f"conda install -p {world.venv} --force-reinstall cudnn={VERSION}={BUILD}"
    )
    text = cudatx("doctor", "--python", world.venv, cwd=world.work).stdout
    assert f"listed by {WHEEL} {VERSION} and conda:cudnn {VERSION}" in text


def test_why_names_both_owners_and_whose_bytes(world: CondaWorld) -> None:
    code, report = world.json("why", CUDNN)
    assert code == 0
    route = report["routes"][report["answer"]]
    assert route["owners"] == [
        {"name": WHEEL, "version": VERSION, "kind": "dist-info"},
        {"name": "conda:cudnn", "version": VERSION, "kind": "conda"},
    ]
    assert route["effective_owner"]["name"] == WHEEL
    assert route["cuda_major"] == 12


def test_cuda_major_of_conda_packages(world: CondaWorld) -> None:
    env = scan(start_query(str(world.venv)), ld_library_path=None)
    cudnn = env.distribution("conda:cudnn")
    version = env.distribution("conda:cuda-version")
    assert cudnn is not None and version is not None
    found = cuda_major_of_dist(env, cudnn)
    assert found is not None and found.major == 12
    assert found.reason == "conda's cudnn depends on cuda-version >=12,<13.0a0"
    found = cuda_major_of_dist(env, version)
    assert found is not None and found.major == 12
    assert found.reason == "conda's cuda-version 12.4 tracks the CUDA version"
    assert cuda_major_of_dist(env, env.distribution("conda:fxpy")) is None  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("spec", "package", "what"),
    [
        ("cudnn", "cudnn", f"cudnn {VERSION} (conda-meta/cudnn-{VERSION}-{BUILD}.json) was"),
        ("conda:cudnn", "cudnn", f"cudnn {VERSION} (conda-meta/cudnn-{VERSION}-{BUILD}.json)"),
        ("fxpy", "fxpy", "fxpy 1.0, of fxpy 1.0 (conda-meta/fxpy-1.0-pyhd8ed1ab_0.json) was"),
    ],
)
@pytest.mark.parametrize("dry_run", [False, True])
def test_changes_to_conda_packages_are_refused(
    world: CondaWorld, spec: str, package: str, what: str, dry_run: bool
) -> None:
    before = tree_digest(world.venv)
    args = ["remove", spec, "--python", world.venv, "--dry-run" if dry_run else "--yes"]
    done = cudatx(*args, cwd=world.work)
    assert done.returncode == ExitCode.CONDA_OWNED == 15
    assert done.stdout == ""
    using, line = done.stderr.splitlines()  # which environment, then the one error line
    assert using.startswith("Using Python")
    assert line.startswith(f"cudatx: error: {what}")
    assert "cudatx applies changes through uv only and never changes conda's packages" in line
    assert line.endswith(f"run: conda remove -p {world.venv} {package} (or the same with mamba)")
    assert diff(before, tree_digest(world.venv)) == []


def test_plan_removing_the_wheel_predicts_the_break_the_loader_then_shows(
    tmp_path: Path,
) -> None:
    world = build_conda_world(tmp_path)
    code, plan = world.json("remove", WHEEL, "--dry-run")
    assert code == 1 and plan["safe"] is False
    (broken,) = plan["broken"]
    assert broken["soname"] == CUDNN and broken["needed_by"].endswith(f"cudnnuser/_ext{EXT}")
    assert broken["provider_owners"] == [WHEEL, "conda:cudnn"]
    assert broken["reason"] == (
        f"deleted with {WHEEL}; conda:cudnn's conda-meta record lists the same path (shared "
        "path), so conda:cudnn would be left hollow"
    )
    assert [r["first_missing"] for r in plan["broken_roots"]] == [CUDNN]
    assert plan["left_hollow"] == [{"name": "conda:cudnn", "version": VERSION}]
    assert plan["repair"] is None and plan["reinstall"] == []  # uv cannot restore conda's
    assert any(
        f"conda install -p {world.venv} --force-reinstall cudnn={VERSION}={BUILD} restores" in n
        for n in plan["notes"]
    )
    # The real uninstall, then the real loader.
    python = venv_python(world.venv)
    assert observe_import(python, "cudnnuser._ext").ok
    uv_uninstall(world.venv, [WHEEL])
    assert not os.path.lexists(world.cudnn)
    seen = observe_import(python, "cudnnuser._ext")
    assert not seen.ok
    assert f"{CUDNN}: cannot open shared object file" in (seen.error or "")
    # Now doctor: conda's cudnn is hollow, and what fails for it names conda's command.
    code, report = world.json("doctor")
    assert code == 1
    (hollow,) = [p for p in report["problems"] if p["code"] == "hollow"]
    assert hollow["severity"] == "error" and hollow["distributions"] == ["conda:cudnn"]
    assert (
        f"conda:cudnn {VERSION} is installed but hollow: 1 of its {CUDNN_FILES}" in (hollow["what"])
    )
    assert hollow["fix"].startswith(f"conda install -p {world.venv} --force-reinstall cudnn=")


def test_a_selection_with_several_conda_packages_names_them_in_one_command(
    world: CondaWorld,
) -> None:
    done = cudatx("remove", "cuda:12", "--dry-run", "--python", world.venv, cwd=world.work)
    assert done.returncode == 15
    line = done.stderr.splitlines()[-1]
    assert " were installed by conda: " in line
    assert line.endswith(
        f"to remove them, run: conda remove -p {world.venv} cuda-nvrtc cuda-version cudnn "
        "libcublas (or the same with mamba)"
    )
