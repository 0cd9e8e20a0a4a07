"""The removal planner against reality: an oracle property test.

Hypothesis builds random environments out of a pool of real libraries and real extension
modules compiled once per module: six library *slots* (``libslot0.so.1`` .. ``libslot5.so.1``,
each in six variants that differ in DT_NEEDED on lower slots and in DT_RPATH / DT_RUNPATH /
both / none, over folder lists that sometimes name a folder nothing ships) and four
extension modules (``mod0._ext`` .. ``mod3._ext``, each in six variants of needs and search
paths). An example picks which library distribution (``dist-a`` .. ``dist-d``) ships which
slot, in which variant, at which folder ``slotlib/<a|b|c>`` -- two distributions may ship
the same path (co-owned: the later install wins the bytes) -- which modules are installed
in which variant, an install order, sometimes an LD_LIBRARY_PATH (given to cudatx and to
every real import), and a non-empty set of library distributions to remove. Wheels are
packed from the precompiled bytes and installed by real uv into a fresh venv, one ``uv pip
install`` per install group so co-owned bytes really overwrite.

Then the oracle:

- ``cudatx remove SET --dry-run --json --no-requirements-check`` runs on the venv;
- a copy of the venv (``cp -a``) gets the change cudatx makes: a real ``uv pip uninstall
  SET``, the rows a staying RECORD lists with the same hash first taken out of the leaving
  RECORDs (cudatx keeps those files);
- each module is imported by a fresh interpreter in the venv before and in the copy after.

The modules cudatx's ``broken_roots`` names must be exactly the modules that imported before
and fail after; its ``losses`` exactly the distributions that stay and lose files their
RECORD lists (or hold other bytes there); ``safe`` must say "nothing stops importing and
nothing is lost"; the exit code must follow ``safe``; the modules that import before must
be exactly those cudatx's scan loads (a module broken before is never blamed on the plan);
and the dry run changes nothing on disk.
On a mismatch the failure shows the layout, cudatx's JSON and the real import errors, and
keeps the example's folders for a rerun by hand.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import json
import os
import random
import shutil
import subprocess
import tempfile
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, note, settings
from hypothesis import strategies as st

from cudatx.discover.target import start_query
from cudatx.scan import scan
from tests.support import (
    build_wheel,
    compile_extension,
    compile_lib,
    ext_suffix,
    make_venv,
    site_packages,
    symbol_for,
    uv_install,
    uv_uninstall,
    venv_python,
)
from tests.support.cli import cudatx
from tests.support.examples import ORACLE_EXAMPLES
from tests.support.paths import REPO

SLOTS = 6  # libslot0.so.1 .. libslot5.so.1; slot i may need slots < i
MODULES = 4  # mod0._ext .. mod3._ext
VARIANTS = 6  # compiled variants of every slot and every module
FOLDERS = ("a", "b", "c")  # slotlib/<k>: where distributions put slot files
MISSING = "z"  # named by search paths, shipped by nobody
LIB_DISTS = ("dist-a", "dist-b", "dist-c", "dist-d")
VERSION = "1.0"
POOL_SEED = 20240604  # the pool is the same on every run, as the examples are

pytestmark = pytest.mark.oracle


def soname(slot: int) -> str:
    return f"libslot{slot}.so.1"


def module_name(index: int) -> str:
    return f"mod{index}._ext"


# --------------------------------------------------------------------------------------
# The pool: every file an example can use, compiled once per test module
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Variant:
    """One compiled library or extension: what it needs and where it looks."""

    path: Path  # the compiled file in the pool
    needs: tuple[int, ...]  # slots, in DT_NEEDED order
    rpath: tuple[str, ...] | None  # folders (a, b, c, z) named by DT_RPATH
    runpath: tuple[str, ...] | None  # ... by DT_RUNPATH

    def describe(self) -> str:
        needs = ",".join(soname(s) for s in self.needs) or "nothing"
        paths = []
        if self.rpath is not None:
            paths.append("RPATH " + ":".join(self.rpath))
        if self.runpath is not None:
            paths.append("RUNPATH " + ":".join(self.runpath))
        return f"needs {needs}; " + ("; ".join(paths) or "no search path")


@dataclass(frozen=True)
class Pool:
    root: Path
    libs: tuple[tuple[Variant, ...], ...]  # [slot][variant]
    exts: tuple[tuple[Variant, ...], ...]  # [module][variant]

    # Hypothesis prints the fixtures with every falsifying example: keep the pool short.
    def __repr__(self) -> str:
        return f"Pool({self.root})"

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(repr(self))


_KINDS = ("none", "rpath", "runpath", "both")


def _folder_list(rng: random.Random) -> tuple[str, ...]:
    """An ordered list of slotlib folders, often with the one nobody ships in it."""
    folders = rng.sample(FOLDERS, rng.choice((1, 2, 2, 3, 3)))
    if rng.random() < 0.4:
        folders.insert(rng.randrange(len(folders) + 1), MISSING)
    return tuple(folders)


def _paths(kind: str, rng: random.Random) -> tuple[tuple[str, ...] | None, tuple[str, ...] | None]:
    rpath = _folder_list(rng) if kind in ("rpath", "both") else None
    runpath = _folder_list(rng) if kind in ("runpath", "both") else None
    return rpath, runpath


def _spec(folders: tuple[str, ...] | None, prefix: str) -> str | None:
    if folders is None:
        return None
    return ":".join(f"$ORIGIN/{prefix}slotlib/{k}" for k in folders)


def _slot_source(slot: int, variant: int) -> str:
    # The function every user of the slot calls (weakly) at import; a per-variant constant
    # gives every variant bytes of its own. No soname-shaped strings in .rodata.
    return f"int {symbol_for(soname(slot))}(void) {{ return {100 * slot + variant + 1}; }}\n"


def _compile_pool(root: Path) -> Pool:
    rng = random.Random(POOL_SEED)
    # Link stubs: linking one records its DT_SONAME in DT_NEEDED; they are never installed.
    stubs = []
    for slot in range(SLOTS):
        stub = root / "stubs" / soname(slot)
        stub.parent.mkdir(parents=True, exist_ok=True)
        stubs.append(stub)

    lib_meta: dict[tuple[int, int], tuple[tuple[int, ...], Any, Any]] = {}
    for slot in range(SLOTS):
        for v in range(VARIANTS):
            if slot == 0:
                needs: tuple[int, ...] = ()
            else:
                k = rng.choice((1, 1, 2)) if slot > 1 else 1
                needs = tuple(sorted(rng.sample(range(slot), k), reverse=rng.random() < 0.5))
            # Every kind appears among the variants of a slot; the rest at random.
            kind = _KINDS[v] if v < len(_KINDS) else rng.choice(_KINDS)
            rpath, runpath = _paths(kind, rng)
            lib_meta[slot, v] = (needs, rpath, runpath)
    ext_meta: dict[tuple[int, int], tuple[tuple[int, ...], Any, Any]] = {}
    for module in range(MODULES):
        for v in range(VARIANTS):
            needs = tuple(rng.sample(range(SLOTS), rng.choice((1, 1, 2, 3))))
            # A module with no search path at all can only be broken: one variant in six.
            kind = ("rpath", "runpath", "both", "rpath", "runpath", "none")[v]
            rpath, runpath = _paths(kind, rng)
            ext_meta[module, v] = (needs, rpath, runpath)

    def build_stub(slot: int) -> Path:
        return compile_lib(stubs[slot], soname=soname(slot))

    def build_lib(slot: int, v: int) -> Variant:
        needs, rpath, runpath = lib_meta[slot, v]
        out = root / "libs" / f"{slot}-{v}" / soname(slot)
        out.parent.mkdir(parents=True)
        compile_lib(
            out,
            soname=soname(slot),
            needed=[stubs[s] for s in needs],
            rpath=_spec(rpath, "../../"),
            runpath=_spec(runpath, "../../"),
            source=_slot_source(slot, v),
        )
        return Variant(out, needs, rpath, runpath)

    def build_ext(module: int, v: int) -> Variant:
        needs, rpath, runpath = ext_meta[module, v]
        folder = root / "exts" / f"{module}-{v}"
        folder.mkdir(parents=True)
        out = compile_extension(
            folder,
            "_ext",
            needed=[stubs[s] for s in needs],
            rpath=_spec(rpath, "../"),
            runpath=_spec(runpath, "../"),
        )
        return Variant(out, needs, rpath, runpath)

    with ThreadPoolExecutor(os.cpu_count() or 2) as pool:
        list(pool.map(build_stub, range(SLOTS)))
        libs = pool.map(
            lambda sv: build_lib(*sv), [(s, v) for s in range(SLOTS) for v in range(VARIANTS)]
        )
        exts = pool.map(
            lambda mv: build_ext(*mv), [(m, v) for m in range(MODULES) for v in range(VARIANTS)]
        )
        lib_list, ext_list = list(libs), list(exts)
    return Pool(
        root,
        tuple(tuple(lib_list[s * VARIANTS : (s + 1) * VARIANTS]) for s in range(SLOTS)),
        tuple(tuple(ext_list[m * VARIANTS : (m + 1) * VARIANTS]) for m in range(MODULES)),
    )


@pytest.fixture(scope="module")
def pool(tmp_path_factory: pytest.TempPathFactory) -> Pool:
    return _compile_pool(tmp_path_factory.mktemp("oracle-pool"))


@pytest.fixture(scope="module")
def workers() -> Iterator[ThreadPoolExecutor]:
    with ThreadPoolExecutor(max_workers=2 * MODULES) as executor:
        yield executor


# --------------------------------------------------------------------------------------
# Layouts: what one example installs and removes
# --------------------------------------------------------------------------------------

Position = tuple[int, str]  # (slot, folder): the file slotlib/<folder>/libslot<slot>.so.1


def rel_path(position: Position) -> str:
    slot, folder = position
    return f"slotlib/{folder}/{soname(slot)}"


@dataclass(frozen=True)
class Layout:
    files: dict[str, dict[Position, int]]  # library distribution -> position -> variant
    modules: tuple[int | None, ...]  # variant of each module; None: not installed
    order: tuple[str, ...]  # install order of the library distributions
    remove: tuple[str, ...]  # sorted
    # Folders (a, b, c, z) of LD_LIBRARY_PATH in the importing process; None: unset.
    ld_library_path: tuple[str, ...] | None = None

    def llp(self, venv: Path) -> str | None:
        """LD_LIBRARY_PATH for ``venv``: absolute, so the copy gets its own folders."""
        if self.ld_library_path is None:
            return None
        site = site_packages(venv)
        return ":".join(os.fspath(site / "slotlib" / k) for k in self.ld_library_path)

    def installed_modules(self) -> list[str]:
        return [module_name(m) for m, v in enumerate(self.modules) if v is not None]

    def groups(self) -> list[list[str]]:
        """Install calls: the order cut wherever a distribution shares a path with the call
        it would join, so a later owner's bytes really overwrite an earlier one's."""
        groups: list[list[str]] = []
        taken: set[Position] = set()
        for dist in self.order:
            mine = set(self.files[dist])
            if not groups or mine & taken:
                groups.append([])
                taken = set()
            groups[-1].append(dist)
            taken |= mine
        return groups

    def owners(self) -> dict[Position, list[str]]:
        found: dict[Position, list[str]] = {}
        for dist in self.order:
            for position in self.files[dist]:
                found.setdefault(position, []).append(dist)
        return found

    def describe(self, pool: Pool) -> str:
        lines = ["library distributions (install calls in order, modules with the first):"]
        for n, group in enumerate(self.groups(), 1):
            lines.append(f"  install call {n}: {' '.join(group)}")
        for dist in self.order:
            lines.append(f"  {dist}:")
            for position, v in sorted(self.files[dist].items()):
                lines.append(
                    f"    {rel_path(position)}  slot{position[0]} v{v}: "
                    + pool.libs[position[0]][v].describe()
                )
        co_owned = {p: o for p, o in self.owners().items() if len(o) > 1}
        for position, owners in sorted(co_owned.items()):
            lines.append(
                f"  co-owned {rel_path(position)}: {', '.join(owners)} (bytes of {owners[-1]})"
            )
        lines.append("modules (RPATH/RUNPATH folders are slotlib/<k> next to the package):")
        for m, mv in enumerate(self.modules):
            if mv is not None:
                lines.append(f"  {module_name(m)} v{mv}: " + pool.exts[m][mv].describe())
        if self.ld_library_path is not None:
            folders = ":".join(self.ld_library_path)
            lines.append(f"LD_LIBRARY_PATH: {folders} (slotlib/<k>, in every process)")
        lines.append(f"remove: {' '.join(self.remove)}")
        return "\n".join(lines)


_POSITIONS = [(slot, folder) for slot in range(SLOTS) for folder in FOLDERS]
# How many distributions ship one position: mostly one, sometimes none, sometimes two
# (co-owned). Shrinking goes to the first choice: nobody ships it.
_OWNER_COUNTS = st.sampled_from((0, 1, 1, 1, 2))
_MODULE_VARIANTS = st.sampled_from((None, *range(VARIANTS)))
# Mostly unset; else it comes after RPATH and before RUNPATH, and may name what is missing.
_LLPS = st.sampled_from((None, None, None, None, ("a",), ("b",), ("c", "a"), (MISSING, "b")))


@st.composite
def layouts(draw: st.DrawFn) -> Layout:
    files: dict[str, dict[Position, int]] = {dist: {} for dist in LIB_DISTS}
    for position in _POSITIONS:
        count = draw(_OWNER_COUNTS)
        owners = draw(st.permutations(LIB_DISTS))[:count]
        for dist in owners:
            files[dist][position] = draw(st.integers(0, VARIANTS - 1))
    # Shrinking leaves out the modules a failure does not need (None comes first).
    modules = tuple(draw(_MODULE_VARIANTS) for _ in range(MODULES))
    order = tuple(draw(st.permutations(LIB_DISTS)))
    # Non-empty by construction (no filtering, so no invalid examples while shrinking).
    first = draw(st.sampled_from(LIB_DISTS))
    remove = tuple(d for d in LIB_DISTS if d == first or draw(st.booleans()))
    return Layout(files, modules, order, remove, draw(_LLPS))


# --------------------------------------------------------------------------------------
# The oracle machinery: install, import, copy, uninstall, import again
# --------------------------------------------------------------------------------------


_DROP = ("LD_LIBRARY_PATH", "LD_PRELOAD", "VIRTUAL_ENV", "CONDA_PREFIX", "PYTHONPATH")


def _clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in _DROP and not k.startswith("UV_")}


@dataclass(frozen=True)
class Import:
    ok: bool
    error: str  # the last line of stderr when it failed


def import_module(venv: Path, module: str, cwd: Path, llp: str | None) -> Import:
    """A fresh interpreter of the venv imports ``module``; its return code is the verdict."""
    env = _clean_env()
    if llp is not None:
        env["LD_LIBRARY_PATH"] = llp
    proc = subprocess.run(
        [os.fspath(venv_python(venv)), "-I", "-c", f"import {module}"],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=60,
        check=False,
    )
    lines = proc.stderr.strip().splitlines()
    return Import(proc.returncode == 0, lines[-1] if lines else f"rc={proc.returncode}")


def import_all(
    executor: ThreadPoolExecutor, layout: Layout, venv: Path, cwd: Path
) -> dict[str, Import]:
    names = layout.installed_modules()
    llp = layout.llp(venv)
    results = executor.map(lambda name: import_module(venv, name, cwd, llp), names)
    return dict(zip(names, results, strict=True))


def install(pool: Pool, layout: Layout, where: Path) -> Path:
    """Pack the layout's wheels from the pool's bytes and install them with real uv."""
    wheels = where / "wheels"
    lib_wheels = {
        dist: build_wheel(
            wheels,
            dist,
            VERSION,
            {rel_path(p): pool.libs[p[0]][v].path for p, v in files.items()},
        )
        for dist, files in layout.files.items()
    }
    module_wheels = []
    for m, v in enumerate(layout.modules):
        if v is None:
            continue
        ext = pool.exts[m][v].path
        module_wheels.append(
            build_wheel(
                wheels, f"mod{m}", VERSION, {f"mod{m}/__init__.py": b"", f"mod{m}/{ext.name}": ext}
            )
        )
    venv = make_venv(where / "venv")
    for n, group in enumerate(layout.groups()):
        uv_install(venv, [lib_wheels[d] for d in group] + (module_wheels if n == 0 else []))
    return venv


def tree_state(folder: Path) -> dict[str, tuple[int, int, int]]:
    """Every path under ``folder`` with its mode, size and mtime: "nothing changed" is this
    being equal before and after."""
    state = {}
    for dirpath, dirnames, filenames in os.walk(folder):
        for name in dirnames + filenames:
            path = os.path.join(dirpath, name)
            st_ = os.lstat(path)
            state[os.path.relpath(path, folder)] = (st_.st_mode, st_.st_size, st_.st_mtime_ns)
    return state


def _records(site: Path) -> dict[str, list[list[str]]]:
    """Each distribution's RECORD rows, by name (`dist-a`), read with csv."""
    out = {}
    for record in site.glob("*.dist-info/RECORD"):
        name = record.parent.name.removesuffix(".dist-info").rsplit("-", 1)[0].replace("_", "-")
        with open(record, newline="") as f:
            out[name] = [row for row in csv.reader(f) if row]
    return out


