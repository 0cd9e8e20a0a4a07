"""`cudatx trace`: a load only a running workload makes, recorded by the real loader and
counted by plans and doctor, on real compiled libraries in real wheels installed by real uv.

The workload: `plugapp` (a wheel) holds `libhost.so`, which a Python function loads with
ctypes and asks to `dlopen` a plug-in by a name the Python code passes (nothing in any ELF
names it: no DT_NEEDED, no soname-shaped string in .rodata); the plug-in `libplug.so` comes
from another wheel, `plugwheel`, found through libhost's DT_RUNPATH. cudatx's static model
cannot know the load; the trace records it, and the real loader judges the removal.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from cudatx.discover.target import start_query
from cudatx.models import Status
from cudatx.scan import scan
from tests.support import (
    build_wheel,
    compile_lib,
    make_venv,
    parse_ld_debug,
    site_packages,
    uv_install,
    uv_uninstall,
    venv_python,
)
from tests.support.cli import cudatx

HOST_SOURCE = r"""
#include <dlfcn.h>
#include <stdio.h>

/* Loads the plug-in named by the caller (no name of it in this object) and calls it. */
int plug_call(const char *name) {
    void *handle = dlopen(name, RTLD_NOW);
    if (handle == NULL) {
        fprintf(stderr, "%s\n", dlerror());
        return -1;
    }
    int (*answer)(void) = (int (*)(void))dlsym(handle, "plug_answer");
    return answer != NULL ? answer() : -2;
}
"""

PLUG_SOURCE = "int plug_answer(void) { return %d; }\n"

PLUGAPP_INIT = """\
import ctypes
import os

_HOST = os.path.join(os.path.dirname(__file__), "libhost.so")


def run(name):
    answer = ctypes.CDLL(_HOST).plug_call(name.encode())
    if answer < 0:
        raise OSError(f"plug-in {name} did not load")
    return answer
