"""`cudatx demo`'s environment, judged by the real loader; and the one wheel writer.

Every environment here is built by :func:`cudatx.demo.build_demo` (real compiler or the
shipped prebuilt copies, real wheels, real uv, offline) and imported by a real interpreter.
"""

from __future__ import annotations

import csv
import io
import json
import os
import shlex
import stat
import subprocess
import zipfile
from pathlib import Path

import pytest

from cudatx.demo import DemoEnv, DemoError, build_demo
from cudatx.demo import libs as demo_libs
from cudatx.demo.build import COOWNED_PATH, COOWNED_PATHS
from cudatx.demo.wheelfile import record_hash, write_wheel
from cudatx.elf.reader import rodata_sonames
from tests.support import read_dynamic, site_packages, uv_uninstall
from tests.support.cli import cudatx
from tests.support.paths import REPO

CU12, CU13 = "nvidia-cudnn-cu12", "nvidia-cudnn-cu13"
CU12_DIST, CU13_DIST = (
    "nvidia_cudnn_cu12-9.10.2.21+cudatxdemo.dist-info",
    "nvidia_cudnn_cu13-9.13.0.50+cudatxdemo.dist-info",
)
PROBE = (
    "import torch._C as C\n"
    "print(C.cuda_major(), C.cudnn_version(), C.cudnn_cuda_major(), C.cublas_version())\n"
    "print(open('/proc/self/maps').read())\n"
)
# What the CUDA 13 cuDNN asks for at run time and nothing in the demo provides.
CU13_WANTS = {"libcublasLt.so.13", "libnvrtc.so.13"}


_DROP = ("LD_LIBRARY_PATH", "LD_PRELOAD", "PYTHONPATH", "PYTHONHOME")


def _clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in _DROP}


def _cache_provides(*names: str) -> bool:
    cache = Path("/etc/ld.so.cache")
    data = cache.read_bytes() if cache.is_file() else b""
    return any(name.encode() in data for name in names)


def _mapped(maps: str) -> set[str]:
    return {line.split(maxsplit=5)[-1] for line in maps.splitlines() if "/" in line}


def _run_python(env: DemoEnv, code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [os.fspath(env.python), "-I", "-c", code],
        capture_output=True,
        text=True,
        env=_clean_env(),
        timeout=60,
        check=False,
    )


def _wheel_member(workdir: Path, wheel_glob: str, member: str) -> bytes:
    (wheel,) = (workdir / "wheels").glob(wheel_glob)
    with zipfile.ZipFile(wheel) as zf:
        return zf.read(member)


def _record_paths(site: Path, dist_info: str) -> list[str]:
    text = (site / dist_info / "RECORD").read_text()
    return [row[0] for row in csv.reader(io.StringIO(text)) if row]


def _check_trap(workdir: Path, env: DemoEnv) -> None:
    """The import succeeds, and maps the co-owned paths, which hold the cu13 wheel's bytes."""
    site = site_packages(env.venv)
    done = _run_python(env, PROBE)
    assert done.returncode == 0, done.stderr
    first, maps = done.stdout.split("\n", 1)
    # torch built for CUDA 12 bound a cuDNN built for CUDA 13, and said nothing.
    assert first.split() == ["12", "91300", "13", "120804"]
    mapped = _mapped(maps)
    assert os.path.realpath(site / COOWNED_PATH) in mapped
    assert os.path.realpath(site / "torch/lib/libtorch_cuda.so") in mapped
    assert len(COOWNED_PATHS) == 8
    for path in COOWNED_PATHS:
        cu13 = _wheel_member(workdir, "nvidia_cudnn_cu13-*.whl", path)
        cu12 = _wheel_member(workdir, "nvidia_cudnn_cu12-*.whl", path)
        assert cu12 != cu13, path
        assert (site / path).read_bytes() == cu13, path
        # Both RECORDs list the path; only the cu13 hash matches the bytes (effective owner).
        assert path in _record_paths(site, CU12_DIST)
        assert path in _record_paths(site, CU13_DIST)