def copy_and_uninstall(venv: Path, copy: Path, remove: Sequence[str]) -> None:
    """The change cudatx makes, done by hand in a copy: a real `uv pip uninstall`, after
    taking out of each leaving RECORD the rows a staying RECORD lists with the same hash (the
    rule cudatx's apply follows, cudatx.planning.simulate.kept_entries)."""
    subprocess.run(["cp", "-a", os.fspath(venv), os.fspath(copy)], check=True)
    site = site_packages(copy)
    records = _records(site)
    staying = {
        tuple(r[:2])
        for n, rows in records.items()
        if n not in remove
        for r in rows
        if r[1:2] != [""]
    }
    for name in remove:
        record = next(site.glob(f"{name.replace('-', '_')}-*.dist-info/RECORD"))
        rows = [r for r in records[name] if tuple(r[:2]) not in staying]
        record.unlink()  # a copy of its own: `cp -a` made no hard link to the original
        with open(record, "w", newline="") as f:
            csv.writer(f, lineterminator="\n").writerows(rows)
    uv_uninstall(copy, list(remove))


def real_losses(venv: Path, copy: Path, remove: Sequence[str]) -> set[str]:
    """Distributions that stay and, after the change, miss a file their RECORD lists that
    was there before (whoever's bytes it held: the seed's case, a twin's bytes deleted), or
    hold other bytes where they held their own: the judge of the plan's `losses`."""
    site, after = site_packages(venv), site_packages(copy)
    lost = set()
    for name, rows in _records(site).items():
        if name in remove:
            continue
        for row in rows:
            if len(row) < 2 or not row[1].startswith("sha256="):
                continue
            was, now = _digest(site / row[0]), _digest(after / row[0])
            if (was is not None and now is None) or (was == row[1] and now != row[1]):
                lost.add(name)
    return lost