"""

# The workload: the plug-in's name is given here, at run time.
WORKLOAD = "import plugapp; print('answer', plugapp.run('lib' + 'plug.so'))"
PLUG = "libplug.so"


@dataclass(frozen=True)
class World:
    venv: Path
    site: Path
    wheels: Path

    def python(self, code: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(venv_python(self.venv)), "-c", code],
            capture_output=True,
            text=True,
            check=False,
            timeout=60,
        )


def _plug_wheel(out: Path, version: str, answer: int) -> Path:
    lib = compile_lib(out / version / PLUG, soname=PLUG, source=PLUG_SOURCE % answer)
    return build_wheel(out, "plugwheel", version, {f"plugwheel/lib/{PLUG}": lib})


@pytest.fixture
def w(tmp_path: Path) -> World:
    build = tmp_path / "build"
    host = compile_lib(
        build / "libhost.so",
        soname="libhost.so",
        source=HOST_SOURCE,
        runpath="$ORIGIN/../plugwheel/lib",
    )
    wheels = tmp_path / "wheels"
    app = build_wheel(
        wheels,
        "plugapp",
        "1.0",
        {"plugapp/__init__.py": PLUGAPP_INIT.encode(), "plugapp/libhost.so": host},
    )
    plug = _plug_wheel(wheels, "1.0", 42)
    venv = make_venv(tmp_path / "venv")
    uv_install(venv, [app, plug])
    return World(venv=venv, site=site_packages(venv), wheels=wheels)


def _plan(w: World, *names: str) -> tuple[int, dict[str, Any]]:
    done = cudatx("remove", *names, "--dry-run", "--json", "--python", w.venv)
    assert done.returncode in (0, 1), done.stderr
    return done.returncode, json.loads(done.stdout)


def _trace(w: World, *command: str) -> subprocess.CompletedProcess[str]:
    return cudatx("trace", "--python", w.venv, "--", *command, cwd=w.venv.parent)


def test_a_traced_dlopen_makes_the_removal_unsafe_and_the_real_loader_agrees(w: World) -> None:
    # Nothing names the plug-in: the static model sees no load of it.
    code, plan = _plan(w, "plugwheel")
    assert code == 0 and plan["safe"], plan
    assert plan["traces"] == []

    # The run: its own stdout and exit code pass through; the record says what it loaded.
    done = _trace(w, "python", "-c", WORKLOAD)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "answer 42\n"
    assert "recorded as trace" in done.stderr
    listed = json.loads(cudatx("trace", "--list", "--json", "--python", w.venv).stdout)
    (record,) = listed["traces"]
    assert record["stale"] is None and record["exit_code"] == 0
    loads = [ld for p in record["processes"] for ld in p["loads"]]
    plug = next(ld for ld in loads if ld["name"] == PLUG)
    assert plug["kind"] == "dlopen"
    assert plug["by"].endswith("plugapp/libhost.so")
    assert os.path.samefile(plug["path"], w.site / "plugwheel/lib" / PLUG)
    host = next(ld for ld in loads if ld["path"].endswith("plugapp/libhost.so"))
    assert host["kind"] == "dlopen"  # by path, from ctypes

    # The plan now counts the observed load, and names the run.
    code, plan = _plan(w, "plugwheel")
    assert code == 1 and not plan["safe"], plan
    (broken,) = [b for b in plan["broken"] if b["soname"] == PLUG]
    assert broken["evidence"] == "observed"
    assert broken["needed_by"].endswith("plugapp/libhost.so")
    assert broken["provider_owners"] == ["plugwheel"]
    assert broken["traces"] == [record["id"]]
    (run,) = plan["traces"]
    assert run["id"] == record["id"] and run["stale"] is None
    assert "plugapp.run" in run["command"]
    text = cudatx("remove", "plugwheel", "--dry-run", "--python", w.venv).stdout
    assert text.startswith("Unsafe: 1 library would not load.")
    assert f"loaded by the traced run `{shlex.join(['python', '-c', WORKLOAD])}`" in text

    # doctor: healthy, and says what it counts.
    doctor = json.loads(cudatx("doctor", "--json", "--python", w.venv).stdout)
    assert doctor["errors"] == 0, doctor["problems"]
    assert any("count as observed" in n for n in doctor["notes"]), doctor["notes"]
    why = json.loads(cudatx("why", PLUG, "--json", "--python", w.venv).stdout)
    (needer,) = why["routes"][why["answer"]]["needed_by"]
    assert needer["evidence"] == "observed" and needer["role"].startswith("seen in the traced")

    # The real loader as judge: uninstall it for real, and run the workload again.
    uv_uninstall(w.venv, ["plugwheel"])
    again = w.python(WORKLOAD)
    assert again.returncode != 0
    assert f"{PLUG}: cannot open shared object file" in again.stderr


def test_a_stale_record_is_not_counted(w: World, tmp_path: Path) -> None:
    assert _trace(w, "python", "-c", WORKLOAD).returncode == 0
    assert _plan(w, "plugwheel")[0] == 1
    # The plug-in replaced after the run (a new build of the wheel, same path): the record
    # says what loaded before, not now.
    newer = _plug_wheel(w.wheels, "2.0", 43)
    uv_install(w.venv, [newer])
    assert w.python(WORKLOAD).stdout == "answer 43\n"
    code, plan = _plan(w, "plugwheel")
    assert code == 0 and plan["safe"], plan
    (run,) = plan["traces"]
    assert run["stale"] is not None and PLUG in run["stale"]
    assert any("is stale" in n for n in plan["notes"])
    doctor = json.loads(cudatx("doctor", "--json", "--python", w.venv).stdout)
    assert doctor["errors"] == 0 and doctor["warnings"] == 0, doctor["problems"]
    assert any("is stale" in n and "not counted" in n for n in doctor["notes"])
    listed = cudatx("trace", "--list", "--python", w.venv).stdout
    assert "  stale  " in listed and "not counted" in listed
    # Cleared, it is gone from plans too.
    assert cudatx("trace", "--clear", "--python", w.venv).returncode == 0
    assert _plan(w, "plugwheel")[1]["traces"] == []


def test_the_record_matches_what_the_judge_reads(w: World, tmp_path: Path) -> None:
    """cudatx's reading of the loader's report against tests/support/judge.py's, on the same
    run: every object glibc mapped by a dlopen, with its requester and file."""
    done = _trace(w, "python", "-c", WORKLOAD)
    assert done.returncode == 0
    record = json.loads(cudatx("trace", "--list", "--json", "--python", w.venv).stdout)["traces"][0]
    ours = {
        (ld["name"], ld["by"], os.path.realpath(ld["path"]))
        for p in record["processes"]
        for ld in p["loads"]
        if ld["kind"] == "dlopen"
    }
    report = tmp_path / "ld"
    env = {**os.environ, "LD_DEBUG": "libs,files", "LD_DEBUG_OUTPUT": str(report)}
    subprocess.run(
        [str(venv_python(w.venv)), "-c", WORKLOAD], env=env, check=True, capture_output=True
    )
    (found,) = tmp_path.glob("ld.*")
    judged = {
        (r.name, r.needed_by, r.provider_realpath)
        for r in parse_ld_debug(found.read_text())
        if r.kind == "dlopen" and r.found and not r.reused
    }
    assert ours == judged
    assert any(name == PLUG for name, _, _ in ours)


def test_a_traced_load_that_fails_now_is_doctor_s_error(w: World, tmp_path: Path) -> None:
    """The run found a plug-in outside the environment, through its own LD_LIBRARY_PATH:
    the record keeps that path and is replayed with it; once the plug-in is gone from there
    (nothing of the environment changed: the record stays fresh), doctor says the run's load
    fails, naming the run, as the real loader does when the command runs again."""
    outside = tmp_path / "outside"
    compile_lib(outside / "libextra.so", soname="libextra.so", source=PLUG_SOURCE % 7)
    code = "import plugapp; print('answer', plugapp.run('libextra.so'))"
    done = cudatx(
        "trace", "-p", w.venv, "--", "python", "-c", code,
        cwd=tmp_path, env={"LD_LIBRARY_PATH": str(outside)},
    )  # fmt: skip
    assert done.returncode == 0 and done.stdout == "answer 7\n", done.stderr
    healthy = json.loads(cudatx("doctor", "--json", "-p", w.venv).stdout)
    assert healthy["errors"] == 0, healthy["problems"]
    (outside / "libextra.so").unlink()
    report = json.loads(cudatx("doctor", "--json", "-p", w.venv).stdout)
    (problem,) = report["problems"]
    assert problem["code"] == "missing-library" and "libextra.so" in problem["what"]
    (line,) = problem["consequences"]
    assert line.startswith("the traced run `python -c ") and "loaded libextra.so" in line
    assert "(observed, by plugapp/libhost.so)" in line
    again = subprocess.run(
        [str(venv_python(w.venv)), "-c", code],
        env={**os.environ, "LD_LIBRARY_PATH": str(outside)},
        capture_output=True,
        text=True,
        check=False,
    )
    assert again.returncode != 0 and "libextra.so: cannot open shared object" in again.stderr


def test_each_process_is_recorded_and_alike_ones_are_replayed_once(w: World) -> None:
    """A shell that runs the workload twice: three programs, the shell's kept out (it maps
    nothing of the environment), the two Pythons kept and, loading alike, replayed once."""
    script = f"python -c {shlex.quote(WORKLOAD)} && python -c {shlex.quote(WORKLOAD)}"
    done = _trace(w, "sh", "-c", script)
    assert done.returncode == 0 and done.stdout == "answer 42\nanswer 42\n", done.stderr
    (record,) = json.loads(cudatx("trace", "--list", "--json", "-p", w.venv).stdout)["traces"]
    assert len(record["processes"]) == 2 and record["others"] >= 1
    env = scan(start_query(str(w.venv)), ld_library_path=None)
    (replayed,) = env.observed
    assert replayed.trace == record["id"]
    assert any(r.name == PLUG and r.status is Status.RESOLVED for r in replayed.resolutions)


def test_removing_the_traced_package_itself_is_judged_by_what_else_needs_its_files(
    w: World,
) -> None:
    """A traced load leaves with what loaded it: plugapp's own code loaded libhost.so by path,
    and libhost loaded the plug-in; with plugapp gone, neither load happens, and nothing
    else needs its files. The plug-in's own removal still breaks the run."""
    assert _trace(w, "python", "-c", WORKLOAD).returncode == 0
    code, plan = _plan(w, "plugapp")
    assert code == 0 and plan["safe"], plan
    assert plan["broken"] == [] and plan["broken_roots"] == []
    code, plan = _plan(w, "plugwheel")
    assert code == 1 and [b["soname"] for b in plan["broken"]] == [PLUG]
    # The real loader: with plugapp gone the plug-in still loads by itself.
    uv_uninstall(w.venv, ["plugapp"])
    assert (
        w.python(f"import ctypes; ctypes.CDLL({str(w.site / 'plugwheel/lib' / PLUG)!r})").returncode
        == 0
    )


def test_a_library_only_wheel_loaded_by_path_by_another_package_s_code_still_counts(
    w: World,
) -> None:
    """A trace does not say which Python code made a ctypes load: a file of a wheel that
    ships no Python code of its own (plugwheel, as the NVIDIA wheels torch preloads by path)
    is loaded by someone else's code, which stays. Removing that wheel breaks the run."""
    path = str(w.site / "plugwheel/lib" / PLUG)
    assert _trace(w, "python", "-c", f"import ctypes; ctypes.CDLL({path!r})").returncode == 0
    code, plan = _plan(w, "plugwheel")
    assert code == 1 and not plan["safe"], plan
    (broken,) = [b for b in plan["broken"] if b["evidence"] == "observed"]
    assert broken["soname"] == PLUG