@pytest.fixture(scope="module")
def compiled(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, DemoEnv]:
    workdir = tmp_path_factory.mktemp("demo") / "work"
    return workdir, build_demo(workdir)


# --------------------------------------------------------------------------------------
# the environment, compiled here
# --------------------------------------------------------------------------------------


def test_trap_loads_the_cu13_cudnn_silently(compiled: tuple[Path, DemoEnv]) -> None:
    workdir, env = compiled
    assert env.venv == workdir / "venv" and env.python == workdir / "venv/bin/python"
    _check_trap(workdir, env)


def test_objects_have_the_dynamic_sections_of_the_story(compiled: tuple[Path, DemoEnv]) -> None:
    workdir, env = compiled
    site = site_packages(env.venv)
    torch_c = read_dynamic(site / "torch/_C.abi3.so")
    assert torch_c.needed[0] == "libtorch_cuda.so"
    assert (torch_c.rpath, torch_c.runpath) == ("$ORIGIN/lib", None)
    torch_cuda = read_dynamic(site / "torch/lib/libtorch_cuda.so")
    assert torch_cuda.needed[:2] == ("libcudnn.so.9", "libcublas.so.12")
    assert torch_cuda.rpath == "$ORIGIN/../../nvidia/cudnn/lib:$ORIGIN/../../nvidia/cublas/lib"
    assert torch_cuda.runpath is None
    deps = read_dynamic(site / "torch/lib/libtorch_global_deps.so")
    assert (deps.needed[0], deps.runpath) == ("libcudart.so.12", None)
    assert deps.rpath == "$ORIGIN/../../nvidia/cuda_runtime/lib"
    cudart = read_dynamic(site / "nvidia/cuda_runtime/lib/libcudart.so.12")
    assert cudart.soname == "libcudart.so.12"
    cublas = read_dynamic(site / "nvidia/cublas/lib/libcublas.so.12")
    assert (cublas.soname, cublas.needed[0]) == ("libcublas.so.12", "libcublasLt.so.12")
    assert (cublas.rpath, cublas.runpath) == (None, "$ORIGIN")
    lt = read_dynamic(site / "nvidia/cublas/lib/libcublasLt.so.12")
    assert lt.soname == "libcublasLt.so.12"
    build = workdir / "build"
    cu12 = read_dynamic(build / demo_libs.LAYOUT["cudnn_cu12"])
    assert (cu12.soname, cu12.needed[0]) == ("libcudnn.so.9", "libcublas.so.12")
    assert (cu12.rpath, cu12.runpath) == (None, "$ORIGIN:$ORIGIN/../../cublas/lib")
    cu13 = read_dynamic(site / COOWNED_PATH)
    assert cu13.soname == "libcudnn.so.9" and "libcublas.so.12" not in cu13.needed
    assert (cu13.rpath, cu13.runpath) == (None, "$ORIGIN")
    for major in (12, 13):
        for name in demo_libs.CUDNN_SUBLIBRARIES:
            path = build / demo_libs.LAYOUT[demo_libs.cudnn_key(name, major)]
            sub = read_dynamic(path)
            assert (sub.soname, sub.rpath, sub.runpath) == (name, None, "$ORIGIN"), path
            assert not any(n.startswith(("libcu", "libnv")) for n in sub.needed), path
            # As in the real cuDNN, only adv and engines_precompiled name cuBLASLt and NVRTC.
            wants = {
                "libcudnn_adv.so.9": [f"libcublasLt.so.{major}"],
                "libcudnn_engines_precompiled.so.9": [
                    f"libcublasLt.so.{major}",
                    f"libnvrtc.so.{major}",
                ],
            }.get(name, [])
            assert list(rodata_sonames(os.fspath(path))) == wants, path
    for so in ("torch/_C.abi3.so", "torch/lib/libtorch_cuda.so", *COOWNED_PATHS):
        assert (site / so).stat().st_mode & stat.S_IXUSR


