"""Compile tiny real ELF shared libraries and CPython extensions with the system C compiler.

Every fixture library is a real object produced by ``cc -shared -fPIC`` and GNU ld; the
only post-link edit is the one GNU ld cannot express: an object carrying both DT_RPATH and
DT_RUNPATH (see :func:`compile_lib`).

The default C source of a library defines one function named after the output file
(:func:`symbol_for`), so every fixture is distinct, and calls the function of each of its
``needed`` libraries through a weak reference (it keeps working if a dependency was compiled
from a custom source that lacks the symbol).
"""

from __future__ import annotations

import os
import re
import shutil
import struct
import subprocess
import sysconfig
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "DF_1_NODEFLIB",
    "DT_AUXILIARY",
    "DT_FLAGS_1",
    "DT_NEEDED",
    "DT_RPATH",
    "DT_RUNPATH",
    "DT_SONAME",
    "BuildError",
    "DynamicInfo",
    "compile_extension",
    "compile_lib",
    "ext_suffix",
    "iter_dynamic_strings",
    "read_dynamic",
    "readelf_dynamic",
    "symbol_for",
]

DT_NULL = 0
DT_NEEDED = 1
DT_STRTAB = 5
DT_SONAME = 14
DT_RPATH = 15
DT_RUNPATH = 29
DT_FLAGS_1 = 0x6FFFFFFB
DT_AUXILIARY = 0x7FFFFFFD
DF_1_NODEFLIB = 0x800

_PT_LOAD = 1
_PT_DYNAMIC = 2


class BuildError(RuntimeError):
    """The compiler (or the post-link edit) failed; carries the command and its stderr."""

    def __init__(self, message: str, *, cmd: Sequence[str] = (), stderr: str = "") -> None:
        self.cmd = tuple(cmd)
        self.stderr = stderr
        detail = f"\n$ {' '.join(self.cmd)}" if self.cmd else ""
        detail += f"\n{stderr.rstrip()}" if stderr else ""
        super().__init__(message + detail)


def _cc() -> str:
    cc = os.environ.get("CC", "cc")
    found = shutil.which(cc)
    if found is None:
        raise BuildError(f"C compiler {cc!r} not found on PATH")
    return found


def symbol_for(file_name: str) -> str:
    """The C function a default-source fixture named ``file_name`` defines."""
    return "cudatx_fixture_" + re.sub(r"[^0-9A-Za-z_]", "_", Path(file_name).name)


def ext_suffix() -> str:
    """EXT_SUFFIX of the running interpreter (``.cpython-311-x86_64-linux-gnu.so``)."""
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    if not isinstance(suffix, str):
        raise BuildError("sysconfig has no EXT_SUFFIX")
    return suffix


# --------------------------------------------------------------------------------------
# A minimal ELF dynamic-section reader/writer (struct only, little-endian, ELF32 and ELF64)
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _DynEntry:
    index: int
    file_offset: int  # of this Elf_Dyn entry in the file
    tag: int
    value: int


@dataclass(frozen=True)
class _Elf:
    data: bytes
    elf_class: int  # 32 or 64
    dyn: tuple[_DynEntry, ...]
    strtab_offset: int | None  # file offset of the dynamic string table

    def string(self, offset: int) -> str:
        if self.strtab_offset is None:
            raise BuildError("ELF object has no DT_STRTAB")
        start = self.strtab_offset + offset
        end = self.data.index(b"\0", start)
        return self.data[start:end].decode()