def _digest(path: Path) -> str | None:
    try:
        data = path.read_bytes()
    except OSError:
        return None
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).decode().rstrip("=")


@dataclass(frozen=True)
class DryRun:
    returncode: int
    stdout: str
    stderr: str

    def report(self) -> dict[str, Any]:
        return json.loads(self.stdout)  # type: ignore[no-any-return]


def dry_run(venv: Path, layout: Layout, cwd: Path) -> DryRun:
    cmd = ["remove", *layout.remove, "--dry-run", "--json"]
    cmd += ["--no-requirements-check", "--python", os.fspath(venv)]
    cmd += ["--ld-library-path", layout.llp(venv) or ""]
    env = {"PYTHONPATH": os.fspath(REPO)}
    proc = cudatx(*cmd, cwd=cwd, hide=(*_DROP, "UV_*"), env=env)
    return DryRun(proc.returncode, proc.stdout, proc.stderr)


def loadable_by_cudatx(venv: Path, layout: Layout) -> dict[str, bool]:
    """Which modules cudatx's scan loads (its "before"), keyed like the imports."""
    env = scan(start_query(os.fspath(venv)), ld_library_path=layout.llp(venv))
    site = site_packages(venv)
    found = {}
    for load in env.loads:
        found[module_of(load.root, site)] = load.ok
    return found