def test_import_torch_preloads_cudnn(compiled: tuple[Path, DemoEnv]) -> None:
    """torch/__init__.py alone (no torch._C) maps cuDNN: the real loader ran the preload."""
    _, env = compiled
    site = site_packages(env.venv)
    code = (
        "import sys, torch\nprint('torch._C' in sys.modules)\nprint(open('/proc/self/maps').read())"
    )
    done = _run_python(env, code)
    assert done.returncode == 0, done.stderr
    first, maps = done.stdout.split("\n", 1)
    assert first == "False"
    mapped = _mapped(maps)
    for path in (
        "torch/lib/libtorch_global_deps.so",
        "nvidia/cuda_runtime/lib/libcudart.so.12",
        "nvidia/cublas/lib/libcublasLt.so.12",
        "nvidia/cublas/lib/libcublas.so.12",
        COOWNED_PATH,
    ):
        assert os.path.realpath(site / path) in mapped, path
    assert not any("libtorch_cuda.so" in m for m in mapped)


def test_doctor_reports_what_the_state_holds(compiled: tuple[Path, DemoEnv]) -> None:
    """cudatx doctor on the demo: the trap, and the one true run-time gap of its CUDA 13 cuDNN."""
    _, env = compiled
    site = site_packages(env.venv)
    done = cudatx("doctor", "--python", env.venv, "--json", cwd=REPO, hide=_DROP)
    assert done.returncode == 1, done.stderr
    report = json.loads(done.stdout)
    # One cause: the CUDA 13 cuDNN installed over the CUDA 12 one, with all it breaks.
    (mixed,) = report["problems"]
    assert mixed["code"] == "mixed-cuda-major" and mixed["severity"] == "error"
    assert mixed["what"].startswith(f"{CU13} ") and " was installed over " in mixed["what"]
    assert "loads its CUDA 13 build" in mixed["what"]
    assert sorted(mixed["paths"]) == sorted(os.path.realpath(site / p) for p in COOWNED_PATHS)
    assert mixed["distributions"] == [CU13, CU12] and mixed["removes"] == [CU13]
    assert mixed["consequences"][0].startswith("torch loads 8 of its libraries: libcudnn.so.9")
    # the CUDA 13 cuDNN's own run-time loads, of CUDA 13 libraries nothing here provides
    failing = {
        line.split(" loads ")[1].split(" at run time")[0]
        for line in mixed["consequences"]
        if " at run time: " in line
    }
    if not _cache_provides(*CU13_WANTS):
        assert failing == CU13_WANTS
    assert report["fixes"] == [mixed["fix"]]
    assert mixed["fix"].startswith(f"cudatx remove {CU13} --repair --yes --python ")
    assert report["unprovided"] == []
    init_py = site / "torch" / "__init__.py"
    assert f"torch preload list: read from {init_py}" in report["notes"]


