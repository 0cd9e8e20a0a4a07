"""cudatx.elf.reader against binutils: libraries compiled here, system libraries, and broken files.

readelf (and objdump for the raw DT_FLAGS_1 value) is the oracle for every field.
"""

from __future__ import annotations

import io
import os
import re
import shutil
import struct
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cudatx.elf import reader
from cudatx.elf.exports import Definitions, Hashed, Table, gnu_hash
from cudatx.elf.reader import read_elf, read_object, read_symbols, rodata_sonames
from cudatx.errors import ElfReadError
from cudatx.models import ElfInfo, VersionNeed

pytestmark = pytest.mark.skipif(
    shutil.which("cc") is None or shutil.which("readelf") is None,
    reason="needs a C compiler and binutils",
)

DF_1_NODEFLIB = 0x800
EM_386, EM_X86_64 = 3, 62


def _run(*argv: str | Path) -> str:
    return subprocess.run([str(a) for a in argv], check=True, capture_output=True, text=True).stdout


def _cc(out: Path, source: str, *flags: str | Path) -> Path:
    src = out.with_suffix(".c")
    src.write_text(source)
    _run("cc", "-shared", "-fPIC", "-o", out, src, *flags)
    return out


def readelf_view(path: str | Path) -> ElfInfo:
    """What binutils says about `path`, in cudatx's model."""
    header = _run("readelf", "-hW", path)
    elf_class = int(re.search(r"Class:\s+ELF(32|64)", header)[1])  # type: ignore[index]
    data = 1 if "little endian" in header else 2
    elf_type = "ET_" + re.search(r"Type:\s+(\w+)", header)[1]  # type: ignore[index]
    with open(path, "rb") as f:  # e_machine as raw bytes: readelf prints only a name
        machine = int.from_bytes(f.read(20)[18:20], "little" if data == 1 else "big")

    fields: dict[str, list[str]] = {"NEEDED": [], "SONAME": [], "RPATH": [], "RUNPATH": []}
    for line in _run("readelf", "-dW", path).splitlines():
        m = re.search(r"\((NEEDED|SONAME|RPATH|RUNPATH)\)\s+[^[]*\[(.*)\]$", line)
        if m:
            fields[m[1]].append(m[2])
    # readelf prints DT_FLAGS_1 as names; objdump prints the number (but needs section headers).
    dump = subprocess.run(["objdump", "-p", str(path)], capture_output=True, text=True).stdout
    flags = re.search(r"^\s*FLAGS_1\s+0x([0-9a-f]+)", dump, re.M)
    dt_flags = re.search(r"^\s*FLAGS\s+0x([0-9a-f]+)", dump, re.M)

    needs: list[VersionNeed] = []
    defs: list[str] | None = None
    section = ""
    for line in _run("readelf", "-VW", path).splitlines():
        if "section '" in line:
            section = line.split(" section", 1)[0]
            if section == "Version definition":
                defs = []
        elif section == "Version needs" and (m := re.search(r"File: (\S+)", line)):
            needs.append(VersionNeed(file=m[1], versions=()))
        elif section == "Version needs" and (m := re.search(r"Name: (\S+)\s+Flags: (\S+)", line)):
            last = needs[-1]
            weak = (*last.weak, m[1]) if "WEAK" in m[2] else last.weak
            needs[-1] = VersionNeed(file=last.file, versions=(*last.versions, m[1]), weak=weak)
        elif (
            section == "Version definition"
            and defs is not None
            and (m := re.search(r"Index: \d+\s+Cnt: \d+\s+Name: (\S+)", line))
        ):
            defs.append(m[1])

    interp = re.search(r"\[Requesting program interpreter: (.*)\]", _run("readelf", "-lW", path))
    return ElfInfo(
        path=str(path),
        elf_class=elf_class,
        data=data,
        machine=machine,
        elf_type=elf_type,
        soname=fields["SONAME"][-1] if fields["SONAME"] else None,
        needed=tuple(fields["NEEDED"]),
        rpath=fields["RPATH"][-1] if fields["RPATH"] else None,
        runpath=fields["RUNPATH"][-1] if fields["RUNPATH"] else None,
        flags=int(dt_flags[1], 16) if dt_flags else 0,
        flags_1=int(flags[1], 16) if flags else 0,
        interpreter=interp[1] if interp else None,
        version_needs=tuple(needs),
        version_defs=tuple(defs) if defs is not None else None,
    )


