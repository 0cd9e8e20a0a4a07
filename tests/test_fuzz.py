"""Fuzzing the readers of files cudatx did not write: mutated real inputs, never a crash.

Every reader of untrusted bytes (an ELF object, a RECORD, a METADATA, a requirements file) is
run on real inputs mutated by hypothesis: bytes flipped, fields overwritten with boundary
values, format tokens inserted, ranges deleted or repeated, files cut short. A reader may
accept the bytes or refuse them, and a refusal must be a CudatxError that is not an internal
error, with a one-line message (the CLI prints `cudatx: error: <message>`, one line). Readers
that never refuse (the distribution scan turns damage into findings) must keep their findings
and the names they read to one line too: those reach the same one-line messages later.

To fuzz another reader, add one `Reader(...)` line to READERS: a name, the file name the bytes
are saved as, where its real inputs come from, and the function that reads the file.

In CI each reader gets FUZZ_EXAMPLES examples, the same ones every run (derandomized). A
longer, random run: `CUDATX_FUZZ_EXAMPLES=20000 python3 -m pytest tests/test_fuzz.py` (README,
"Reliability", gives the count of the last one).
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import os
import shutil
import struct
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cudatx.discover.dists import applicable_requirements, reinstall_spec, scan_distributions
from cudatx.discover.lddebug import TracedLoad, TracedProcess, read_report
from cudatx.discover.traces import FileState, TraceRecord, read_traces
from cudatx.documents import dump_json
from cudatx.elf.reader import read_elf, read_object, rodata_sonames
from cudatx.errors import CudatxError, ExitCode
from cudatx.planning.reqfiles import read_requirements
from tests.support import compile_lib

FUZZ_EXAMPLES = int(os.environ.get("CUDATX_FUZZ_EXAMPLES", "300"))
# A count given by hand is a longer run: random examples, not the fixed CI set.
RANDOM = "CUDATX_FUZZ_EXAMPLES" in os.environ
MARKERS = {
    "python_version": "3.11",
    "python_full_version": "3.11.7",
    "sys_platform": "linux",
    "platform_system": "Linux",
    "platform_machine": "x86_64",
    "os_name": "posix",
    "implementation_name": "cpython",
}

pytestmark = pytest.mark.reliability


def _one_line(text: str, what: str) -> None:
    assert text.strip(), f"{what} is empty"
    # str.splitlines() is what a terminal and every log reader split on (\n, \r, \v, \f,
    # \x1c-\x1e, \x85, U+2028, U+2029).
    assert len(text.splitlines()) == 1, f"{what} is not one line: {text!r}"


# -- the readers --------------------------------------------------------------------------


def _read_elf(path: Path) -> str:
    read_elf(str(path))
    read_object(str(path))  # the ELF facts with the exported PyInit_ names
    rodata_sonames(str(path))
    return "read"


def _read_distribution(path: Path) -> str:
    """The scan of the site folder holding the dist-info `path` is in, and what uses it."""
    site = path.parent.parent
    dists, findings = scan_distributions((str(site),))
    for finding in findings:
        _one_line(finding.message, "a finding's message")
        _one_line(finding.path, "a finding's path")
    for dist in dists:
        for field in (dist.name, dist.display_name, dist.version):
            _one_line(field, "a name or version")
        list(applicable_requirements(dist, MARKERS))
        _one_line(reinstall_spec(dist), "a reinstall spec")
    if not dists:
        return "no distribution"
    return "read, with findings" if findings else "read"


def _read_requirements(path: Path) -> str:
    read = read_requirements(str(path), markers=MARKERS)
    for pin in read.entries:
        _one_line(pin.requirement, "a requirement")
    return "read"


def _read_report(path: Path) -> str:
    """glibc's LD_DEBUG report of one process, read as `cudatx trace` reads it."""
    with open(path, encoding="utf-8", errors="surrogateescape") as lines:
        for process in read_report(lines, 4242):
            for load in process.loads:
                _one_line(load.name, "a load's name")
    return "read"


