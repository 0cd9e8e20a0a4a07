"""Files the loader finds outside the environment, named by the system package that owns them.

Two worlds. On this machine's own dpkg database: an extension that links `libstdc++.so.6`
and `libgomp.so.1`, found through `/etc/ld.so.cache`; `why` must name the package `dpkg -S`
names, with the version `dpkg-query` gives. And a system-style folder of its own: a
`sysroot/usr/lib/x86_64-linux-gnu` (reached as `sysroot/lib/...` too, `lib -> usr/lib`, as on
merged-/usr Debian 12) holding an older real `libllv.so` whose version script lacks the
`V2` the environment's extensions need, owned by `libllv1` in a dpkg database written in
dpkg's own format (`info/libllv1:amd64.list` naming the file through the symlinked folder,
and a `status` stanza), found through `CUDATX_DPKG_ADMINDIR` and `LD_LIBRARY_PATH`. The real
loader judges every import in a subprocess.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from cudatx.analysis.doctor import diagnose
from cudatx.analysis.why import explain
from cudatx.discover.owners.dpkg import ADMINDIR_VARIABLE
from cudatx.discover.target import start_query
from cudatx.planning.change import Planning, propose_removal
from cudatx.scan import scan
from tests.loader.test_symbols_judge import V12, ext_source, functions
from tests.support import (
    build_wheel,
    compile_extension,
    compile_lib,
    ext_suffix,
    make_venv,
    observe_code,
    site_packages,
    uv_install,
    uv_uninstall,
    venv_python,
)
from tests.support.cli import HIDDEN, cudatx

EXT = ext_suffix()
V1 = "V1 { global: f1; local: *; };\n"
MULTIARCH = "x86_64-linux-gnu"
PACKAGE, PACKAGE_VERSION = "libllv1", "1.0-1"


@dataclass(frozen=True)
class World:
    venv: Path
    site: Path
    work: Path
    sysroot: Path  # the system-style folder: sysroot/usr/lib/x86_64-linux-gnu/libllv.so
    admindir: Path  # its dpkg database

    @property
    def system_lib(self) -> Path:
        return self.sysroot / "usr" / "lib" / MULTIARCH / "libllv.so"

    @property
    def library_path(self) -> str:
        return str(self.system_lib.parent)

    def env(self) -> dict[str, str]:
        return {ADMINDIR_VARIABLE: str(self.admindir)}

    def text(self, *args: str | os.PathLike[str]) -> str:
        """What `cudatx ARGS` prints for this environment, the system folder on its
        LD_LIBRARY_PATH and the fixture's dpkg database as the system's."""
        done = cudatx(
            *args,
            "--python",
            self.venv,
            "--ld-library-path",
            self.library_path,
            cwd=self.work,
            env=self.env(),
        )
        assert done.stdout, done.stderr
        return done.stdout

    def json(self, *args: str | os.PathLike[str]) -> tuple[int, dict[str, Any]]:
        done = cudatx(
            *args,
            "--python",
            self.venv,
            "--ld-library-path",
            self.library_path,
            "--json",
            cwd=self.work,
            env=self.env(),
        )
        assert done.stdout, done.stderr
        data: dict[str, Any] = json.loads(done.stdout)
        return done.returncode, data

    def imports(self, module: str) -> str | None:
        """None when `import module` works with the system folder on LD_LIBRARY_PATH, else
        Python's ImportError message."""
        code = f"import {module}\n"
        seen = observe_code(venv_python(self.venv), code, ld_library_path=self.library_path)
        return None if seen.ok else (seen.error or "").removeprefix("ImportError: ")


def _dpkg_database(admindir: Path, listed: list[str]) -> None:
    """A dpkg admin folder as dpkg keeps one: info/<package>:<arch>.list, one path a line
    (folders too), and status, one deb-control stanza per package."""
    info = admindir / "info"
    info.mkdir(parents=True)
    (info / f"{PACKAGE}:amd64.list").write_text("/.\n" + "".join(f"{p}\n" for p in listed))
    (info / "libother0:amd64.list").write_text("/.\n/usr/lib/x86_64-linux-gnu/libother.so.0\n")
    (admindir / "status").write_text(
        "Package: libother0\nStatus: install ok installed\nArchitecture: amd64\n"
        "Version: 2.0-3\nDescription: another library\n\n"
        f"Package: {PACKAGE}\nStatus: install ok installed\nPriority: optional\n"
        f"Section: libs\nArchitecture: amd64\nMulti-Arch: same\nVersion: {PACKAGE_VERSION}\n"
        "Description: the llv library, an older release\n a long description line\n .\n"
        " its second paragraph\n"
    )