@pytest.fixture(scope="module")
def libs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("libs")
    dep = _cc(d / "libdep.so", "int dep(void) { return 1; }\n", "-Wl,-soname,libdep.so.2")
    return {
        "dep": dep,
        "rpath": _cc(
            d / "libt.so",
            '#include <stdio.h>\nint dep(void);\nint t(void) { puts("t"); return dep(); }\n',
            "-Wl,-soname,libt.so.1",
            dep,
            "-Wl,--disable-new-dtags,-rpath,$ORIGIN/a:/b",
        ),
        "runpath": _cc(
            d / "librun.so",
            "int r(void) { return 2; }\n",
            "-Wl,-soname,librun.so.3",
            "-Wl,--enable-new-dtags,-rpath,$ORIGIN/c",
        ),
        # GNU ld spells DF_1_NODEFLIB "-z nodefaultlib" (it ignores "-z nodeflib" with a warning).
        "nodeflib": _cc(d / "libnodeflib.so", "int n(void) { return 3; }\n", "-Wl,-z,nodefaultlib"),
        "ext": _cc(d / "foo.cpython-311-x86_64-linux-gnu.so", "void PyInit_foo(void) {}\n"),
    }


def test_rpath_soname_needed_and_versions(libs: dict[str, Path]) -> None:
    info = read_elf(str(libs["rpath"]))
    assert info == readelf_view(libs["rpath"])
    assert info.soname == "libt.so.1"
    assert info.needed[0] == "libdep.so.2"
    assert "libc.so.6" in info.needed
    assert info.rpath == "$ORIGIN/a:/b"
    assert info.runpath is None
    assert (info.elf_class, info.data, info.machine, info.elf_type) == (64, 1, EM_X86_64, "ET_DYN")
    assert info.interpreter is None
    libc = {need.file: need.versions for need in info.version_needs}["libc.so.6"]
    assert "GLIBC_2.2.5" in libc


def test_runpath(libs: dict[str, Path]) -> None:
    info = read_elf(str(libs["runpath"]))
    assert info == readelf_view(libs["runpath"])
    assert (info.soname, info.rpath, info.runpath) == ("librun.so.3", None, "$ORIGIN/c")


def test_nodeflib(libs: dict[str, Path]) -> None:
    info = read_elf(str(libs["nodeflib"]))
    assert info == readelf_view(libs["nodeflib"])
    assert info.flags_1 & DF_1_NODEFLIB
    assert "NODEFLIB" in _run("readelf", "-dW", libs["nodeflib"])


def test_executable_interpreter(tmp_path: Path) -> None:
    src = tmp_path / "main.c"
    src.write_text("int main(void) { return 0; }\n")
    _run("cc", "-o", tmp_path / "prog", src)
    info = read_elf(str(tmp_path / "prog"))
    assert info == readelf_view(tmp_path / "prog")
    assert info.interpreter is not None and info.interpreter.startswith("/")


def test_32_bit(tmp_path: Path) -> None:
    src = tmp_path / "t.c"
    src.write_text("int f(void) { return 0; }\n")
    out = tmp_path / "lib32.so"
    built = subprocess.run(
        ["cc", "-m32", "-nostdlib", "-shared", "-fPIC", "-Wl,-soname,lib32.so.1", "-o", out, src],
        capture_output=True,
    )
    if built.returncode != 0:
        pytest.skip("cc cannot build 32-bit objects here")
    info = read_elf(str(out))
    assert info == readelf_view(out)
    assert (info.elf_class, info.machine, info.soname) == (32, EM_386, "lib32.so.1")


def test_static_object_has_no_dynamic_fields(tmp_path: Path) -> None:
    src = tmp_path / "o.c"
    src.write_text("int o(void) { return 0; }\n")
    _run("cc", "-c", "-o", tmp_path / "o.o", src)
    info = read_elf(str(tmp_path / "o.o"))
    assert info == readelf_view(tmp_path / "o.o")
    assert info.elf_type == "ET_REL" and info.needed == () and info.version_needs == ()


def _system_libraries() -> list[str]:
    ldd = subprocess.run(["ldd", "/bin/ls"], capture_output=True, text=True).stdout
    found = re.findall(r"=> (/\S+)", ldd)
    python = Path(sys.base_prefix) / "lib" / "libpython3.11.so.1.0"
    pyenv = Path("/root/.pyenv/versions/3.11.7/lib/libpython3.11.so.1.0")
    found += [str(p) for p in (python, pyenv) if os.access(p, os.R_OK)]
    return sorted(set(found))


