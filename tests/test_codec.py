"""cudatx.codec: the models every run reads, to JSON and back without pydantic.

What it builds must equal what was encoded, and what pydantic (cudatx.documents) builds
from the same JSON; what it cannot take is an Invalid naming where, never a model of the
wrong types (stricter than pydantic's lax mode: "64" is no integer, nor is true). And a plan
printed as text must not import pydantic at all: that is why the codec exists (a third of a
warm run's time).
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import types
import typing
from enum import Enum
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cudatx import documents
from cudatx.analysis.cuda import Mixed
from cudatx.analysis.doctor import DoctorReport
from cudatx.analysis.why import WhyReport
from cudatx.codec import Invalid, convert, decode, document, encode, plain
from cudatx.demo import build_demo
from cudatx.discover.dists import scan_distributions
from cudatx.elf.reader import read_elf
from cudatx.models import (
    Attempt,
    Distribution,
    ElfInfo,
    Frozen,
    How,
    Outcome,
    PackageRecord,
    PythonTarget,
    RecordEntry,
    Resolution,
    Status,
    Symbols,
    VersionNeed,
)
from cudatx.planning.checkreq import FileCheck
from cudatx.planning.models import Plan, Trial
from tests.support import compile_lib
from tests.support.cli import environ

ELF = ElfInfo(
    path="/x/libfoo.so.1",
    elf_class=64,
    data=1,
    machine=62,
    elf_type="ET_DYN",
    soname="libfoo.so.1",
    needed=("libc.so.6",),
    runpath="$ORIGIN",
    flags_1=8,
    version_needs=(VersionNeed(file="libc.so.6", versions=("GLIBC_2.34",), weak=("GLIBC_2.2.5",)),),
    version_defs=("libfoo.so.1", "FOO_1"),
)
DIST = Distribution(
    name="cuda-conda",
    display_name="cuda_conda",
    version="1.0",
    metadata_dir="/p/conda-meta/cuda-1.0-0.json",
    site="/p",
    owner="conda",
    records=(RecordEntry("lib/a.so", "sha256", "abc", 3), RecordEntry("lib/b")),
    requires=("x>=1; python_version > '3'",),
    package=PackageRecord(name="cuda", build="h_0", depends=("y >=2",)),
)
RESOLUTION = Resolution(
    name="libfoo.so.1",
    needed_by="/x/mod.so",
    status=Status.ERROR,
    how=How.RUNPATH,
    attempts=(Attempt(how=How.RUNPATH, path="/x/libfoo.so.1", outcome=Outcome.FOUND),),
    missing=("`FOO_2'",),
)


@pytest.mark.parametrize("value", [ELF, DIST, RESOLUTION, Symbols(undefined=("f@V@libc.so.6",))])
def test_models_round_trip_and_read_as_pydantic_reads_them(value: object) -> None:
    text = encode(value)
    assert decode(type(value), text) == value
    # Fields at their defaults are left out; pydantic fills them in the same way.
    assert documents.load_json(type(value), text) == value
    assert decode(type(value), documents.dump_json(value)) == value


def test_a_real_library_and_a_real_distribution_round_trip(tmp_path: Path) -> None:
    dep = compile_lib(tmp_path / "libdep.so.2", soname="libdep.so.2")
    lib = compile_lib(tmp_path / "libreal.so.1", soname="libreal.so.1", needed=[dep])
    info = read_elf(str(lib))
    assert info.needed[0] == "libdep.so.2"
    assert decode(ElfInfo, encode(info)) == info
    dists, _ = scan_distributions([str(Path(json.__file__).parents[1] / "site-packages")])
    for dist in dists[:20]:
        assert decode(Distribution, encode(dist)) == dist


_ELF = {"path": "/x", "elf_class": 64, "data": 1, "machine": 62, "elf_type": "ET_DYN"}


@pytest.mark.parametrize(
    ("data", "where"),
    [
        (_ELF | {"elf_class": "64"}, "elf_class"),
        (_ELF | {"elf_class": True}, "elf_class"),
        ({k: v for k, v in _ELF.items() if k != "elf_type"}, "elf_type"),
        (_ELF | {"x": 1}, "x"),
        (
            _ELF | {"version_needs": [{"file": "libc.so.6", "versions": ["A", 2]}]},
            "version_needs.0.versions.1",
        ),
        (_ELF | {"needed": "libc"}, "needed"),
        ([], ""),
    ],
)
def test_what_it_cannot_take_is_invalid_and_says_where(data: object, where: str) -> None:
    with pytest.raises(Invalid) as refused:
        convert(ElfInfo, data)
    assert ".".join(map(str, refused.value.where)) == where


def test_enums_fixed_tuples_and_mappings_are_checked() -> None:
    with pytest.raises(Invalid, match="not a Status"):
        convert(Resolution, {"name": "a", "needed_by": "b", "status": "gone"})
    with pytest.raises(Invalid, match="expected an array of 4"):
        convert(tuple[RecordEntry, ...], [["a", None, None]])
    target = {
        "python": "/p/bin/python",
        "executable": "/usr/bin/python3.11",
        "version": "3.11.7",
        "prefix": "/p",
        "base_prefix": "/usr",
        "sys_path": ["/p/lib"],
        "site_packages": ["/p/lib"],
        "stdlib": ["/usr/lib/python3.11"],
        "extension_suffixes": [".so"],
        "markers": {"os_name": 1},
        "found_by": "--python",
    }
    with pytest.raises(Invalid) as refused:
        convert(PythonTarget, target)
    assert refused.value.where == ("markers", "os_name")
    assert convert(PythonTarget, target | {"markers": {"os_name": "posix"}}).markers == {
        "os_name": "posix"
    }
    with pytest.raises(Invalid, match="not JSON"):
        decode(ElfInfo, "{")


def test_a_warm_plan_as_text_imports_neither_pydantic_nor_packaging(tmp_path: Path) -> None:
    """The demo's dry run, as a user runs it: pydantic stays out of the process (cudatx.codec)
    and stays out for --json too (cudatx.codec.document writes what pydantic would); packaging
    stays out of a warm run whose change
    no Requires-Dist names (cudatx.names: the verdicts that need it are in the scan cache)."""
    demo = build_demo(tmp_path / "work")
    probe = (
        "import runpy, sys\n"
        "try:\n"
        "    runpy.run_module('cudatx', run_name='__main__')\n"
        "finally:\n"
        "    print('pydantic' in sys.modules, 'packaging' in sys.modules, file=sys.stderr)\n"
    )
    env = environ() | {"CUDATX_CACHE_DIR": os.fspath(tmp_path / "cache")}

    def imported(*argv: str) -> str:
        done = subprocess.run(
            [sys.executable, "-c", probe, *argv, "--dry-run", "--python", str(demo.python)],
            capture_output=True,
            text=True,
            env=env,
            check=False,
        )
        assert done.returncode in (0, 1), done.stderr
        return done.stderr.splitlines()[-1]

    assert imported("remove", "cudatx-demo-plugin") == "False True"  # cold: requirements parsed
    assert imported("remove", "cudatx-demo-plugin") == "False False"
    assert imported("remove", "cudatx-demo-plugin", "--json") == "False False"


_REPORTS = [Plan, DoctorReport, WhyReport, FileCheck, Distribution, ElfInfo]


def _values(hint: Any) -> st.SearchStrategy[Any]:
    """Values of a model field's annotation, models built field by field (Frozen's own
    __init__ hides its fields from hypothesis' from_type)."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is type(None) or hint is None:
        return st.none()
    if hint in (str, int, bool):
        return {str: st.text(max_size=6), int: st.integers(), bool: st.booleans()}[hint]
    if hint is float:
        return st.floats() | st.integers(-(10**6), 10**6)
    if origin in (typing.Union, types.UnionType):
        return st.one_of([_values(arg) for arg in args])
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return st.lists(_values(args[0]), max_size=2).map(tuple)
        return st.tuples(*(_values(arg) for arg in args))
    if origin is dict:
        return st.dictionaries(_values(args[0]), _values(args[1]), max_size=2)
    if isinstance(hint, type) and issubclass(hint, Enum):
        return st.sampled_from(list(hint))
    if isinstance(hint, type) and issubclass(hint, Frozen):
        hints = typing.get_type_hints(hint)
        fields = {
            f.name: st.deferred(lambda h=hints[f.name]: _values(h))
            for f in dataclasses.fields(hint)
        }  # type: ignore[arg-type]
        return st.fixed_dictionaries(fields).map(lambda kw: hint(**kw))
    if isinstance(hint, type) and issubclass(hint, tuple):
        hints = typing.get_type_hints(hint)
        return st.tuples(*(_values(hints[n]) for n in hint._fields)).map(lambda t: hint(*t))
    raise TypeError(f"no strategy for {hint!r}")


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.sampled_from(_REPORTS).flatmap(_values))
def test_a_report_is_written_as_pydantic_writes_it(report: object) -> None:
    """`--json` reports are written by cudatx.codec.document, without pydantic: byte for byte
    what pydantic's dump_json gives (field order, enums, tuples, floats, escapes), and plain()
    is that document read back (inf as null, as pydantic's JSON has it)."""
    assert document(report) == documents.dump_json(report, indent=2)
    assert plain(report) == json.loads(documents.dump_json(report))