def build_world(root: Path) -> World:
    build = root / "build"
    link = compile_lib(
        build / "link" / "libllv.so",
        soname="libllv.so",
        source=functions("f1", "f2"),
        version_script=V12,
    )
    # The system's copy: an older release, V1 only.
    sysroot = root / "sysroot"
    system_dir = sysroot / "usr" / "lib" / MULTIARCH
    compile_lib(
        system_dir / "libllv.so", soname="libllv.so", source=functions("f1"), version_script=V1
    )
    (sysroot / "lib").symlink_to("usr/lib")
    admindir = root / "dpkg"
    listed = [str(sysroot / "lib"), str(sysroot / "lib" / MULTIARCH)]
    _dpkg_database(admindir, [*listed, str(sysroot / "lib" / MULTIARCH / "libllv.so")])
    # The environment's copy has V2 (its own wheel); `llvr` finds it by RPATH, which comes
    # before LD_LIBRARY_PATH, `llvd` by RUNPATH, which comes after.
    env_lib = compile_lib(
        build / "env" / "libllv.so",
        soname="libllv.so",
        source=functions("f1", "f2"),
        version_script=V12,
    )
    files: dict[str, bytes | Path] = {}
    for package, how in (("llvr", "rpath"), ("llvd", "runpath")):
        ext = compile_extension(
            build / package,
            "_ext",
            source=ext_source("_ext", calls=["f2"]),
            needed=[link],
            **{how: "$ORIGIN/../llvlib"},
        )
        files |= {f"{package}/__init__.py": b"", f"{package}/_ext{EXT}": ext}
    wheels = root / "wheels"
    users = build_wheel(wheels, "llvusers", "1.0", files, tag="py3-none-linux_x86_64")
    lib = build_wheel(
        wheels, "fx-llv", "1.0", {"llvlib/libllv.so": env_lib}, tag="py3-none-linux_x86_64"
    )
    venv = make_venv(root / "venv")
    uv_install(venv, [users, lib])
    work = root / "work"
    work.mkdir()
    return World(venv, site_packages(venv), work, sysroot, admindir)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> World:
    return build_world(tmp_path_factory.mktemp("sysowners"))


SYSTEM = {"manager": "dpkg", "name": PACKAGE, "version": PACKAGE_VERSION, "architecture": "amd64"}


def test_doctor_names_the_system_package_lacking_the_version(world: World) -> None:
    real = world.imports("llvd._ext")
    assert real is not None and f"{world.system_lib}: version `V2' not found" in real
    assert world.imports("llvr._ext") is None
    code, report = world.json("doctor")
    assert code == 1
    (problem,) = [p for p in report["problems"] if p["code"] == "missing-version"]
    assert problem["what"].startswith(
        f"{world.system_lib} (Debian package {PACKAGE} {PACKAGE_VERSION}) lacks version `V2'"
    )
    assert problem["system_packages"] == [SYSTEM]
    assert f"take {world.library_path} out of LD_LIBRARY_PATH" in problem["why"]
    assert (
        f"{world.system_lib} is Debian package {PACKAGE} {PACKAGE_VERSION}'s, and cudatx never "
        "changes system packages" in problem["why"]
    )
    assert f"importing llvd/_ext{EXT} would fail: {real}" in problem["consequences"]


def test_why_names_the_system_package(world: World) -> None:
    code, report = world.json("why", "libllv.so")
    assert code == 0
    outside = [r for r in report["routes"] if r["file"] == str(world.system_lib)]
    assert [r["system_package"] for r in outside] == [SYSTEM]
    inside = [r for r in report["routes"] if r["file"] != str(world.system_lib)]
    assert inside and all(r["system_package"] is None for r in inside)  # wheel-owned
    said = f"  from       Debian package {PACKAGE} {PACKAGE_VERSION} (the system's; cudatx never"
    assert said + " changes it)" in world.text("why", "libllv.so")