@pytest.mark.parametrize("path", _system_libraries())
def test_system_library_matches_readelf(path: str) -> None:
    assert read_elf(path) == readelf_view(path)


_SYM = re.compile(
    r"^\s*\d+: ([0-9a-f]+)\s+\d+ (\w+)\s+(\w+)\s+(\w+)\s+(\w+) ([^\s@]+)(@@?)?([^\s(]*)"
)


def readelf_symbols(path: str) -> tuple[set[str], set[str], set[str]]:
    """binutils' view of the dynamic symbols: non-weak references ("name" or "name@V"),
    weak ones, and the versioned definitions a lookup can bind ("name@V", `@` or `@@`)."""
    strong: set[str] = set()
    weak: set[str] = set()
    exact: set[str] = set()
    for line in _run("readelf", "--dyn-syms", "-W", path).splitlines():
        m = _SYM.match(line)
        if m is None:
            continue
        value, kind, bind, vis, ndx, name, at, version = m.groups()
        shown = f"{name}@{version}" if at else name
        if ndx == "UND":
            if bind in ("GLOBAL", "WEAK"):
                (weak if bind == "WEAK" else strong).add(shown)
            continue
        if int(value, 16) == 0 and ndx != "ABS" and kind != "TLS":
            continue
        if ndx == "ABS" and not at and name in (read_elf(path).version_defs or ()):
            # The symbol GNU ld defines for each version node: readelf omits the version of
            # a symbol outside every section, but .gnu.version gives it its own.
            at, shown = "@@", f"{name}@{name}"
        if bind in ("GLOBAL", "WEAK", "UNIQUE") and vis in ("DEFAULT", "PROTECTED") and at:
            exact.add(shown)
    return strong, weak, exact


def exports_both_ways(path: str | Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Table, Hashed]:
    """What the object defines read into sets, and asked through its DT_GNU_HASH table."""
    monkeypatch.setattr(reader, "HASHED_FROM", 1 << 62)
    table = reader.read_exports(str(path))
    monkeypatch.setattr(reader, "HASHED_FROM", 0)
    hashed = reader.read_exports(str(path))
    monkeypatch.undo()
    assert isinstance(table, Table) and isinstance(hashed, Hashed)
    return table, hashed


def answers(exports: Definitions, names: set[bytes]) -> tuple[set[bytes], set[bytes]]:
    """Which of `names` ("name" or "name@V") a reference binds to in `exports`."""
    versioned = {n: n.partition(b"@")[0] for n in names if b"@" in n}
    return exports.bind_plain({n for n in names if b"@" not in n}), exports.bind_versioned(
        versioned
    )


def _asked(table: Table, path: str | Path) -> set[bytes]:
    """Names to ask an object about: what it defines, under every version it has and one it
    has not, what it references, and names it does not have at all."""
    defined = table.plain | table.loose | {k.partition(b"@")[0] for k in table.exact}
    versions = {k.partition(b"@")[2] for k in table.exact} | {b"NO_SUCH_VERSION_1.0"}
    refs = {os.fsencode(n) for n, _, _ in read_symbols(str(path)).references()}
    asked = defined | refs | {b"no_such_symbol", b"", b"_ZN3c104cuda9SetDeviceEi"}
    return asked | {n + b"@" + v for n in defined | refs for v in versions}


@pytest.mark.parametrize("path", _system_libraries())
def test_system_library_symbols_match_readelf(path: str, monkeypatch: pytest.MonkeyPatch) -> None:
    symbols = read_symbols(path)
    refs = {f"{n}@{v}" if v else n for n, v, _ in symbols.references()}
    weak = {w.rsplit("@", 1)[0] if w.count("@") == 2 else w for w in symbols.weak_undefined}
    strong, readelf_weak, exact = readelf_symbols(path)
    assert (refs, weak) == (strong, readelf_weak)
    # Each versioned reference names the file its version is needed from.
    files = {need.file for need in read_elf(path).version_needs}
    assert {f for _, v, f in symbols.references() if v} <= files
    # What it defines, read into sets and asked through its hash table: the same answers,
    # and every versioned definition readelf lists among them.
    table, hashed = exports_both_ways(path, monkeypatch)
    assert table.exact == {k.encode() for k in exact}
    asked = _asked(table, path)
    assert answers(table, asked) == answers(hashed, asked)
    assert hashed.bind_versioned({k.encode(): k.partition("@")[0].encode() for k in exact}) == {
        k.encode() for k in exact
    }