def _parse_elf(data: bytes, path: Path) -> _Elf:
    if data[:4] != b"\x7fELF":
        raise BuildError(f"{path} is not an ELF file")
    ei_class, ei_data = data[4], data[5]
    if ei_data != 1:
        raise BuildError(f"{path}: only little-endian ELF is supported")
    if ei_class == 2:
        elf_class = 64
        (phoff,) = struct.unpack_from("<Q", data, 0x20)
        phentsize, phnum = struct.unpack_from("<HH", data, 0x36)
        ph_fmt, dyn_fmt = "<IIQQQQQQ", "<qQ"
    elif ei_class == 1:
        elf_class = 32
        (phoff,) = struct.unpack_from("<I", data, 0x1C)
        phentsize, phnum = struct.unpack_from("<HH", data, 0x2A)
        ph_fmt, dyn_fmt = "<IIIIIIII", "<iI"
    else:
        raise BuildError(f"{path}: unknown ELF class {ei_class}")

    loads: list[tuple[int, int, int]] = []  # (vaddr, offset, filesz)
    dynamic: tuple[int, int] | None = None  # (offset, filesz)
    for i in range(phnum):
        fields = struct.unpack_from(ph_fmt, data, phoff + i * phentsize)
        if elf_class == 64:
            p_type, _flags, p_offset, p_vaddr, _paddr, p_filesz = fields[:6]
        else:
            p_type, p_offset, p_vaddr, _paddr, p_filesz = fields[:5]
        if p_type == _PT_LOAD:
            loads.append((p_vaddr, p_offset, p_filesz))
        elif p_type == _PT_DYNAMIC:
            dynamic = (p_offset, p_filesz)
    if dynamic is None:
        raise BuildError(f"{path} has no PT_DYNAMIC segment")

    entry_size = struct.calcsize(dyn_fmt)
    entries: list[_DynEntry] = []
    offset, size = dynamic
    for index in range(size // entry_size):
        at = offset + index * entry_size
        tag, value = struct.unpack_from(dyn_fmt, data, at)
        entries.append(_DynEntry(index, at, tag, value))
        if tag == DT_NULL:
            break

    strtab_offset: int | None = None
    for entry in entries:
        if entry.tag == DT_STRTAB:
            for vaddr, file_off, filesz in loads:
                if vaddr <= entry.value < vaddr + filesz:
                    strtab_offset = entry.value - vaddr + file_off
                    break
    return _Elf(data, elf_class, tuple(entries), strtab_offset)


@dataclass(frozen=True)
class DynamicInfo:
    """What the dynamic section of an ELF object says (read with ``struct`` only)."""

    elf_class: int
    needed: tuple[str, ...]
    soname: str | None
    rpath: str | None
    runpath: str | None
    flags_1: int
    tags: tuple[int, ...]  # every d_tag in table order, for order-sensitive checks

    @property
    def nodeflib(self) -> bool:
        return bool(self.flags_1 & DF_1_NODEFLIB)


def read_dynamic(path: Path) -> DynamicInfo:
    elf = _parse_elf(Path(path).read_bytes(), Path(path))

    def first(tag: int) -> str | None:
        for entry in elf.dyn:
            if entry.tag == tag:
                return elf.string(entry.value)
        return None

    flags_1 = 0
    for entry in elf.dyn:
        if entry.tag == DT_FLAGS_1:
            flags_1 = entry.value
    return DynamicInfo(
        elf_class=elf.elf_class,
        needed=tuple(elf.string(e.value) for e in elf.dyn if e.tag == DT_NEEDED),
        soname=first(DT_SONAME),
        rpath=first(DT_RPATH),
        runpath=first(DT_RUNPATH),
        flags_1=flags_1,
        tags=tuple(e.tag for e in elf.dyn),
    )


def readelf_dynamic(path: Path) -> str:
    """``readelf -d path`` (binutils), for cross-checking :func:`read_dynamic`."""
    proc = subprocess.run(
        ["readelf", "-d", os.fspath(path)], capture_output=True, text=True, check=False
    )
    if proc.returncode != 0:
        raise BuildError("readelf failed", cmd=proc.args, stderr=proc.stderr)
    return proc.stdout


def _retag_auxiliary_as_runpath(path: Path, runpath: str) -> None:
    """Turn the DT_AUXILIARY entry whose string is ``runpath`` into DT_RUNPATH, in place.

    GNU ld emits DT_RPATH or DT_RUNPATH, never both. To get both we link with the RPATH
    and ``--auxiliary=<runpath string>``: ld then puts the runpath string in .dynstr and a
    DT_AUXILIARY entry pointing at it. Both tags take a string-table offset as value, so
    changing d_tag alone gives a well-formed DT_RUNPATH (nothing else refers to the entry).
    """
    data = bytearray(path.read_bytes())
    elf = _parse_elf(bytes(data), path)
    matches = [e for e in elf.dyn if e.tag == DT_AUXILIARY and elf.string(e.value) == runpath]
    if len(matches) != 1:
        raise BuildError(f"{path}: expected one DT_AUXILIARY carrier for {runpath!r}")
    tag_fmt = "<q" if elf.elf_class == 64 else "<i"
    struct.pack_into(tag_fmt, data, matches[0].file_offset, DT_RUNPATH)
    path.write_bytes(bytes(data))


# --------------------------------------------------------------------------------------
# Compilation
# --------------------------------------------------------------------------------------


def _weak_calls(needed: Sequence[Path]) -> tuple[str, str]:
    """C declarations and a summed call expression for each needed library's function."""
    symbols = list(dict.fromkeys(symbol_for(p.name) for p in needed))
    decls = "".join(f"extern int {s}(void) __attribute__((weak));\n" for s in symbols)
    calls = "".join(f" + ({s} ? {s}() : 0)" for s in symbols)
    return decls, "0" + calls


def _default_lib_source(out: Path, needed: Sequence[Path]) -> str:
    decls, calls = _weak_calls(needed)
    # A per-file constant keeps .text distinct too, not just the symbol name.
    tag = sum(out.name.encode()) % 100000
    return (
        f"/* cudatx test fixture {out.name} */\n{decls}"
        f"int {symbol_for(out.name)}(void) {{ return {tag} + {calls}; }}\n"
    )


def _run_cc(cmd: list[str], what: str, cwd: Path | None = None) -> None:
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False, cwd=cwd)
    if proc.returncode != 0:
        raise BuildError(
            f"compiling {what} failed (rc={proc.returncode})", cmd=cmd, stderr=proc.stderr
        )