def test_a_plan_names_the_system_package_a_removal_falls_back_to(tmp_path: Path) -> None:
    world = build_world(tmp_path)
    code, plan = world.json("remove", "fx-llv", "--dry-run")
    assert code == 1
    (broken,) = [b for b in plan["broken"] if "llvr/" in b["needed_by"]]
    assert broken["missing"] == ["`V2'"]
    assert broken["system_package"] == SYSTEM
    said = f"the file found is Debian package {PACKAGE} {PACKAGE_VERSION}'s, which cudatx"
    assert said + " never changes" in world.text("remove", "fx-llv", "--dry-run")
    uv_uninstall(world.venv, ["fx-llv"])
    real = world.imports("llvr._ext")
    assert real is not None and f"{world.system_lib}: version `V2' not found" in real
    assert broken["reason"] == f"deleted with fx-llv; then {real}"  # glibc's own message


def test_nothing_is_read_until_a_report_names_a_file_outside(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ADMINDIR_VARIABLE, str(world.admindir))
    env = scan(
        start_query(str(world.venv)), ld_library_path=None
    )  # healthy without the system folder
    assert env.system_packages is not None
    assert not [p for p in diagnose(env).problems if p.severity == "error"]
    propose_removal(env, ("llvusers",), (), Planning())
    explain(env, "libllv.so")  # found inside: a wheel owns it
    assert env.system_packages.lists_read == 0
    env = scan(start_query(str(world.venv)), ld_library_path=world.library_path)
    explain(env, "libllv.so")
    assert env.system_packages is not None and env.system_packages.lists_read == 2


# -- this machine's own dpkg database -------------------------------------------------------


def _dpkg_owner(path: str) -> tuple[str, str]:
    """(package, version) `dpkg -S` and `dpkg-query -W` give for the file at `path`, found
    by its name and matched by its resolved folder (dpkg lists /lib/... on merged /usr)."""
    done = subprocess.run(
        ["dpkg-query", "-S", f"*/{os.path.basename(path)}"],
        capture_output=True,
        text=True,
        check=True,
    )
    folder = os.path.realpath(os.path.dirname(path))
    for line in done.stdout.splitlines():
        package, _, listed = line.partition(": ")
        if (
            os.path.basename(listed) == os.path.basename(path)
            and os.path.realpath(os.path.dirname(listed)) == folder
        ):
            version = subprocess.run(
                ["dpkg-query", "-W", "-f", "${Version}", package],
                capture_output=True,
                text=True,
                check=True,
            ).stdout
            return package.partition(":")[0], version
    raise AssertionError(f"dpkg -S names no package for {path}: {done.stdout}")


@pytest.mark.skipif(
    shutil.which("dpkg-query") is None or not os.path.isdir("/var/lib/dpkg/info"),
    reason="no dpkg database on this machine",
)
@pytest.mark.parametrize("soname", ["libstdc++.so.6", "libgomp.so.1"])
def test_why_names_this_machines_debian_package(tmp_path: Path, soname: str) -> None:
    ext = compile_extension(
        tmp_path / "build", "_ext", extra_needed_names=["libstdc++.so.6", "libgomp.so.1"]
    )
    wheel = build_wheel(
        tmp_path / "wheels",
        "sysuser",
        "1.0",
        {"sysuser/__init__.py": b"", f"sysuser/_ext{EXT}": ext},
        tag="py3-none-linux_x86_64",
    )
    venv = make_venv(tmp_path / "venv")
    uv_install(venv, [wheel])
    assert observe_code(venv_python(venv), "import sysuser._ext\n").ok
    hide = HIDDEN | {ADMINDIR_VARIABLE}  # this machine's own database
    done = cudatx("why", soname, "--python", venv, "--json", cwd=tmp_path, hide=hide)
    report = json.loads(done.stdout)
    route = report["routes"][report["answer"]]
    assert route["how"] in ("ld.so.cache", "default") and route["owners"] == []
    package, version = _dpkg_owner(route["file"])
    assert (
        route["system_package"]["name"] == package and route["system_package"]["version"] == version
    )
    assert package == {"libstdc++.so.6": "libstdc++6", "libgomp.so.1": "libgomp1"}[soname]
    text = cudatx("why", soname, "--python", venv, cwd=tmp_path, hide=hide).stdout
    assert f"(from Debian package {package} {version}, no CUDA major known)" in text.splitlines()[0]