def readelf_definitions(path: str | Path) -> set[str]:
    """Names a lookup can bind to in an unversioned object, as readelf lists them."""
    out = set()
    for line in _run("readelf", "--dyn-syms", "-W", path).splitlines():
        m = _SYM.match(line)
        if m is None:
            continue
        value, kind, bind, vis, ndx, name, _, _ = m.groups()
        if ndx == "UND" or (int(value, 16) == 0 and ndx != "ABS" and kind != "TLS"):
            continue
        if bind in ("GLOBAL", "WEAK", "UNIQUE") and vis in ("DEFAULT", "PROTECTED"):
            out.add(name)
    return out


def test_unversioned_library_symbols_match_readelf(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Defined, weak, protected, hidden, TLS and common kinds; strong and weak references;
    # "bar" is a tail of "foo_bar", which the link editor stores once.
    source = (
        "int foo_bar(void) { return 1; }\nint bar(void) { return 2; }\n"
        "__attribute__((weak)) int soft(void) { return 3; }\n"
        '__attribute__((visibility("protected"))) int guarded(void) { return 4; }\n'
        '__attribute__((visibility("hidden"))) int secret(void) { return 5; }\n'
        "__thread int per_thread = 6;\nint shared_data = 7;\n"
        "extern int needed_elsewhere(void);\nextern int maybe(void) __attribute__((weak));\n"
        "int use(void) { return needed_elsewhere() + (maybe ? maybe() : 0) + secret(); }\n"
    )
    lib = _cc(tmp_path / "libplain.so", source)
    exports = reader.read_exports(str(lib))
    assert isinstance(exports, Table) and exports.exact == frozenset()
    assert exports.plain == exports.loose == {n.encode() for n in readelf_definitions(lib)}
    assert {b"bar", b"foo_bar", b"soft", b"guarded", b"per_thread"} <= exports.plain
    assert b"secret" not in exports.plain
    table, hashed = exports_both_ways(lib, monkeypatch)
    asked = _asked(table, lib)
    assert answers(table, asked) == answers(hashed, asked)
    assert hashed.bind_plain({b"bar", b"secret", b"needed_elsewhere", b"maybe"}) == {b"bar"}
    symbols = read_symbols(str(lib))
    strong, weak, _ = readelf_symbols(str(lib))
    assert set(symbols.undefined) == strong and "needed_elsewhere" in strong
    assert set(symbols.weak_undefined) == weak and "maybe" in weak


def _handmade(elf_class: int, order: str, machine: int) -> tuple[bytes, ElfInfo]:
    """A minimal dynamic ELF object of any class and byte order, with its expected model.

    This machine has no linker for foreign targets, so big-endian objects are written here.
    """
    addr = "Q" if elf_class == 64 else "I"
    strings = b"\0libbig.so.1\0libc.so.6\0libm.so.6\0$ORIGIN/lib\0GLIBC_2.2\0GLIBC_2.3\0"
    names = strings.decode().split("\0")[1:-1]
    off = {name: strings.index(b"\0" + name.encode() + b"\0") + 1 for name in names}
    ehsize, phentsize = (64, 56) if elf_class == 64 else (52, 32)
    base = 0x10000
    str_off = ehsize + 2 * phentsize
    vn_off = str_off + len(strings) + (-(str_off + len(strings)) % 8)
    verneed = struct.pack(order + "HHIII", 1, 2, off["libc.so.6"], 16, 0)
    verneed += struct.pack(order + "IHHII", 0, 0, 2, off["GLIBC_2.2"], 16)
    verneed += struct.pack(order + "IHHII", 0, 0, 3, off["GLIBC_2.3"], 0)
    dyn_off = vn_off + len(verneed)
    dynamic = [
        (1, off["libc.so.6"]),
        (14, off["libbig.so.1"]),
        (1, off["libm.so.6"]),
        (29, off["$ORIGIN/lib"]),
        (5, base + str_off),
        (10, len(strings)),
        (0x6FFFFFFB, DF_1_NODEFLIB),
        (0x6FFFFFFE, base + vn_off),
        (0x6FFFFFFF, 1),
        (0, 0),
    ]
    dyn = b"".join(struct.pack(order + ("qQ" if elf_class == 64 else "iI"), *e) for e in dynamic)
    total = dyn_off + len(dyn)
    ident = b"\x7fELF" + bytes([elf_class // 32, 1 if order == "<" else 2, 1]) + bytes(9)
    ehdr = ident + struct.pack(
        order + "HHI" + addr * 3 + "IHHHHHH", 3, machine, 1, 0, ehsize, 0, 0, ehsize, phentsize,
        2, 0, 0, 0,
    )  # fmt: skip
    if elf_class == 64:
        phdr = struct.pack(order + "IIQQQQQQ", 1, 5, 0, base, base, total, total, 0x1000)
        phdr += struct.pack(order + "IIQQQQQQ", 2, 6, dyn_off, base + dyn_off, 0, len(dyn), 0, 8)
    else:
        phdr = struct.pack(order + "8I", 1, 0, base, base, total, total, 5, 0x1000)
        phdr += struct.pack(order + "8I", 2, dyn_off, base + dyn_off, 0, len(dyn), 0, 6, 4)
    image = ehdr + phdr + strings
    image += bytes(vn_off - len(image)) + verneed + dyn
    expected = ElfInfo(
        path="",
        elf_class=elf_class,
        data=1 if order == "<" else 2,
        machine=machine,
        elf_type="ET_DYN",
        soname="libbig.so.1",
        needed=("libc.so.6", "libm.so.6"),
        runpath="$ORIGIN/lib",
        flags_1=DF_1_NODEFLIB,
        version_needs=(VersionNeed(file="libc.so.6", versions=("GLIBC_2.2", "GLIBC_2.3")),),
    )
    return image, expected


@pytest.mark.parametrize(
    ("elf_class", "order", "machine"),
    [(64, ">", 21), (32, ">", 8), (64, "<", 183), (32, "<", 40)],  # ppc64, mips, aarch64, arm
)
def test_foreign_byte_order_and_machine(
    tmp_path: Path, elf_class: int, order: str, machine: int
) -> None:
    image, expected = _handmade(elf_class, order, machine)
    path = tmp_path / "libbig.so"
    path.write_bytes(image)
    info = read_elf(str(path))
    assert info == replace(expected, path=str(path))
    # readelf reads the dynamic table through the program headers when there are no sections;
    # version needs (from .gnu.version_r) and objdump's DT_FLAGS_1 number need sections.
    assert replace(info, version_needs=(), flags_1=0) == readelf_view(path)
    assert "Flags: NODEFLIB" in _run("readelf", "-dW", path)


def test_read_object_names_py_init(libs: dict[str, Path]) -> None:
    info, inits = read_object(str(libs["ext"]))
    assert inits == ("PyInit_foo",)
    assert info == read_elf(str(libs["ext"]))
    assert read_object(str(libs["dep"]))[1] == ()


@pytest.mark.parametrize("style", ["gnu", "sysv"])
def test_py_init_is_the_one_the_file_name_asks_exported(tmp_path: Path, style: str) -> None:
    # Python dlsyms PyInit_<what comes before the first dot>: defined and visible, in the
    # hash table (GNU) or, without one, named in the string table (SysV).
    source = (
        "void PyInit_foo(void) {}\n"
        '__attribute__((visibility("hidden"))) void PyInit_hid(void) {}\n'
        "extern void PyInit_ext(void);\nvoid use(void) { PyInit_ext(); }\n"
    )
    flags = [f"-Wl,--hash-style={style}", "-Wl,--allow-shlib-undefined"]
    ext = _cc(tmp_path / "foo.cpython-311-x86_64-linux-gnu.so", source, *flags)
    assert read_object(str(ext))[1] == ("PyInit_foo",)
    for other in ("bar.abi3.so", "hid.so"):  # another name asks another PyInit
        os.link(ext, tmp_path / other)
        assert read_object(str(tmp_path / other))[1] == ()
    if style == "gnu":
        os.link(ext, tmp_path / "ext.so")  # only referenced, never defined here
        assert read_object(str(tmp_path / "ext.so"))[1] == ()


def test_a_cached_probe_is_not_taken_for_a_hard_link_of_another_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from cudatx import cache as cache_module
    from cudatx.cache import open_cache
    from cudatx.loader.fileview import FileView

    monkeypatch.setattr(cache_module, "RACY_NS", 0)  # files written just now are kept
    ext = _cc(tmp_path / "foo.cpython-311-x86_64-linux-gnu.so", "void PyInit_foo(void) {}\n")
    os.link(ext, tmp_path / "bar.so")
    environ = {"CUDATX_CACHE_DIR": str(tmp_path / "cache")}
    first = open_cache(environ)
    assert first is not None
    assert FileView(first).inits(str(ext)) == ("PyInit_foo",)
    first.close()
    second = open_cache(environ)
    assert second is not None and second.get_file("elf", os.stat(ext)) is not None
    assert FileView(second).inits(str(tmp_path / "bar.so")) == ()
    assert FileView(second).inits(str(ext)) == ("PyInit_foo",)
    second.close()


def _reason(path: Path) -> str:
    with pytest.raises(ElfReadError) as caught:
        read_elf(str(path))
    with pytest.raises(ElfReadError) as caught_too:
        read_object(str(path))
    with pytest.raises(ElfReadError) as caught_rodata:
        rodata_sonames(str(path))
    assert caught.value.reason == caught_too.value.reason == caught_rodata.value.reason
    assert caught.value.path == str(path)
    return caught.value.reason


def test_text_file_is_not_elf(tmp_path: Path) -> None:
    (tmp_path / "libx.so").write_text("INPUT(-lfoo)\n")
    assert _reason(tmp_path / "libx.so") == "not an ELF file"
    (tmp_path / "empty.so").write_bytes(b"")
    assert _reason(tmp_path / "empty.so") == "not an ELF file"


@pytest.mark.parametrize("size", [2, 10, 100, "before-dynamic"])
def test_truncated(libs: dict[str, Path], tmp_path: Path, size: int | str) -> None:
    data = libs["rpath"].read_bytes()
    if size == "before-dynamic":
        segments = _run("readelf", "-lW", libs["rpath"])
        size = int(re.search(r"^\s*DYNAMIC\s+0x([0-9a-f]+)", segments, re.M)[1], 16) + 4  # type: ignore[index]
    cut = tmp_path / "libcut.so"
    cut.write_bytes(data[: int(size)])
    assert _reason(cut) == "truncated ELF file"


def test_malformed_header(libs: dict[str, Path], tmp_path: Path) -> None:
    data = bytearray(libs["rpath"].read_bytes())
    data[4] = 7  # EI_CLASS
    bad = tmp_path / "libbad.so"
    bad.write_bytes(bytes(data))
    assert _reason(bad).startswith("malformed ELF")


def test_garbage_string_offset(tmp_path: Path) -> None:
    image, _ = _handmade(64, "<", EM_X86_64)
    # DT_SONAME's value is the second dynamic entry; point it far past DT_STRSZ.
    dyn_off = len(image) - 10 * 16
    image = image[: dyn_off + 24] + struct.pack("<Q", 1 << 40) + image[dyn_off + 32 :]
    bad = tmp_path / "libgarbage.so"
    bad.write_bytes(image)
    with pytest.raises(ElfReadError, match="malformed ELF"):
        read_elf(str(bad))


def test_unreadable(tmp_path: Path) -> None:
    assert _reason(tmp_path) == "cannot read: Is a directory"
    assert _reason(tmp_path / "missing.so") == "cannot read: No such file or directory"


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads a mode 000 file")
def test_permission_denied(libs: dict[str, Path], tmp_path: Path) -> None:
    locked = tmp_path / "liblocked.so"
    shutil.copy(libs["dep"], locked)
    locked.chmod(0)
    try:
        assert _reason(locked) == "permission denied"
    finally:
        locked.chmod(0o644)


# --- rodata_sonames ---------------------------------------------------------------------------

NAMES_SOURCE = """\
static const char *names[] = {"libfoo.so.1", "cannot open libbar.so.2 now", "/opt/x/libbaz.so.3",
                              "libqux.so.%d", "not_a_lib.so.1", "libcuda.so.1"};
const char *name(int i) { return names[i]; }
"""
# In order of first appearance in .rodata, which is the order of the source at -O0.
NAMES_FOUND = ["libfoo.so.1", "libbar.so.2", "libbaz.so.3", "libqux.so", "libcuda.so.1"]
SONAME_TEXT = re.compile(r"lib[A-Za-z0-9_.+-]*?\.so(\.[0-9]+)*")


def _rodata_dump(path: str | Path) -> list[tuple[int, str]]:
    """readelf's string dump of .rodata as (offset, string); [] when there is no .rodata."""
    done = subprocess.run(
        ["readelf", "-p", ".rodata", str(path)], capture_output=True, text=True, errors="replace"
    )
    lines = re.findall(r"^\s*\[\s*([0-9a-f]+)\]  (.*)$", done.stdout, re.M)
    return [(int(offset, 16), text) for offset, text in lines]


def _sections(path: Path) -> dict[str, tuple[int, int]]:
    """Section name -> (index, offset of its header in the file), from readelf."""
    shoff = int(re.search(r"Start of section headers:\s+(\d+)", _run("readelf", "-hW", path))[1])  # type: ignore[index]
    found = re.findall(r"^\s*\[\s*(\d+)\] (\S+)", _run("readelf", "-SW", path), re.M)
    return {name: (int(i), shoff + 64 * int(i)) for i, name in found}


@pytest.fixture(scope="module")
def names_lib(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _cc(tmp_path_factory.mktemp("rodata") / "libnames.so", NAMES_SOURCE, "-O0")


def test_rodata_sonames(names_lib: Path) -> None:
    found = rodata_sonames(str(names_lib))
    assert list(found) == NAMES_FOUND
    # The oracle: each name is in readelf's dump of .rodata, and they come in its order.
    dump = _rodata_dump(names_lib)
    first = [min(offset for offset, text in dump if name in text) for name in found]
    assert first == sorted(first)


def test_rodata_sonames_boundaries(tmp_path: Path) -> None:
    source = (
        'static const char *names[] = {"libnot.so.1x", "libsort.sorted", "xlibno.so.1",\n'
        '    "mylib.so", "libyes.so.2.%d", "load(libtwo.so.3)", "libyes.so.2"};\n'
        "const char *name(int i) { return names[i]; }\n"
    )
    lib = _cc(tmp_path / "libedge.so", source, "-O0")
    assert rodata_sonames(str(lib)) == ("libyes.so.2", "libtwo.so.3")


def _oracle_check(path: str | Path) -> tuple[str, ...]:
    found = rodata_sonames(str(path))
    dump = _rodata_dump(path)
    assert len(set(found)) == len(found)
    for name in found:  # every name returned is in readelf's dump, at a string boundary
        bounded = rf"(?<![A-Za-z0-9_.+-]){re.escape(name)}(?![A-Za-z0-9_+-])"
        assert any(re.search(bounded, text) for _, text in dump), name
    for _, text in dump:  # and every dumped string that is a whole soname is returned
        if SONAME_TEXT.fullmatch(text):
            assert text in found
    return found


@pytest.mark.parametrize("path", _system_libraries())
def test_rodata_sonames_of_system_library_match_readelf(path: str) -> None:
    found = _oracle_check(path)
    if Path(path).name == "libc.so.6" and any("libgcc_s.so.1" in t for _, t in _rodata_dump(path)):
        assert "libgcc_s.so.1" in found  # glibc dlopens it for unwinding


def test_rodata_sonames_without_rodata(tmp_path: Path) -> None:
    lib = _cc(tmp_path / "libplain.so", "int f(void) { return 0; }\n", "-O0")
    if ".rodata" in _sections(lib):
        _run("objcopy", "--remove-section", ".rodata", lib)
    assert ".rodata" not in _sections(lib)
    assert rodata_sonames(str(lib)) == ()


def test_rodata_sonames_without_section_headers(tmp_path: Path) -> None:
    image, _ = _handmade(64, "<", EM_X86_64)
    path = tmp_path / "libbig.so"
    path.write_bytes(image)
    assert rodata_sonames(str(path)) == ()


def test_rodata_sonames_extended_section_numbering(names_lib: Path, tmp_path: Path) -> None:
    """SHN_XINDEX in e_shstrndx, and e_shnum 0: both read from section 0, as readelf does."""
    data = bytearray(names_lib.read_bytes())
    shoff = struct.unpack_from("<Q", data, 0x28)[0]
    shnum, shstrndx = struct.unpack_from("<HH", data, 0x3C)
    struct.pack_into("<HH", data, 0x3C, 0, 0xFFFF)  # e_shnum, e_shstrndx
    struct.pack_into("<Q", data, shoff + 32, shnum)  # section 0's sh_size
    struct.pack_into("<I", data, shoff + 40, shstrndx)  # section 0's sh_link
    path = tmp_path / "libextended.so"
    path.write_bytes(bytes(data))
    assert list(_oracle_check(path)) == NAMES_FOUND
    assert read_elf(str(path)) == replace(read_elf(str(names_lib)), path=str(path))


def _patched(lib: Path, tmp_path: Path, section: str, fmt: str, at: int, value: int) -> Path:
    data = bytearray(lib.read_bytes())
    struct.pack_into(fmt, data, _sections(lib)[section][1] + at, value)
    path = tmp_path / "libpatched.so"
    path.write_bytes(bytes(data))
    return path


def test_rodata_sonames_nobits(names_lib: Path, tmp_path: Path) -> None:
    SHT_NOBITS = 8
    assert rodata_sonames(str(_patched(names_lib, tmp_path, ".rodata", "<I", 4, SHT_NOBITS))) == ()


def test_rodata_past_the_end_is_truncated(names_lib: Path, tmp_path: Path) -> None:
    path = _patched(names_lib, tmp_path, ".rodata", "<Q", 32, 1 << 40)  # sh_size
    with pytest.raises(ElfReadError, match="truncated ELF file"):
        rodata_sonames(str(path))


def test_rodata_sonames_of_truncated_file(names_lib: Path, tmp_path: Path) -> None:
    data = names_lib.read_bytes()
    # read_elf needs no section headers, so only rodata_sonames fails on the last two cuts.
    for size in (4, 40, 100, _sections(names_lib)[".rodata"][1], len(data) - 1):
        cut = tmp_path / "libcut.so"
        cut.write_bytes(data[:size])
        with pytest.raises(ElfReadError) as caught:
            rodata_sonames(str(cut))
        assert caught.value.reason == "truncated ELF file"


def test_rodata_sonames_bad_section_name_table(names_lib: Path, tmp_path: Path) -> None:
    data = bytearray(names_lib.read_bytes())
    struct.pack_into("<H", data, 0x3E, 999)  # e_shstrndx past the section count
    path = tmp_path / "libbadnames.so"
    path.write_bytes(bytes(data))
    with pytest.raises(ElfReadError, match="malformed ELF"):
        rodata_sonames(str(path))


def test_rodata_sonames_of_non_elf(tmp_path: Path) -> None:
    (tmp_path / "libfoo.so.1").write_bytes(b"libfoo.so.1\0libbar.so.2\0" * 10)
    with pytest.raises(ElfReadError, match="not an ELF file"):
        rodata_sonames(str(tmp_path / "libfoo.so.1"))


@pytest.mark.slow
def test_rodata_sonames_of_cudnn() -> None:
    """cuDNN names the libraries it dlopens in .rodata (design.md, section 2)."""
    from tests.support.torch_env import torch_env

    lib = next(torch_env().glob("lib/python3*/site-packages/nvidia/cudnn/lib"))
    front = _oracle_check(lib / "libcudnn.so.9")
    assert {"libcudnn_graph.so", "libcudnn_ops.so", "libcudnn_adv.so"} <= set(front)
    adv = _oracle_check(lib / "libcudnn_adv.so.9")
    assert "libcuda.so.1" in adv
    assert any(re.fullmatch(r"libcublasLt\.so\.\d+", name) for name in adv)


@settings(
    max_examples=300,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture],  # each example sets it anew
)
@given(
    pieces=st.lists(
        st.sampled_from(
            [b"lib", b"foo", b".so", b".1", b".", b"\0", b"/", b" ", b"x", b"-", b"%d", b"lib_a"]
        ),
        max_size=60,
    ),
    window=st.integers(min_value=1, max_value=12),
)
def test_rodata_windows_find_what_one_pass_finds(
    pieces: list[bytes], window: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # .rodata is scanned in windows cut after a byte outside a name: the names found are the
    # ones a scan of the whole section finds, wherever the cuts fall.
    data = b"".join(pieces)
    whole = list(dict.fromkeys(m.group() for m in reader._RODATA_SONAME.finditer(data)))
    monkeypatch.setattr(reader, "_WINDOW", window)
    found: dict[bytes, None] = {}
    for part in reader._name_windows(io.BytesIO(data), 0, len(data)):
        found.update(dict.fromkeys(m.group() for m in reader._RODATA_SONAME.finditer(part)))
    assert list(found) == whole


def test_gnu_hash_is_dl_new_hash() -> None:
    # Known answers (the GNU hash's own examples: "" and "printf"), and every length's
    # parity: the lookup hashes two bytes a step.
    assert gnu_hash(b"") == 5381 and gnu_hash(b"printf") == 0x156B2BB8

    def slow(name: bytes) -> int:
        h = 5381
        for c in name:
            h = (h * 33 + c) & 0xFFFFFFFF
        return h

    for name in (b"a", b"ab", b"\xff\xfe\x00", bytes(range(256)), b"_ZN3c104cuda9SetDeviceEi"):
        assert gnu_hash(name) == slow(name)