def module_of(root: str, site: Path) -> str:
    """``mod2._ext`` for ``<site>/mod2/_ext.cpython-311-x86_64-linux-gnu.so``; the root must
    be the absolute path of the file as found on sys.path."""
    assert os.path.isabs(root), f"root {root!r} is not absolute"
    rel = os.path.relpath(os.path.realpath(root), os.path.realpath(site))
    package, _, file_name = rel.partition(os.sep)
    assert file_name == "_ext" + ext_suffix(), f"root {root!r} is not a fixture module"
    return f"{package}._ext"


@dataclass
class Outcome:
    layout: Layout
    venv: Path
    copy: Path
    before: dict[str, Import]
    after: dict[str, Import]
    plan: DryRun | None
    scanned: dict[str, bool]
    changed_by_dry_run: list[str]

    @property
    def stopped(self) -> set[str]:
        """Modules that imported before the removal and do not after it."""
        return {m for m, r in self.before.items() if r.ok and not self.after[m].ok}

    def describe(self, pool: Pool) -> str:
        lines = [self.layout.describe(pool), "real imports (before -> after the uninstall):"]
        for m in sorted(self.before):
            b, a = self.before[m], self.after[m]
            lines.append(
                f"  {m}: {'ok' if b.ok else 'FAILS'} -> {'ok' if a.ok else 'FAILS'}"
                + (f"\n      before: {b.error}" if not b.ok else "")
                + (f"\n      after:  {a.error}" if not a.ok else "")
            )
        lines.append(f"cudatx's scan loads before: {self.scanned}")
        if self.plan is not None:
            lines.append(f"cudatx remove exit code {self.plan.returncode}; stdout:")
            lines.append(self.plan.stdout.rstrip() or "  (empty)")
            if self.plan.stderr.strip():
                lines.append("stderr:\n" + self.plan.stderr.rstrip())
            lines.append(
                "rerun: PYTHONPATH=. python3 -m cudatx remove "
                f"{' '.join(self.layout.remove)} --dry-run --json --no-requirements-check "
                f"--python {self.venv} --ld-library-path '{self.layout.llp(self.venv) or ''}'"
                f"\n  ({self.copy} is the venv after the uninstall)"
            )
        return "\n".join(lines)