def test_demo_prints_commands_that_run_as_printed(tmp_path: Path) -> None:
    """`cudatx demo`: every command it shows names the demo's environment, shell-quoted, and
    its suggestion finds the demo's wheels: pasted elsewhere, with another venv active, the
    repair it suggests is planned for the demo and is safe."""
    keep = tmp_path / "demo; kept"
    shown = cudatx("demo", "--keep", keep, cwd=tmp_path, hide=_DROP)
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    venv = str(keep / "venv")
    commands = [shlex.split(ln[2:]) for ln in lines if ln.startswith("$ ")]
    assert [c[:2] for c in commands] == [
        ["cudatx", "doctor"],
        ["cudatx", "why"],
        ["cudatx", "remove"],
        ["cudatx", "remove"],
        ["cudatx", "trace"],
        ["cudatx", "remove"],
    ]
    assert all(c[c.index("--python") + 1] == venv for c in commands)
    # The plug-in only a run loads: safe to remove by what the files say, unsafe once the
    # run is traced, which the plan names.
    plugin_before, traced, plugin_after = shown.stdout.split("\n$ ")[4:7]
    assert plugin_before.splitlines()[1].startswith("Safe:")
    assert "recorded as trace" in traced
    assert plugin_after.splitlines()[1].startswith("Unsafe: 1 library would not load.")
    assert "loaded by the traced run `python -c 'import cudatx_demo_serve;" in plugin_after
    (suggested,) = [ln for ln in lines if ln.startswith("Suggested: ")]
    pasted = shlex.split(suggested.removeprefix("Suggested: ").split("  (")[0])
    wheels = str(keep / "wheels")
    assert pasted == [
        *("cudatx", "remove", CU13, "--python", venv, "--offline", "--find-links", wheels),
        *("--dry-run", "--repair"),
    ]
    other = tmp_path / "other"
    other.mkdir()
    done = cudatx(*pasted[1:], cwd=other, hide=_DROP, env={"VIRTUAL_ENV": str(other)})
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith("Safe:") and f" - {CU13}==" in done.stdout, done.stdout


def test_uninstalling_cu13_leaves_cu12_hollow_and_torch_broken(tmp_path: Path) -> None:
    """design.md section 1, the real failure: removing cu13 deletes the co-owned file."""
    if _cache_provides("libcudnn.so.9"):
        pytest.skip("this machine's ld.so.cache provides libcudnn.so.9")
    env = build_demo(tmp_path / "work")
    uv_uninstall(env.venv, [CU13])
    site = site_packages(env.venv)
    assert not any((site / path).exists() for path in COOWNED_PATHS)
    assert (site / CU12_DIST).is_dir()  # still "installed"
    done = _run_python(env, "import torch._C")
    assert done.returncode != 0
    assert "libcudnn.so.9: cannot open shared object file" in done.stderr


# --------------------------------------------------------------------------------------
# the prebuilt copies
# --------------------------------------------------------------------------------------


def test_prebuilt_copies_match_the_sources() -> None:
    libs = demo_libs.prebuilt_libraries("x86_64")
    assert libs.read("torch_c")[:4] == b"\x7fELF"
    for path in demo_libs.PREBUILT_ROOT.rglob("*"):
        # Never a name the scan of an environment holding cudatx would take for a library.
        assert ".so" not in path.name, path


@pytest.mark.skipif(os.uname().machine != "x86_64", reason="prebuilt copies are x86_64 only")
def test_prebuilt_copies_were_linked_as_compiled_now(compiled: tuple[Path, DemoEnv]) -> None:
    """The digest covers the sources, not the link flags: compare the dynamic sections."""
    workdir, _ = compiled
    libs = demo_libs.prebuilt_libraries("x86_64")
    assert set(libs.files) == set(demo_libs.LAYOUT)
    for key, rel in demo_libs.LAYOUT.items():
        built, shipped = read_dynamic(workdir / "build" / rel), read_dynamic(libs.files[key])
        assert (shipped.soname, shipped.rpath, shipped.runpath) == (
            built.soname,
            built.rpath,
            built.runpath,
        ), key
        assert shipped.needed == built.needed, key


@pytest.mark.skipif(os.uname().machine != "x86_64", reason="prebuilt copies are x86_64 only")
def test_prebuilt_environment_shows_the_same_trap(tmp_path: Path) -> None:
    env = build_demo(tmp_path / "work", compiler="none")
    assert "prebuilt for x86_64" in env.story[0]
    assert not (tmp_path / "work" / "build").exists()
    _check_trap(tmp_path / "work", env)


@pytest.mark.skipif(os.uname().machine != "x86_64", reason="prebuilt copies are x86_64 only")
def test_missing_compiler_falls_back_to_prebuilt(tmp_path: Path) -> None:
    env = build_demo(tmp_path / "work", compiler="/nonexistent/cc")
    assert "'/nonexistent/cc' not found on PATH" in env.story[0]
    assert "prebuilt for x86_64" in env.story[0]