@given(st.floats(allow_nan=True, allow_infinity=True) | st.integers(-(2**60), 2**60))
def test_floats_and_ints_in_a_float_field_are_written_as_pydantic_writes_them(x: float) -> None:
    trial = Trial(
        method="copy",
        shadow="a copy",
        shadow_seconds=x,
        bytes_copied=0,
        uv_seconds=0,
        judge_seconds=1e-5,
        checks=0,
        breaks=0,
        roots=(),
        disagreements=(),
    )
    assert document(trial) == documents.dump_json(trial, indent=2)


def test_a_field_declared_excluded_is_left_out_by_both_writers() -> None:
    """A model's field with `metadata={"exclude": True}` (Mixed.package, what the text says
    and a report does not) is written by neither cudatx.codec.document nor pydantic."""
    mixed = Mixed(
        soname="libcudnn.so.9",
        needed_by="/site/torch/_C.so",
        path="/site/nvidia/cu13/lib/libcudnn.so.9",
        major=13,
        torch_cuda="12.8",
        reason="in folder nvidia/cu13",
        package="torch",
    )
    assert document(mixed) == documents.dump_json(mixed, indent=2)
    assert "package" not in json.loads(document(mixed))


def test_a_file_name_that_is_not_utf8_is_written_as_an_escape() -> None:
    """pydantic cannot write a lone surrogate (a file name that is not UTF-8, as os.fsdecode
    holds it); the document writes its escape, which a JSON reader reads back."""
    name = os.fsdecode(b"lib\xffcudnn.so.9")
    text = document(RecordEntry(path=name))
    assert "\\udcff" in text and json.loads(text)[0] == name