def run_example(
    pool: Pool, layout: Layout, where: Path, executor: ThreadPoolExecutor, *, plan: bool
) -> Outcome:
    venv = install(pool, layout, where)
    copy = where / "copy"
    before = import_all(executor, layout, venv, where)
    state = tree_state(venv)
    # The dry run reads the venv while the copy is made and changed: the copy only reads it.
    planned = executor.submit(dry_run, venv, layout, where) if plan else None
    copy_and_uninstall(venv, copy, layout.remove)
    after = import_all(executor, layout, copy, where)
    scanned = loadable_by_cudatx(venv, layout)
    result = planned.result() if planned is not None else None
    new_state = tree_state(venv)
    changed = sorted(p for p in state.keys() | new_state.keys() if state.get(p) != new_state.get(p))
    return Outcome(layout, venv, copy, before, after, result, scanned, changed)


# --------------------------------------------------------------------------------------
# The machinery itself, on layouts whose outcome is known by hand
# --------------------------------------------------------------------------------------


def test_oracle_machinery(pool: Pool, workers: ThreadPoolExecutor, tmp_path: Path) -> None:
    """Co-owned bytes are the last install's; an uninstall deletes a co-owned path for the
    other owner too; the real imports see it; cudatx's scan agrees on "before"; nothing
    changes the original venv."""
    # Variant 0 of every slot has no search path of its own, variant 1 has an RPATH, and
    # mod0's variant 0 has an RPATH: every slot shipped at a folder it names loads it.
    assert all(
        pool.libs[s][0].rpath is None and pool.libs[s][0].runpath is None for s in range(SLOTS)
    )
    assert all(
        pool.libs[s][1].rpath is not None and pool.libs[s][1].runpath is None for s in range(SLOTS)
    )
    ext = pool.exts[0][0]
    assert ext.rpath is not None and ext.runpath is None
    folder = next(k for k in ext.rpath if k != MISSING)
    no_path = 5
    assert all(
        pool.exts[m][no_path].rpath is None and pool.exts[m][no_path].runpath is None
        for m in range(MODULES)
    )
    layout = Layout(
        files={
            "dist-a": {(s, folder): 0 for s in range(SLOTS)},
            "dist-b": {(s, folder): 1 for s in range(SLOTS)},
            "dist-c": {(0, folder): 2},
            "dist-d": {(0, folder): 3},
        },
        modules=(0, no_path, no_path, no_path),
        order=("dist-a", "dist-b", "dist-c", "dist-d"),
        remove=("dist-a",),
    )
    assert layout.groups() == [["dist-a"], ["dist-b"], ["dist-c"], ["dist-d"]]
    outcome = run_example(pool, layout, tmp_path, workers, plan=False)
    message = outcome.describe(pool)
    site, after = site_packages(outcome.venv), site_packages(outcome.copy)
    for s in range(1, SLOTS):
        position = (s, folder)
        # The later install's bytes won the shared path ...
        expected = pool.libs[s][1].path.read_bytes()
        assert (site / rel_path(position)).read_bytes() == expected, message
        # ... and the uninstall of the earlier owner deleted it all the same.
        assert not (after / rel_path(position)).exists(), message
    # Four owners of one path: the last install wins; the first one's uninstall deletes it.
    position = (0, folder)
    assert (site / rel_path(position)).read_bytes() == pool.libs[0][3].path.read_bytes()
    assert not (after / rel_path(position)).exists(), message
    assert outcome.before["mod0._ext"].ok, message
    assert not outcome.after["mod0._ext"].ok, message
    assert "cannot open shared object file" in outcome.after["mod0._ext"].error, message
    for m in (1, 2, 3):  # no search path at all: broken before, so never "stopped"
        assert not outcome.before[module_name(m)].ok, message
        assert "cannot open shared object file" in outcome.before[module_name(m)].error
    assert outcome.stopped == {"mod0._ext"}, message
    assert outcome.scanned == {m: r.ok for m, r in outcome.before.items()}, message
    assert outcome.changed_by_dry_run == [], message


