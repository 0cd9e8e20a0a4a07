"""What a file is decides what a loss counts for (cudatx.analysis.ownership.is_code_file),
judged with real wheels, real uv and the real interpreter.

`hdr-cu11` and `hdr-cu12` overlap only in a header (`nvidia/hdr/include/api.h`, other bytes),
as nvidia-cudnn-cu12 overlaps torch 2.0's cu11 wheels: each library has its own path and
`consumer`'s extension loads the cu11 one before and after. `lib-one` and `lib-two` overlap
in a library; `blob-one` and `blob-two` in `share/tool`, an ELF object with no library name
and no executable bit: code by what it is, not by its name or folder.
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from cudatx.analysis.ownership import is_code_file
from tests.support import (
    build_wheel,
    compile_extension,
    compile_lib,
    ext_suffix,
    make_venv,
    site_packages,
    uv_install,
)
from tests.support.cli import cudatx

TAG = "py3-none-linux_x86_64"
HEADER = "nvidia/hdr/include/api.h"


@dataclass(frozen=True)
class World:
    wheels: Path
    hdr11: Path
    consumer: Path
    lib_one: Path
    blob_one: Path


def _lib(out: Path, text: str) -> Path:
    source = f'const char tag[] = "{text}";\nint tag_len(void) {{ return (int)sizeof(tag); }}\n'
    return compile_lib(out, soname=out.name, source=source)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> World:
    root = tmp_path_factory.mktemp("kinds")
    out = root / "wheels"
    lib11 = _lib(root / "11" / "libhdr.so.11", "hdr 11")
    hdr = {}
    for major, lib in (("11", lib11), ("12", _lib(root / "12" / "libhdr.so.12", "hdr 12"))):
        hdr[major] = build_wheel(
            out,
            f"hdr-cu{major}",
            "1.0",
            {HEADER: f"#define HDR_MAJOR {major}\n".encode(), f"nvidia/hdr/lib/{lib.name}": lib},
            tag=TAG,
        )
    ext = compile_extension(
        root / "ext", "_use", needed=[lib11], runpath="$ORIGIN/../nvidia/hdr/lib"
    )
    consumer = build_wheel(
        out,
        "consumer",
        "1.0",
        {"consumer/__init__.py": b"from . import _use\n", f"consumer/_use{ext_suffix()}": ext},
        requires=["hdr-cu11"],
        tag=TAG,
    )
    pairs = {}
    for name, path in (("lib", "nvidia/shared/lib/libshared.so.1"), ("blob", "share/tool")):
        for n in ("one", "two"):
            built = _lib(root / name / n / "libshared.so.1", f"{name} {n}")
            member: bytes | Path = built.read_bytes() if name == "blob" else built  # mode 644
            pairs[f"{name}-{n}"] = build_wheel(out, f"{name}-{n}", "1.0", {path: member}, tag=TAG)
    return World(out, hdr["11"], consumer, pairs["lib-one"], pairs["blob-one"])


def _plan(venv: Path, world: World, *args: str) -> tuple[int, dict[str, Any], str]:
    links = ("--offline", "--find-links", world.wheels, "--python", venv)
    done = cudatx("install", *args, "--dry-run", "--json", *links)
    assert done.returncode in (0, 1), done.stderr
    text = cudatx("install", *args, "--dry-run", *links).stdout
    return done.returncode, json.loads(done.stdout), text


def _imports(venv: Path, module: str) -> bool:
    python = venv / "bin" / "python"
    return subprocess.run([str(python), "-c", f"import {module}"], check=False).returncode == 0


def test_an_overlap_in_headers_only_is_said_and_not_counted(world: World, tmp_path: Path) -> None:
    venv = make_venv(tmp_path / "venv")
    uv_install(venv, [world.hdr11, world.consumer])
    assert _imports(venv, "consumer")
    code, plan, text = _plan(venv, world, "hdr-cu12")
    assert code == 0 and plan["safe"], plan
    (loss,) = plan["losses"]
    assert loss["name"] == "hdr-cu11" and loss["other_bytes"] == [HEADER]
    assert loss["code"] is False
    assert (
        f" ~ hdr-cu11==1.0 would hold other bytes at {HEADER} (no code file changes: headers, "
        "docs or data only; not counted without --strict)"
    ) in text
    strict, strict_plan, _ = _plan(venv, world, "hdr-cu12", "--strict")
    assert strict == 1 and not strict_plan["safe"]
    # the refusal names the section that counts under --strict, and changes nothing
    links = ("--offline", "--find-links", world.wheels, "--python", venv)
    refused = cudatx("install", "hdr-cu12", "--strict", "--yes", "--ignore-running", *links)
    assert refused.returncode == 1, refused.stderr
    assert '(see "Would overwrite" in the plan)' in refused.stderr, refused.stderr
    assert "hdr-cu12" not in cudatx("doctor", "--python", venv, "--json").stdout
    # Reality: uv writes the header over; every load works as before.
    uv_install(venv, [world.wheels / world.hdr11.name.replace("cu11", "cu12")])
    site = site_packages(venv)
    assert (site / HEADER).read_bytes() == b"#define HDR_MAJOR 12\n"
    assert _imports(venv, "consumer")
    doctor = cudatx("doctor", "--python", venv, "--json")
    report = json.loads(doctor.stdout)
    assert doctor.returncode == 0 and report["errors"] == 0, report
    (warning,) = [p for p in report["problems"] if p["code"] == "co-owned"]
    assert "no code file: headers, docs or data only" in warning["why"]


@pytest.mark.parametrize("pair", ["lib", "blob"])
def test_an_overlap_in_code_is_unsafe(world: World, tmp_path: Path, pair: str) -> None:
    venv = make_venv(tmp_path / "venv")
    uv_install(venv, [world.lib_one if pair == "lib" else world.blob_one])
    code, plan, text = _plan(venv, world, f"{pair}-two")
    assert code == 1 and not plan["safe"]
    (loss,) = plan["losses"]
    assert loss["name"] == f"{pair}-one" and loss["code"] is True
    assert "no code file changes" not in text


def test_what_a_file_is_is_read_from_it(tmp_path: Path) -> None:
    elf = _lib(tmp_path / "libx.so.1", "x")
    data = tmp_path / "tool"
    data.write_bytes(elf.read_bytes())  # an ELF object by its magic, mode 644
    data.chmod(0o644)
    script = tmp_path / "run"
    script.write_text("#!/bin/sh\n")
    script.chmod(0o755)
    header = tmp_path / "api.h"
    header.write_text("#define X 1\n")
    doc = tmp_path / "README"
    doc.write_text("hello\n")
    assert is_code_file(str(data)) and is_code_file(str(script)) and is_code_file(str(elf))
    assert is_code_file(str(tmp_path / "mod.py"))  # by its name, there or not
    assert not is_code_file(str(header)) and not is_code_file(str(doc))