def _xlinker(*args: str) -> list[str]:
    """Pass arguments to ld verbatim (``-Wl,`` would split values at commas)."""
    out: list[str] = []
    for arg in args:
        out += ["-Xlinker", arg]
    return out


def _base_flags(m32: bool) -> list[str]:
    if m32:
        # No 32-bit libc is installed (no multilib): link nothing but our own object.
        return ["-m32", "-nostdlib", "-shared", "-fPIC"]
    return ["-shared", "-fPIC"]


def _stub_for_name(workdir: Path, index: int, name: str, m32: bool) -> Path:
    """A throw-away library whose SONAME is ``name``: linking it records ``name`` in
    DT_NEEDED; it is deleted afterwards, so the name resolves to nothing unless a test
    provides it."""
    stub_dir = workdir / f"stub{index}"
    stub_dir.mkdir()
    src = stub_dir / "stub.c"
    src.write_text(f"int cudatx_stub_{index}(void) {{ return {index}; }}\n")
    stub = stub_dir / "libstub.so"
    cmd = [
        _cc(),
        *_base_flags(m32),
        "-o",
        os.fspath(stub),
        os.fspath(src),
        *_xlinker("-soname", name),
    ]
    _run_cc(cmd, f"stub for DT_NEEDED {name!r}")
    return stub