# --------------------------------------------------------------------------------------
# The property
# --------------------------------------------------------------------------------------


def _events(outcome: Outcome) -> None:
    layout = outcome.layout
    co_owned = {p: o for p, o in layout.owners().items() if len(o) > 1}
    event(f"co-owned paths: {min(len(co_owned), 3)}{'+' if len(co_owned) >= 3 else ''}")
    split = [
        p
        for p, o in co_owned.items()
        if set(o) & set(layout.remove) and set(o) - set(layout.remove)
    ]
    event(f"co-owned path removed from under a survivor: {bool(split)}")
    event(f"install calls: {len(layout.groups())}")
    event(f"modules importing before: {sum(r.ok for r in outcome.before.values())}")
    event(f"modules stopping: {len(outcome.stopped)}")
    event(f"LD_LIBRARY_PATH set: {layout.ld_library_path is not None}")


def check(outcome: Outcome, pool: Pool) -> None:
    message = "\n" + outcome.describe(pool)
    assert outcome.changed_by_dry_run == [], "the dry run changed the venv:" + message
    real_before = {m: r.ok for m, r in outcome.before.items()}
    assert outcome.scanned == real_before, "cudatx's 'loads before' is not reality's" + message
    plan = outcome.plan
    assert plan is not None
    assert plan.returncode in (0, 1), "cudatx remove did not give a verdict" + message
    try:
        report = plan.report()
    except json.JSONDecodeError:
        pytest.fail("cudatx remove --json printed no JSON" + message)
    assert report["schema_version"] == 1, message
    assert sorted((r["name"], r["version"]) for r in report["remove"]) == [
        (d, VERSION) for d in outcome.layout.remove
    ], message
    site = site_packages(outcome.venv)
    predicted = {module_of(r["root"], site) for r in report["broken_roots"]}
    actual = outcome.stopped
    assert predicted == actual, (
        f"broken_roots predicts {sorted(predicted)}; really stop importing: {sorted(actual)}"
        + message
    )
    for entry in report["broken_roots"]:
        module = module_of(entry["root"], site)
        assert entry["dist"] == module.partition(".")[0], message
        # The name the real import fails on is the one cudatx says goes missing first.
        error = outcome.after[module].error
        assert error.startswith(f"ImportError: {entry['first_missing']}: "), (
            f"first_missing {entry['first_missing']!r}, the real import says {error!r}" + message
        )
    lost = real_losses(outcome.venv, outcome.copy, outcome.layout.remove)
    assert {x["name"] for x in report["losses"]} == lost, (
        f"losses predicts {sorted(x['name'] for x in report['losses'])}; really lose files: "
        f"{sorted(lost)}" + message
    )
    assert report["safe"] == (
        not report["broken"]
        and not report["broken_roots"]
        and not report["requirements_broken"]
        and not report["losses"]
    ), "'safe' disagrees with its own lists" + message
    assert report["safe"] == (not actual and not lost), (
        f"'safe' is {report['safe']}, yet {len(actual)} modules really stop importing and "
        f"{len(lost)} distributions lose files" + message
    )
    assert plan.returncode == (0 if report["safe"] else 1), "exit code vs 'safe'" + message


_KEPT: list[Path] = []  # folders of failing examples, oldest first


@settings(
    max_examples=ORACLE_EXAMPLES,
    deadline=None,
    database=None,  # keep .hypothesis/ out of the checkout
    derandomize=True,  # the same examples every run
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(layout=layouts())
def test_remove_dry_run_predicts_what_really_stops_importing(
    layout: Layout, pool: Pool, workers: ThreadPoolExecutor
) -> None:
    where = Path(tempfile.mkdtemp(prefix="example-", dir=pool.root.parent))
    note(layout.describe(pool))
    try:
        outcome = run_example(pool, layout, where, workers, plan=True)
        _events(outcome)
        check(outcome, pool)
    except BaseException:
        # Hypothesis replays the minimal failing examples last: keep only the latest few.
        _KEPT.append(where)
        while len(_KEPT) > 8:
            shutil.rmtree(_KEPT.pop(0), ignore_errors=True)
        note(f"example folders kept in {where}")
        raise
    shutil.rmtree(where)
