"""A package that stays and loses files is a break (the seed's own mechanism), judged by reality.

Small real wheels installed by real uv; each plan from `python -m cudatx ... --dry-run --json`;
reality from the real `uv pip uninstall` (or cudatx's own apply) in a copy and a real import:

- the cuDNN pair without torch: nvidia-cudnn-cu12, then nvidia-cudnn-cu13 installed over it
  (the same paths, other bytes). Removing cu13 leaves cu12 installed and empty: the "cu12 is
  metadata-only" illusion of design.md section 1, made by nothing that loads its files;
- an opencv-like pair: `cvfull` and `cvheadless` both ship `cv2/` (their `__init__.py` and
  data the same bytes, their extension module other bytes), as opencv-python and
  opencv-python-headless do;
- a namespace file many wheels ship with the same bytes, which a removal must not count as
  a loss, and which cudatx's own apply keeps where uv alone would delete it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.support import (
    build_wheel,
    compile_extension,
    compile_lib,
    ext_suffix,
    make_venv,
    observe_import,
    site_packages,
    uv_install,
    uv_uninstall,
    venv_python,
)
from tests.support.cli import cudatx

SUFFIX = ext_suffix()
CUDNN = "nvidia/cudnn/lib/libcudnn.so.9"
CU12, CU13 = "nvidia-cudnn-cu12", "nvidia-cudnn-cu13"


@dataclass(frozen=True)
class World:
    wheels: Path
    cudnn12: Path
    cudnn13: Path
    cvfull: Path
    cvheadless: Path
    ns: tuple[Path, ...]  # three wheels sharing one namespace file, the same bytes


def _lib(out: Path, text: str) -> Path:
    source = f'const char tag[] = "{text}";\nint tag_len(void) {{ return (int)sizeof(tag); }}\n'
    return compile_lib(out, soname=out.name, runpath="$ORIGIN", source=source)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> World:
    root = tmp_path_factory.mktemp("losses")
    out = root / "wheels"
    cudnn = {
        tag: build_wheel(
            out,
            name,
            version,
            {
                CUDNN: _lib(root / tag / "libcudnn.so.9", f"cuDNN for CUDA {tag}"),
                "nvidia/cudnn/include/cudnn.h": b"#define CUDNN_MAJOR 9\n",  # the same bytes
            },
        )
        for tag, name, version in (("12", CU12, "9.10.2.21"), ("13", CU13, "9.13.0.50"))
    }
    init = b"from cv2.cv2 import *  # noqa\n"
    cv: dict[str, Path] = {}
    for name in ("cvfull", "cvheadless"):
        cv[name] = build_wheel(
            out,
            name,
            "4.10.0",
            {
                "cv2/__init__.py": init,
                f"cv2/cv2{SUFFIX}": _cv2_ext(root / name, name),
                "cv2/data/haar.xml": b"<cascade/>\n",
                f"{name}_only/__init__.py": b"",
            },
        )
    ns = tuple(
        build_wheel(
            out,
            f"nspart-{n}",
            "1.0",
            {"nsroot/__init__.py": b"", f"nsroot/part{n}/__init__.py": f"N = {n}\n".encode()},
        )
        for n in (1, 2, 3)
    )
    return World(out, cudnn["12"], cudnn["13"], cv["cvfull"], cv["cvheadless"], ns)


def _cv2_ext(folder: Path, build: str) -> Path:
    """An extension module `cv2` (imported as cv2.cv2) whose bytes differ per build."""
    source = (
        "#include <Python.h>\n"
        f'static const char build[] = "{build}";\n'
        'static struct PyModuleDef def = {PyModuleDef_HEAD_INIT, "cv2", build, -1, NULL};\n'
        "PyMODINIT_FUNC PyInit_cv2(void) { return PyModule_Create(&def); }\n"
    )
    return compile_extension(folder, "cv2", source=source)


def _venv(root: Path, *groups: list[Path]) -> Path:
    """A venv with each group installed by its own `uv pip install --no-deps`, in order."""
    venv = make_venv(root / "venv")
    for group in groups:
        uv_install(venv, group)
    return venv


def _plan(venv: Path, world: World, *args: str) -> tuple[int, dict[str, Any]]:
    done = cudatx(
        "remove", *args, "--dry-run", "--json", "--python", venv,
        "--offline", "--find-links", world.wheels,
    )  # fmt: skip
    assert done.returncode in (0, 1), done.stderr
    plan: dict[str, Any] = json.loads(done.stdout)
    return done.returncode, plan


def _loss(plan: dict[str, Any], name: str) -> dict[str, Any]:
    (found,) = [x for x in plan["losses"] if x["name"] == name]
    return found


# -- the cuDNN pair, no torch ---------------------------------------------------------------


def test_removing_the_twin_that_won_the_bytes_is_unsafe_and_names_what_stays_and_loses(
    world: World, tmp_path: Path
) -> None:
    venv = _venv(tmp_path, [world.cudnn12], [world.cudnn13])
    code, plan = _plan(venv, world, CU13)
    assert code == 1 and not plan["safe"]
    loss = _loss(plan, CU12)
    assert loss["missing"] == [CUDNN]  # the header, the same bytes in both, is kept
    assert plan["left_hollow"] == [{"name": CU12, "version": "9.10.2.21"}]
    text = cudatx("remove", CU13, "--dry-run", "--python", venv).stdout
    assert f"{CU12}==9.10.2.21 would lose {CUDNN}" in text
    # Reality: the real uninstall leaves cu12 installed and its library gone.
    uv_uninstall(venv, [CU13])
    assert not (site_packages(venv) / CUDNN).exists()
    assert (site_packages(venv) / "nvidia/cudnn/include/cudnn.h").exists() is False


def test_the_same_removal_with_repair_is_safe_and_cudatx_s_apply_leaves_cu12_whole(
    world: World, tmp_path: Path
) -> None:
    venv = _venv(tmp_path, [world.cudnn12], [world.cudnn13])
    code, plan = _plan(venv, world, CU13, "--repair")
    assert code == 0 and plan["safe"] and plan["losses"] == [], plan
    done = cudatx(
        "remove", CU13, "--repair", "--yes", "--python", venv,
        "--offline", "--find-links", world.wheels,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    site = site_packages(venv)
    assert (site / CUDNN).read_bytes() == _member(world.cudnn12, CUDNN)
    doctor = cudatx("doctor", "--python", venv, "--json")
    assert doctor.returncode == 0, doctor.stdout


def test_a_plain_plan_suggests_the_repair_only_because_it_can_make_it_safe(
    world: World, tmp_path: Path
) -> None:
    venv = _venv(tmp_path, [world.cudnn12], [world.cudnn13])
    text = cudatx("remove", CU13, "--dry-run", "--python", venv).stdout
    assert "--repair" in text and "still unsafe" not in text


def _member(wheel: Path, name: str) -> bytes:
    from zipfile import ZipFile

    with ZipFile(wheel) as zf:
        return zf.read(name)


# -- the opencv-like pair -------------------------------------------------------------------


@pytest.mark.parametrize("last", ["cvheadless", "cvfull"])
def test_removing_either_of_the_pair_breaks_the_other_s_import_as_the_real_uninstall_does(
    world: World, tmp_path: Path, last: str
) -> None:
    first = "cvfull" if last == "cvheadless" else "cvheadless"
    wheel = {"cvfull": world.cvfull, "cvheadless": world.cvheadless}
    venv = _venv(tmp_path, [wheel[first]], [wheel[last]])
    assert observe_import(venv_python(venv), "cv2").ok
    # Removing either leaves the other without the extension module its RECORD lists.
    for leaving, staying in ((last, first), (first, last)):
        code, plan = _plan(venv, world, leaving)
        assert code == 1 and not plan["safe"], plan
        loss = _loss(plan, staying)
        assert loss["missing"] == [f"cv2/cv2{SUFFIX}"]
        assert loss["imports"] == ["cv2.cv2"]
        # The same bytes in both RECORDs are no loss: cudatx keeps them (a note says so).
        assert any("cv2/__init__.py" in n and "keeps" in n for n in plan["notes"]), plan
        code, repaired = _plan(venv, world, leaving, "--repair")
        assert code == 0 and repaired["safe"], repaired
    # Reality: the real uninstall of the last one installed breaks the other's import.
    uv_uninstall(venv, [last])
    seen = observe_import(venv_python(venv), "cv2")
    assert not seen.ok, "the real uninstall left cv2 importing: the plan would be a false alarm"


def test_cudatx_s_own_removal_keeps_the_same_bytes_and_repair_restores_the_rest(
    world: World, tmp_path: Path
) -> None:
    venv = _venv(tmp_path, [world.cvfull], [world.cvheadless])
    done = cudatx(
        "remove", "cvheadless", "--repair", "--yes", "--python", venv,
        "--offline", "--find-links", world.wheels,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert observe_import(venv_python(venv), "cv2").ok
    assert cudatx("doctor", "--python", venv).returncode == 0


# -- a namespace file of the same bytes ---------------------------------------------------


def test_a_file_every_owner_lists_with_the_same_bytes_is_no_loss_and_cudatx_keeps_it(
    world: World, tmp_path: Path
) -> None:
    venv = _venv(tmp_path, list(world.ns))
    code, plan = _plan(venv, world, "nspart-1")
    assert code == 0 and plan["safe"] and plan["losses"] == [], plan
    assert plan["left_hollow"] == []
    # What uv alone does: the shared __init__.py is gone for the two that stay.
    copy = make_venv(tmp_path / "plain")
    uv_install(copy, list(world.ns))
    uv_uninstall(copy, ["nspart-1"])
    assert not (site_packages(copy) / "nsroot/__init__.py").exists()
    # What cudatx's apply does: kept, and doctor finds nothing missing.
    done = cudatx("remove", "nspart-1", "--yes", "--python", venv)
    assert done.returncode == 0, done.stderr
    site = site_packages(venv)
    assert (site / "nsroot/__init__.py").exists()
    assert not (site / "nsroot/part1").exists()
    doctor = cudatx("doctor", "--python", venv, "--json")
    assert doctor.returncode == 0 and json.loads(doctor.stdout)["warnings"] == 0, doctor.stdout
    # The rollback gives nspart-1 back whole.
    assert cudatx("rollback", "--yes", "--python", venv).returncode == 0
    assert (site / "nsroot/part1/__init__.py").exists()
    assert cudatx("doctor", "--python", venv).returncode == 0


# -- installs that write over a staying distribution's files --------------------------------


def _install(venv: Path, world: World, *args: str) -> tuple[int, dict[str, Any], str]:
    links = ("--offline", "--find-links", world.wheels, "--python", venv)
    done = cudatx("install", *args, "--dry-run", "--json", *links)
    assert done.returncode in (0, 1), done.stderr
    text = cudatx("install", *args, "--dry-run", *links).stdout
    plan: dict[str, Any] = json.loads(done.stdout)
    return done.returncode, plan, text


def test_installing_a_twin_over_its_twin_is_unsafe_and_the_replacement_is_suggested(
    world: World, tmp_path: Path
) -> None:
    """The event that made the seed's mess: cu13's wheel written over cu12's files. The
    suggestion uninstalls cu12 in the same transaction; applied, cu13 is whole, cu12 gone."""
    venv = _venv(tmp_path, [world.cudnn12])
    code, plan, text = _install(venv, world, CU13)
    assert code == 1 and not plan["safe"]
    assert _loss(plan, CU12)["other_bytes"] == [CUDNN]
    assert plan["overwritten"] == [{"name": CU12, "version": "9.10.2.21"}]
    assert plan["replacing"] == [{"name": CU12, "version": "9.10.2.21"}]
    assert f" ~ {CU12}==9.10.2.21 would hold other bytes at {CUDNN}" in text
    (suggested,) = [ln for ln in text.splitlines() if ln.startswith("Suggested:")]
    assert f"--replacing {CU12} --dry-run" in suggested
    code, replaced, _ = _install(venv, world, CU13, "--replacing", CU12)
    assert code == 0 and replaced["safe"] and replaced["losses"] == [], replaced
    assert [p["name"] for p in replaced["remove"]] == [CU12]
    links = ("--offline", "--find-links", world.wheels, "--python", venv)
    done = cudatx("install", CU13, "--replacing", CU12, "--yes", *links)
    assert done.returncode == 0, done.stderr
    site = site_packages(venv)
    assert (site / CUDNN).read_bytes() == _member(world.cudnn13, CUDNN)
    assert not list(site.glob("nvidia_cudnn_cu12-*.dist-info"))
    assert cudatx("doctor", "--python", venv).returncode == 0


def test_writing_the_same_bytes_over_a_shared_file_overwrites_nothing(
    world: World, tmp_path: Path
) -> None:
    venv = _venv(tmp_path, [world.ns[0]])
    code, plan, text = _install(venv, world, "nspart-2")
    assert code == 0 and plan["safe"], plan
    assert plan["overwritten"] == [] and plan["losses"] == [] and plan["replacing"] == []
    assert "overwrite" not in text.lower()


# -- the hook judges the same change ------------------------------------------------------


def test_check_requirements_rejects_dropping_the_twin_that_won_the_bytes(
    world: World, tmp_path: Path
) -> None:
    """The pre-commit hook's judgement of the cuDNN pair: a pinned file that drops cu13 (sync:
    the pins list every installed distribution, as committed) leaves cu12 hollow: exit 1,
    with the loss named; the same file is accepted once cu13 is gone the safe way."""
    venv = _venv(tmp_path, [world.cudnn12], [world.cudnn13])
    reqs = tmp_path / "requirements.txt"
    reqs.write_text(f"{CU12}==9.10.2.21\n")
    links = ("--offline", "--find-links", world.wheels)
    done = cudatx(
        "check-requirements", reqs, "--mode", "sync", "--python", venv, *links, cwd=tmp_path
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"{CU12}==9.10.2.21 would lose {CUDNN}" in done.stdout, done.stdout