# --------------------------------------------------------------------------------------
# refusals
# --------------------------------------------------------------------------------------


def test_no_compiler_and_no_prebuilt_copy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(demo_libs.platform, "machine", lambda: "riscv64")
    with pytest.raises(
        DemoError, match=r"not found on PATH.*no prebuilt demo libraries for riscv64"
    ):
        build_demo(tmp_path / "work", compiler="/nonexistent/cc")


def test_uv_failure_carries_its_last_stderr_line(tmp_path: Path) -> None:
    fake = tmp_path / "fake-uv"
    fake.write_text(
        "#!/bin/sh\necho 'warning: first' >&2\necho 'error: no venv for you' >&2\nexit 2\n"
    )
    fake.chmod(0o755)
    with pytest.raises(DemoError) as info:
        build_demo(tmp_path / "work", uv=os.fspath(fake))
    assert info.value.message == "uv venv failed: error: no venv for you"
    assert info.value.exit_code == 6 and info.value.command[0] == os.fspath(fake)


def test_non_empty_folder_is_refused(tmp_path: Path) -> None:
    (tmp_path / "keep.txt").write_text("mine")
    with pytest.raises(DemoError, match="not empty"):
        build_demo(tmp_path)
    assert [p.name for p in tmp_path.iterdir()] == ["keep.txt"]


# --------------------------------------------------------------------------------------
# cudatx.demo.wheelfile
# --------------------------------------------------------------------------------------


def test_write_wheel_names_metadata_record_and_modes(tmp_path: Path) -> None:
    wheel = write_wheel(
        tmp_path,
        "Torch.Demo_x",
        "2.08.0+CU128",
        {"t/__init__.py": b"", "t/lib/libx.so.1.2": b"\x7fELF", "t/bin": b"#!"},
        requires=["a>=1", 'b; python_version >= "3.8"'],
        summary="a stand-in",
        modes={"t/bin": 0o755},
    )
    assert wheel.name == "torch_demo_x-2.8.0+cu128-py3-none-any.whl"
    di = "torch_demo_x-2.8.0+cu128.dist-info"
    with zipfile.ZipFile(wheel) as zf:
        assert zf.namelist()[-1] == f"{di}/RECORD"
        metadata = zf.read(f"{di}/METADATA").decode()
        assert metadata.startswith("Metadata-Version: 2.1\nName: Torch.Demo_x\n")
        assert "Summary: a stand-in\n" in metadata
        assert 'Requires-Dist: b; python_version >= "3.8"\n' in metadata
        assert "Root-Is-Purelib: true\n" in zf.read(f"{di}/WHEEL").decode()
        rows = list(csv.reader(io.StringIO(zf.read(f"{di}/RECORD").decode())))
        assert rows[-1] == [f"{di}/RECORD", "", ""]
        assert sorted(r[0] for r in rows) == sorted(zf.namelist())
        for path, digest, size in rows[:-1]:
            assert (digest, int(size)) == (record_hash(zf.read(path)), len(zf.read(path)))
        modes = {i.filename: (i.external_attr >> 16) & 0o777 for i in zf.infolist()}
    assert modes["t/lib/libx.so.1.2"] == 0o755 and modes["t/bin"] == 0o755
    assert modes["t/__init__.py"] == 0o644
    assert record_hash(b"") == "sha256=47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU"


@pytest.mark.parametrize(
    "files",
    [
        {"../evil": b""},
        {"/abs": b""},
        {"x-1.0.dist-info/RECORD": b""},
        {"a//b": b"", "a/b": b""},
    ],
)
def test_write_wheel_refuses_bad_members(tmp_path: Path, files: dict[str, bytes]) -> None:
    with pytest.raises(ValueError):
        write_wheel(tmp_path, "x", "1.0", files)