def _link_args(
    workdir: Path,
    *,
    soname: str | None,
    needed: Sequence[Path],
    rpath: str | None,
    runpath: str | None,
    nodeflib: bool,
    m32: bool,
    extra_needed_names: Sequence[str],
    version_script: str | None = None,
) -> list[str]:
    args: list[str] = []
    if soname is not None:
        args += _xlinker("-soname", soname)
    if version_script is not None:
        script = workdir / "version.map"
        script.write_text(version_script)
        args += _xlinker(f"--version-script={script}")
    # Keep every DT_NEEDED we ask for, used or not, in command-line order.
    args += _xlinker("--no-as-needed")
    linkdir = workdir / "needed"  # the compiler's cwd
    linkdir.mkdir()
    for dep in needed:
        dep = Path(dep)
        if not dep.is_file():
            raise BuildError(f"needed library {dep} does not exist")
        if read_dynamic(dep).soname is not None:
            # A full path: ld records the dependency's DT_SONAME.
            args.append(os.fspath(dep.absolute()))
        else:
            # Without a SONAME ld records the input name exactly as given, so give it the
            # bare file name, relative to the compiler's cwd. (``-L<dir> -l:<file>`` would
            # also let <dir> capture the driver's implicit -lc / -lgcc_s.)
            alias = linkdir / dep.name
            if alias.is_symlink() and alias.resolve() != dep.resolve():
                raise BuildError(f"two SONAME-less needed libraries are named {dep.name!r}")
            if not alias.is_symlink():
                alias.symlink_to(dep.absolute())
            args.append(dep.name)
    for index, name in enumerate(extra_needed_names):
        args.append(os.fspath(_stub_for_name(workdir, index, name, m32)))
    if rpath is not None:
        args += _xlinker("--disable-new-dtags", "-rpath", rpath)
        if runpath is not None:
            args += _xlinker("--auxiliary", runpath)  # retagged to DT_RUNPATH after linking
    elif runpath is not None:
        args += _xlinker("--enable-new-dtags", "-rpath", runpath)
    if nodeflib:
        # GNU ld spells DF_1_NODEFLIB "-z nodefaultlib"; "-z nodeflib" is ignored with a warning.
        args += _xlinker("-z", "nodefaultlib")
    return args


def _build(
    out: Path,
    source: str,
    *,
    cflags: Sequence[str],
    soname: str | None,
    needed: Sequence[Path],
    rpath: str | None,
    runpath: str | None,
    nodeflib: bool,
    m32: bool,
    extra_needed_names: Sequence[str],
    version_script: str | None = None,
) -> Path:
    out = Path(out).absolute()
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="cudatx-cbuild-") as tmp:
        workdir = Path(tmp)
        src = workdir / (re.sub(r"[^0-9A-Za-z_]", "_", out.name) + ".c")
        src.write_text(source)
        link = _link_args(
            workdir,
            soname=soname,
            needed=needed,
            rpath=rpath,
            runpath=runpath,
            nodeflib=nodeflib,
            m32=m32,
            extra_needed_names=extra_needed_names,
            version_script=version_script,
        )
        cmd = [_cc(), *_base_flags(m32), *cflags, "-o", os.fspath(out), os.fspath(src), *link]
        _run_cc(cmd, out.name, cwd=workdir / "needed")
    if rpath is not None and runpath is not None:
        _retag_auxiliary_as_runpath(out, runpath)
    return out


def compile_lib(
    out: Path,
    *,
    soname: str | None = None,
    needed: Sequence[Path] = (),
    rpath: str | None = None,
    runpath: str | None = None,
    nodeflib: bool = False,
    m32: bool = False,
    source: str | None = None,
    extra_needed_names: Sequence[str] = (),
    version_script: str | None = None,
) -> Path:
    """Compile a tiny shared library at ``out`` and return its absolute path.

    - ``needed``: libraries linked in order; each lands in DT_NEEDED under its DT_SONAME,
      or its file name when it has none. ``extra_needed_names``: further DT_NEEDED names
      (after ``needed``) that no file provides (linked against a deleted stub).
    - ``rpath`` -> DT_RPATH, ``runpath`` -> DT_RUNPATH; both -> one object with both tags
      (GNU ld cannot, so the runpath string is linked as DT_AUXILIARY and retagged).
      ``$ORIGIN`` and friends are kept literally (no shell is involved).
    - ``nodeflib`` -> DF_1_NODEFLIB in DT_FLAGS_1.
    - ``m32`` -> a real ELFCLASS32 i386 object (``-m32 -nostdlib``; no 32-bit libc needed).
    - ``source``: C source to compile instead of the default one.
    - ``version_script``: the text of a GNU ld version script (``--version-script``).
    """
    out = Path(out)
    needed = [Path(p) for p in needed]
    return _build(
        out,
        source if source is not None else _default_lib_source(out, needed),
        cflags=(),
        soname=soname,
        needed=needed,
        rpath=rpath,
        runpath=runpath,
        nodeflib=nodeflib,
        m32=m32,
        extra_needed_names=extra_needed_names,
        version_script=version_script,
    )