def _report_seeds(scratch: Path) -> list[bytes]:
    """A real report: an interpreter that loads a library by path, then fails one by name."""
    lib = compile_lib(scratch / "libfuzzed.so.1", soname="libfuzzed.so.1")
    code = (
        "import ctypes, sys\nctypes.CDLL(sys.argv[1])\n"
        "try:\n    ctypes.CDLL('libcudatx-absent.so.2')\nexcept OSError:\n    pass\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("LD_")}
    env |= {"LD_DEBUG": "libs,files", "LD_DEBUG_OUTPUT": str(scratch / "ld")}
    subprocess.run([sys.executable, "-c", code, str(lib)], env=env, check=True)
    return [p.read_bytes() for p in sorted(scratch.glob("ld.*"))]


def _read_trace(path: Path) -> str:
    """A record in a store cudatx made (0700 folders, a 0600 file): refused with a one-line
    StoreError (`trace --list`), or a finding (a scan), never a crash."""
    prefix = path.parent.parent.parent
    for folder in (path.parent.parent, path.parent):
        os.chmod(folder, 0o700)
    os.chmod(path, 0o600)
    traces, findings = read_traces(str(prefix), strict=False)
    for finding in findings:
        _one_line(finding.message, "a finding")
    for trace in traces:
        _one_line(trace.record.label, "a traced run's name")
    read_traces(str(prefix), strict=True)
    return "read"


_TRACE_ID = "20261202T140000.000000Z-4242"


def _trace_seeds(scratch: Path) -> list[bytes]:
    plug = "/x/libplug.so"
    record = TraceRecord(
        id=_TRACE_ID,
        created="2026-12-02T14:00:00+00:00",
        command=("python", "-c", "import torch"),
        cwd="/tmp",
        prefix=str(scratch),
        prefix_id="1:2",
        ld_library_path=None,
        exit_code=0,
        processes=(
            TracedProcess(
                pid=4242,
                program="python",
                loads=(
                    TracedLoad(name=plug, kind="dlopen", by="/x/_ctypes.so", path=plug),
                    TracedLoad(name="libdep.so.1", kind="needed", by=plug, path="/x/libdep.so.1"),
                ),
            ),
        ),
        files={plug: FileState(dev=1, ino=2, size=3, mtime_ns=4)},
    )
    return [dump_json(record, indent=2).encode()]


_SAMPLES = Path(__file__).parent / "data" / "reqfiles"


def _sample(*names: str) -> Callable[[Path], list[bytes]]:
    """Real files uv 0.13.9 wrote (tests/data/reqfiles), as seeds."""
    return lambda scratch: [(_SAMPLES / n).read_bytes() for n in names]


def _elf_seeds(scratch: Path) -> list[bytes]:
    """Objects of every shape the reader meets: compiled here (DT_RPATH and DT_RUNPATH,
    DT_NEEDED, version needs, soname strings in .rodata, 32-bit), and the system's own."""
    seeds = []
    if shutil.which("cc"):
        dep = compile_lib(scratch / "libdep.so.2", soname="libdep.so.2")
        source = (
            '#include <stdio.h>\nconst char *names[] = {"libcudnn_ops.so.9", "libcuda.so.%d"};\n'
            "int fuzz(void) { return puts(names[0]); }\nvoid PyInit_fuzz(void) {}\n"
        )
        lib = compile_lib(
            scratch / "libfuzz.so.1",
            soname="libfuzz.so.1",
            needed=[dep],
            rpath="$ORIGIN/../lib:/opt/x",
            runpath="$ORIGIN",
            source=source,
        )
        seeds += [dep.read_bytes(), lib.read_bytes()]
        with contextlib.suppress(Exception):  # no 32-bit toolchain here
            seeds.append(
                compile_lib(scratch / "lib32.so", soname="lib32.so", m32=True).read_bytes()
            )
    for system in ("/lib/x86_64-linux-gnu/libdl.so.2", os.path.realpath(sys.executable)):
        if os.path.isfile(system) and os.path.getsize(system) < 1 << 20:
            seeds.append(Path(system).read_bytes())
    return seeds


def _dist_file_seeds(name: str) -> Callable[[Path], list[bytes]]:
    """`name` (RECORD or METADATA) of the distributions cudatx itself runs on: real files
    that real installers wrote."""

    def seeds(scratch: Path) -> list[bytes]:
        out = []
        for dist in ("click", "packaging", "pyelftools", "pydantic", "networkx"):
            text = importlib.metadata.distribution(dist).read_text(name)
            if text:
                out.append(text.encode()[:20_000])  # the first rows say it all; keep it quick
        return out

    return seeds


def _requirements_seeds(scratch: Path) -> list[bytes]:
    compiled = (  # as pip-compile writes it
        "#\n# This file is autogenerated by pip-compile with Python 3.11\n#\n"
        "click==8.1.7 \\\n"
        "    --hash=sha256:ae74fb96c20a0277a1d615f1e4d73c8414f5a98db8b799a7931d1582f3390c28 \\\n"
        "    --hash=sha256:ca9853ad459e787e2192211578cc907e7594e294c7ccc834310722b41b9ca6de\n"
        "    # via -r requirements.in\n"
        "nvidia-cudnn-cu12==9.10.2.21 ; platform_system == 'Linux'  # via torch\n"
    )
    handwritten = (
        "-r base.txt\n-c constraints.txt\n--index-url https://example.org/simple\n"
        "nvidia-cudnn-cu13\ntorch[cuda] >= 2.4, < 3 ; python_version >= '3.10'\n"
        "pkg @ https://example.org/pkg-1.0-py3-none-any.whl\n-e ./local#egg=local\n# the end\n"
    )
    return [compiled.encode(), handwritten.encode()]


@dataclass(frozen=True)
class Reader:
    name: str
    file_name: str  # the mutated bytes are saved as <scratch>/<file_name>
    seeds: Callable[[Path], list[bytes]]  # real inputs, built or found in a scratch folder
    read: Callable[[Path], str]  # reads the file; returns what happened; raises CudatxError
    tokens: tuple[bytes, ...]  # bytes that mean something to the format
    beside: tuple[tuple[str, bytes], ...] = ()  # files written next to it, unmutated


_METADATA = ("METADATA", b"Metadata-Version: 2.1\nName: fuzz\nVersion: 1.0\n")
# As uv writes it for a wheel installed from a local file.
_DIRECT_URL = (
    b'{"archive_info":{"hash":"sha256=4a3f","hashes":{"sha256":"4a3f"}},'
    b'"url":"file:///tmp/wheels/fuzz-1.0-py3-none-any.whl"}'
)
_TEXT = (b"\n", b"\r\n", b"\r", b"\x00", b"\xff", b"\xc3(", b"\xc2\x85", b"\xe2\x80\xa8", b"\t")
_TEXT += (b"\xef\xbb\xbf", b"\\", b'"', b"'", b"#", b" ", b"../", b"/", b"=", b";", b"@")
_TEXT += (b"; os_name == '\x00'", b"(" * 3000)  # what packaging's parser chokes on
_REQ = (b"\nRequires-Dist: a; os_name == '\x00'\n", b"\nRequires-Dist: a; " + b"(" * 3000)
READERS = [
    Reader(
        "LD_DEBUG report",
        "report/ld.4242",
        _report_seeds,
        _read_report,
        (
            *_TEXT,
            b"  4242:\t",
            b"file=",
            b" [0];  needed by ",
            b" [0];  dynamically loaded by ",
            b" [0];  generating link map",
            b"  trying file=",
            b"find library=",
            b"transferring control: ",
        ),
    ),
    Reader(
        "trace record",
        f"prefix/.cudatx/traces/{_TRACE_ID}.json",
        _trace_seeds,
        _read_trace,
        (*_TEXT, b"{", b"}", b"[", b"]", b'"', b"null", b"-1", b"1e999", b"\\n", b"\\u2028"),
    ),
    Reader(
        "ELF",
        "libfuzz.so.1",
        _elf_seeds,
        _read_elf,
        (b"\x7fELF", b"\0", b"$ORIGIN", b"lib", b".so.9", b"\xff" * 8, b"\x06\x00\x00\x00"),
    ),
    Reader(
        "RECORD",
        "site/fuzz-1.0.dist-info/RECORD",
        _dist_file_seeds("RECORD"),
        _read_distribution,
        (*_TEXT, b",", b'",', b"sha256=", b",,", b",-1", b",99999999999999999999"),
        (_METADATA,),
    ),
    Reader(
        "METADATA",
        "site/fuzz-1.0.dist-info/METADATA",
        _dist_file_seeds("METADATA"),
        _read_distribution,
        (*_TEXT, b"\n ", b"\nName: ", b"\nVersion: ", b"\nRequires-Dist: ", b"; extra == ", *_REQ),
        (("RECORD", b"fuzz/__init__.py,,\nfuzz-1.0.dist-info/METADATA,,\n"),),
    ),
    Reader(
        "direct_url.json",
        "site/fuzz-1.0.dist-info/direct_url.json",
        lambda scratch: [_DIRECT_URL],
        _read_distribution,
        (*_TEXT, b"{", b"}", b'"url": ', b"\\n", b"\\u2028", b"null", b"[]", b"1e999"),
        (_METADATA, ("RECORD", b"fuzz-1.0.dist-info/direct_url.json,,\n")),
    ),
    Reader(
        "requirements",
        "requirements.txt",
        _requirements_seeds,
        _read_requirements,
        (*_TEXT, b"\\\n", b" --hash=sha256:00", b"-r ", b"-e ", b"[", b"]", b"==", b"*"),
        (("base.txt", b"six==1.17.0\n"), ("constraints.txt", b"six<2\n")),
    ),
    Reader(
        "pyproject.toml",
        "pyproject.toml",
        _sample("project/pyproject.toml"),
        _read_requirements,
        (*_TEXT, b"[", b"]", b"{", b"}", b"=", b'"', b"[[package]]", b"[[packages]]", b"marker = "),
    ),
    Reader(
        "uv.lock",
        "uv.lock",
        _sample("project/uv.lock"),
        _read_requirements,
        (*_TEXT, b"[", b"]", b"{", b"}", b"=", b'"', b"[[package]]", b"[[packages]]", b"marker = "),
    ),
    Reader(
        "pylock.toml",
        "pylock.toml",
        _sample("project/pylock.toml", "pylock.multi.toml"),
        _read_requirements,
        (*_TEXT, b"[", b"]", b"{", b"}", b"=", b'"', b"[[package]]", b"[[packages]]", b"marker = "),
    ),
]


# -- mutations ----------------------------------------------------------------------------

_WIDTHS = {1: "B", 2: "H", 4: "I", 8: "Q"}
_BOUNDARY = (0, 1, 2, 0x7F, 0x80, 0xFF, 0x100, 0x7FFF, 0x8000, 0xFFFF, 2**31 - 1, 2**31)
_BOUNDARY += (2**32 - 1, 2**63 - 1, 2**63, 2**64 - 1)
# Offsets: mostly in the first bytes (the ELF header and program headers, a text's first
# lines), also anywhere; taken modulo the length.
_OFFSET = st.one_of(st.integers(0, 255), st.integers(0, 1 << 24))


def _token_or_bytes(tokens: tuple[bytes, ...]) -> st.SearchStrategy[bytes]:
    return st.one_of(st.sampled_from(tokens), st.binary(min_size=1, max_size=16))


def _mutation(tokens: tuple[bytes, ...]) -> st.SearchStrategy[tuple[Any, ...]]:
    return st.one_of(
        st.tuples(st.just("flip"), _OFFSET, st.integers(1, 255)),
        st.tuples(
            st.just("word"),
            _OFFSET,
            st.sampled_from(sorted(_WIDTHS)),
            st.one_of(st.sampled_from(_BOUNDARY), st.sampled_from(("size", "size+1", "size-1"))),
            st.sampled_from("<>"),
        ),
        st.tuples(st.just("insert"), _OFFSET, _token_or_bytes(tokens)),
        st.tuples(st.just("delete"), _OFFSET, st.integers(1, 64)),
        st.tuples(st.just("repeat"), _OFFSET, st.integers(1, 32), st.integers(2, 2000)),
        st.tuples(st.just("truncate"), _OFFSET),
    )


def _apply(data: bytes, mutation: tuple[Any, ...]) -> bytes:
    kind, offset, *rest = mutation
    at = offset % (len(data) + 1)
    if kind == "flip":
        return data[:at] + bytes([data[at] ^ rest[0]]) + data[at + 1 :] if at < len(data) else data
    if kind == "word":
        width, value, order = rest
        if isinstance(value, str):  # a length that points just at, past or before the end
            value = len(data) + {"size": 0, "size+1": 1, "size-1": -1}[value]
        packed = struct.pack(order + _WIDTHS[width], value % (1 << (8 * width)))
        return data[:at] + packed + data[at + width :]
    if kind == "insert":
        return data[:at] + rest[0] + data[at:]
    if kind == "delete":
        return data[:at] + data[at + rest[0] :]
    if kind == "repeat":
        length, times = rest
        return data[:at] + data[at : at + length] * times + data[at:]
    return data[:at]  # truncate


def _mutated(seeds: list[bytes], tokens: tuple[bytes, ...]) -> st.SearchStrategy[bytes]:
    def build(seed: bytes, mutations: list[tuple[Any, ...]]) -> bytes:
        for mutation in mutations:
            seed = _apply(seed, mutation)
        return seed

    return st.builds(build, st.sampled_from(seeds), st.lists(_mutation(tokens), max_size=6))


# -- the test -----------------------------------------------------------------------------


def _outcome(reader: Reader, path: Path) -> str:
    try:
        return reader.read(path)
    except CudatxError as exc:
        assert exc.exit_code != ExitCode.INTERNAL, exc.message
        _one_line(exc.message, f"{type(exc).__name__}'s message")
        return type(exc).__name__


@pytest.mark.parametrize("reader", READERS, ids=lambda r: r.name)
def test_mutated_real_inputs_never_crash_a_reader(
    reader: Reader, tmp_path: Path, record_property: Callable[[str, object], None]
) -> None:
    seeds = reader.seeds(tmp_path / "seeds")
    assert seeds, f"no real {reader.name} input to start from"
    target = tmp_path / "fuzz" / reader.file_name
    target.parent.mkdir(parents=True)
    for name, data in reader.beside:
        (target.parent / name).write_bytes(data)
    outcomes: Counter[str] = Counter()

    # The unmutated seeds are read too: the reader must accept real input.
    for seed in seeds:
        target.write_bytes(seed)
        assert _outcome(reader, target) in ("read", "read, with findings"), reader.name

    @settings(
        max_examples=FUZZ_EXAMPLES,
        deadline=None,
        database=None,  # keep .hypothesis/ out of the checkout
        derandomize=not RANDOM,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(blob=_mutated(seeds, reader.tokens))
    def fuzz(blob: bytes) -> None:
        target.write_bytes(blob)
        outcomes[_outcome(reader, target)] += 1

    fuzz()
    record_property("cases", sum(outcomes.values()))
    record_property("outcome", ", ".join(f"{n} {what}" for what, n in outcomes.most_common()))


@pytest.mark.parametrize(
    "line",
    # What crashed packaging 26.2 (26.4 refuses both itself).
    ["a; os_name == 'Win\x00dows'", "a; " + "(" * 2000 + 'os_name=="x"' + ")" * 2000],
    ids=["nul-in-quoted-value", "nested-parentheses"],
)
def test_requirement_lines_packaging_chokes_on_are_usage_errors(tmp_path: Path, line: str) -> None:
    """Found by the fuzz above: packaging raised SyntaxError and RecursionError on these."""
    from cudatx.errors import UsageError

    path = tmp_path / "requirements.txt"
    path.write_text(f"b\n{line}\n")
    with pytest.raises(UsageError, match=r"requirements\.txt:2: not a requirement: "):
        read_requirements(str(path), markers=MARKERS)


@pytest.mark.parametrize("brk", ["\\f", "\\u000b", "\\u001c", "\\u0085", "\\u2028", "\\n"])
def test_a_line_break_in_a_trace_record_s_key_is_one_line_finding(tmp_path: Path, brk: str) -> None:
    """Found by the fuzz above: pydantic names an unknown key (`pr\\fix`) in its error, and the
    finding printed it raw, as two lines."""
    seed = _trace_seeds(tmp_path / "seeds")[0]
    target = tmp_path / "fuzz" / "prefix" / ".cudatx" / "traces" / f"{_TRACE_ID}.json"
    target.parent.mkdir(parents=True)
    target.write_bytes(seed.replace(b"{", f'{{"pr{brk}fix": 1,'.encode(), 1))
    with pytest.raises(CudatxError, match="is corrupt") as refused:
        _read_trace(target)
    assert len(refused.value.message.splitlines()) == 1