def _default_extension_source(module: str, needed: Sequence[Path]) -> str:
    decls, calls = _weak_calls(needed)
    return f"""#define PY_SSIZE_T_CLEAN
#include <Python.h>
{decls}
static long deps_sum(void) {{ return {calls}; }}

static PyObject *probe(PyObject *self, PyObject *args) {{
    (void)self; (void)args;
    return PyLong_FromLong(deps_sum());
}}

static PyMethodDef methods[] = {{
    {{"probe", probe, METH_NOARGS, "Call each needed library's fixture function."}},
    {{NULL, NULL, 0, NULL}},
}};

static struct PyModuleDef moduledef = {{
    PyModuleDef_HEAD_INIT, "{module}", "cudatx test fixture extension", -1, methods,
}};

PyMODINIT_FUNC PyInit_{module}(void) {{
    PyObject *m = PyModule_Create(&moduledef);
    if (m == NULL) return NULL;
    /* Call every needed library at init, so the import really uses them. */
    if (PyModule_AddIntConstant(m, "deps_sum", deps_sum()) < 0) {{
        Py_DECREF(m);
        return NULL;
    }}
    return m;
}}
"""


def compile_extension(
    out_dir: Path,
    module: str,
    *,
    soname: str | None = None,
    needed: Sequence[Path] = (),
    rpath: str | None = None,
    runpath: str | None = None,
    nodeflib: bool = False,
    m32: bool = False,
    source: str | None = None,
    extra_needed_names: Sequence[str] = (),
    version_script: str | None = None,
) -> Path:
    """Compile a real CPython extension ``<out_dir>/<module><EXT_SUFFIX>`` for the running
    interpreter, defining ``PyInit_<module>`` and calling one function of each ``needed``
    library at import time (exposed as the module constant ``deps_sum`` and ``probe()``).

    ``module`` is the last component of the dotted name (``_ext`` for ``fixpkg._ext``).
    Keyword options are those of :func:`compile_lib`.
    """
    if not module.isidentifier():
        raise ValueError(f"extension module name must be an identifier, not {module!r}")
    needed = [Path(p) for p in needed]
    include = sysconfig.get_paths()["include"]
    return _build(
        Path(out_dir) / f"{module}{ext_suffix()}",
        source if source is not None else _default_extension_source(module, needed),
        cflags=[f"-I{include}"],
        soname=soname,
        needed=needed,
        rpath=rpath,
        runpath=runpath,
        nodeflib=nodeflib,
        m32=m32,
        extra_needed_names=extra_needed_names,
        version_script=version_script,
    )


def iter_dynamic_strings(path: Path) -> Iterator[tuple[int, str | int]]:
    """(d_tag, string or value) for each dynamic entry: strings for string-valued tags."""
    elf = _parse_elf(Path(path).read_bytes(), Path(path))
    string_tags = {DT_NEEDED, DT_SONAME, DT_RPATH, DT_RUNPATH, DT_AUXILIARY}
    for entry in elf.dyn:
        yield entry.tag, elf.string(entry.value) if entry.tag in string_tags else entry.value
