"""Versions and symbols against reality: an oracle property test, in the plan oracle's style.

A pool of real libraries is compiled once per module: two providers (`libsym0.so`,
`libsym1.so`), four symbols each in two GNU version nodes, each provider in several builds
that define a random part of them (with a version script or without one, sometimes with a
version node whose symbols are gone); and three extension modules, each in several variants
linked against the full build of one or both providers (versioned or not) and using a random
part of their symbols, strongly or weakly, found through RUNPATH in a primary folder first
and a fallback folder after it.

An example installs, with real uv into a fresh venv, a release of each provider (four
releases, one build each, as wheels `prov0` and `prov1`), sometimes a fallback build of it
in the fallback folder (wheels `fall0`, `fall1`) and some of the modules; then plans one
change: an install of another release of a provider (an upgrade or a downgrade), or its
removal (the fallback, when there is one, then provides the library). Then the oracle:

- cudatx's scan of the venv loads exactly the modules a real import loads;
- the dry run of the change (`cudatx install prov0==3.0` or `cudatx remove prov0`, `--json
  --no-requirements-check`) names in `broken_roots` exactly the modules that import before
  and fail after the same change made by real uv on a copy of the venv, `safe` says the
  same, the exit code follows `safe`;
- where the import fails on a version, or on one symbol, cudatx's message is glibc's.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, note, settings
from hypothesis import strategies as st

from cudatx.discover.target import start_query
from cudatx.scan import scan
from tests.loader.test_symbols_judge import ext_source
from tests.planning.test_plan_oracle import Import, import_module, module_of
from tests.support import (
    build_wheel,
    compile_extension,
    compile_lib,
    make_venv,
    site_packages,
    uv_install,
    uv_uninstall,
)
from tests.support.cli import cudatx
from tests.support.examples import ORACLE_EXAMPLES
from tests.support.paths import REPO

PROVIDERS = 2
SYMBOLS = 4  # p<i>s<j>, in node P<i>_V1 (j < 2) or P<i>_V2
BUILDS = 6  # builds of each provider in the pool
RELEASES = 4  # releases of each provider an example can install: 1.0 .. 4.0
MODULES = 3
VARIANTS = 4
POOL_SEED = 20261202
RUNPATH = "$ORIGIN/../provlib/primary:$ORIGIN/../provlib/fallback"

pytestmark = pytest.mark.oracle


def soname(i: int) -> str:
    return f"libsym{i}.so"


def symbol(i: int, j: int) -> str:
    return f"p{i}s{j}"


def node(i: int, j: int) -> str:
    return f"P{i}_V{1 + j // 2}"


@dataclass(frozen=True)
class Build:
    path: Path
    versioned: bool
    defines: tuple[int, ...]  # symbol indices
    nodes: tuple[str, ...]  # version nodes defined (versioned builds)

    def describe(self) -> str:
        kind = f"nodes {','.join(self.nodes) or '-'}" if self.versioned else "no versions"
        return f"defines {','.join(map(str, self.defines)) or 'nothing'}; {kind}"


@dataclass(frozen=True)
class Module:
    path: Path
    links: tuple[tuple[int, bool], ...]  # (provider, linked against its versioned build)
    strong: tuple[tuple[int, int], ...]
    weak: tuple[tuple[int, int], ...]

    def describe(self) -> str:
        links = ", ".join(f"{soname(i)} ({'versioned' if v else 'plain'})" for i, v in self.links)
        uses = " ".join(symbol(*s) for s in self.strong)
        weak = " ".join(symbol(*s) for s in self.weak)
        return f"links {links}; uses {uses or '-'}; weakly {weak or '-'}"


@dataclass(frozen=True)
class Pool:
    root: Path
    builds: tuple[tuple[Build, ...], ...]  # [provider][build]
    modules: tuple[tuple[Module, ...], ...]  # [module][variant]
    releases: tuple[tuple[int, ...], ...]  # [provider][release] -> build

    def __repr__(self) -> str:
        return f"Pool({self.root})"

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(repr(self))


def _script(i: int, defines: tuple[int, ...], nodes: tuple[str, ...]) -> str:
    lines = []
    previous = None
    for name in (f"P{i}_V1", f"P{i}_V2"):
        if name not in nodes:
            continue
        names = [symbol(i, j) for j in defines if node(i, j) == name]
        body = f"global: {'; '.join(names)}; " if names else ""
        local = "local: *; " if previous is None else ""
        lines.append(f"{name} {{ {body}{local}}}{' ' + previous if previous else ''};")
        previous = name
    return "\n".join(lines) + "\n"


def _source(i: int, defines: tuple[int, ...]) -> str:
    body = "".join(f"int {symbol(i, j)}(void) {{ return {10 * i + j}; }}\n" for j in defines)
    return body or f"int p{i}_nothing(void) {{ return 0; }}\n"


def _compile_pool(root: Path) -> Pool:
    rng = random.Random(POOL_SEED)
    jobs: list[tuple[Path, str, str | None]] = []
    builds: list[list[Build]] = []
    for i in range(PROVIDERS):
        mine = []
        for b in range(BUILDS):
            full = b == 0  # build 0 of each provider: everything, versioned
            versioned = full or rng.random() < 0.75
            defines = tuple(j for j in range(SYMBOLS) if full or rng.random() < 0.6)
            nodes = tuple(
                sorted(
                    {node(i, j) for j in defines}
                    | {n for n in (f"P{i}_V1", f"P{i}_V2") if rng.random() < 0.4}
                )
            )
            if not versioned:
                nodes = ()
            elif not nodes:
                nodes = (f"P{i}_V1",)
            out = root / "builds" / f"{i}-{b}" / soname(i)
            jobs.append(
                (out, _source(i, defines), _script(i, defines, nodes) if versioned else None)
            )
            mine.append(Build(out, versioned, defines, nodes))
        builds.append(mine)
    # What modules are linked against: every symbol, versioned or not.
    links = {
        (i, v): root / "link" / f"{i}-{int(v)}" / soname(i)
        for i in range(PROVIDERS)
        for v in (True, False)
    }
    everything = tuple(range(SYMBOLS))
    for (i, v), out in links.items():
        nodes = (f"P{i}_V1", f"P{i}_V2")
        jobs.append((out, _source(i, everything), _script(i, everything, nodes) if v else None))

    def build(job: tuple[Path, str, str | None]) -> None:
        out, source, script = job
        compile_lib(out, soname=out.name, source=source, version_script=script)

    with ThreadPoolExecutor(os.cpu_count() or 2) as workers:
        list(workers.map(build, jobs))
    modules: list[list[Module]] = []
    specs = []
    for m in range(MODULES):
        for v in range(VARIANTS):
            chosen = sorted(rng.sample(range(PROVIDERS), rng.choice((1, 1, 2))))
            linked = tuple((i, rng.random() < 0.7) for i in chosen)
            strong, weak = [], []
            for i in chosen:
                for j in range(SYMBOLS):
                    roll = rng.random()
                    if roll < 0.5:
                        strong.append((i, j))
                    elif roll < 0.7:
                        weak.append((i, j))
            if not strong:
                strong.append((chosen[0], rng.randrange(SYMBOLS)))
            specs.append((m, v, linked, tuple(strong), tuple(weak)))

    def build_module(spec: tuple[Any, ...]) -> Module:
        m, v, linked, strong, weak = spec
        folder = root / "modules" / f"{m}-{v}"
        source = ext_source("_ext", [symbol(*s) for s in strong], [symbol(*s) for s in weak])
        needed = [links[i, versioned] for i, versioned in linked]
        path = compile_extension(folder, "_ext", source=source, needed=needed, runpath=RUNPATH)
        return Module(path, linked, strong, weak)

    with ThreadPoolExecutor(os.cpu_count() or 2) as workers:
        built = list(workers.map(build_module, specs))
    for m in range(MODULES):
        modules.append(built[m * VARIANTS : (m + 1) * VARIANTS])
    # Release r of provider i is one build; release 1.0 is the full one.
    releases = tuple(
        (0, *(rng.randrange(1, BUILDS) for _ in range(RELEASES - 1))) for _ in range(PROVIDERS)
    )
    return Pool(root, tuple(tuple(b) for b in builds), tuple(tuple(m) for m in modules), releases)


@pytest.fixture(scope="module")
def pool(tmp_path_factory: pytest.TempPathFactory) -> Pool:
    return _compile_pool(tmp_path_factory.mktemp("symbols-pool"))


@pytest.fixture(scope="module")
def workers() -> Iterator[ThreadPoolExecutor]:
    with ThreadPoolExecutor(max_workers=2 * MODULES) as executor:
        yield executor


def release(r: int) -> str:
    return f"{r + 1}.0"


@dataclass(frozen=True)
class Layout:
    installed: tuple[int | None, ...]  # release of each provider; None: not installed
    fallbacks: tuple[int | None, ...]  # build of each provider's fallback; None: none
    modules: tuple[int | None, ...]  # variant of each module; None: not installed
    change: tuple[str, int, int]  # ("install", provider, release) or ("remove", provider, 0)

    def describe(self, pool: Pool) -> str:
        lines = []
        for i in range(PROVIDERS):
            r = self.installed[i]
            if r is not None:
                build = pool.builds[i][pool.releases[i][r]]
                lines.append(f"prov{i} {release(r)}: {build.describe()}")
            f = self.fallbacks[i]
            if f is not None:
                lines.append(f"fall{i} (fallback folder): {pool.builds[i][f].describe()}")
        for m, v in enumerate(self.modules):
            if v is not None:
                lines.append(f"mod{m}._ext v{v}: {pool.modules[m][v].describe()}")
        kind, i, r = self.change
        if kind == "install":
            build = pool.builds[i][pool.releases[i][r]]
            lines.append(f"change: install prov{i}=={release(r)} ({build.describe()})")
        else:
            lines.append(f"change: remove prov{i}")
        return "\n".join(lines)

    def names(self) -> list[str]:
        return [f"mod{m}._ext" for m, v in enumerate(self.modules) if v is not None]


# Mostly the full release 1.0 before the change, so that most modules import and the change
# has something to break.
_RELEASE = st.sampled_from((None, 0, 0, 0, *range(1, RELEASES)))
_FALLBACK = st.sampled_from((None, None, *range(BUILDS)))
_VARIANT = st.sampled_from((None, *range(VARIANTS)))


@st.composite
def layouts(draw: st.DrawFn) -> Layout:
    installed = [draw(_RELEASE) for _ in range(PROVIDERS)]
    fallbacks = tuple(draw(_FALLBACK) for _ in range(PROVIDERS))
    modules = tuple(draw(_VARIANT) for _ in range(MODULES))
    i = draw(st.integers(0, PROVIDERS - 1))
    if installed[i] is not None and draw(st.booleans()):
        change: tuple[str, int, int] = ("remove", i, 0)
    else:
        if installed[i] is None:
            installed[i] = 0
        others = [r for r in range(RELEASES) if r != installed[i]]
        change = ("install", i, draw(st.sampled_from(others)))
    return Layout(tuple(installed), fallbacks, modules, change)


def _wheels(pool: Pool, layout: Layout, folder: Path) -> dict[str, Path]:
    """Every release of every provider (uv picks the one asked for), the fallbacks and
    modules of the layout."""
    out: dict[str, Path] = {}
    for i in range(PROVIDERS):
        for r in range(RELEASES):
            build = pool.builds[i][pool.releases[i][r]]
            files = {f"provlib/primary/{soname(i)}": build.path}
            out[f"prov{i}=={release(r)}"] = build_wheel(folder, f"prov{i}", release(r), files)
        f = layout.fallbacks[i]
        if f is not None:
            files = {f"provlib/fallback/{soname(i)}": pool.builds[i][f].path}
            out[f"fall{i}"] = build_wheel(folder, f"fall{i}", "1.0", files)
    for m, v in enumerate(layout.modules):
        if v is not None:
            ext = pool.modules[m][v].path
            files = {f"mod{m}/__init__.py": b"", f"mod{m}/{ext.name}": ext}
            out[f"mod{m}"] = build_wheel(folder, f"mod{m}", "1.0", files)
    return out


@dataclass
class Outcome:
    before: dict[str, Import]
    after: dict[str, Import]
    scanned: dict[str, bool]
    plan: subprocess.CompletedProcess[str]
    venv: Path
    copy: Path

    @property
    def stopped(self) -> set[str]:
        return {m for m, r in self.before.items() if r.ok and not self.after[m].ok}

    def describe(self) -> str:
        lines = ["real imports (before -> after the change):"]
        for m in sorted(self.before):
            b, a = self.before[m], self.after[m]
            lines.append(
                f"  {m}: {'ok' if b.ok else 'FAILS'} -> {'ok' if a.ok else 'FAILS'}"
                + (f"\n      before: {b.error}" if not b.ok else "")
                + (f"\n      after:  {a.error}" if not a.ok else "")
            )
        lines.append(f"cudatx's scan loads before: {self.scanned}")
        lines.append(f"cudatx exit code {self.plan.returncode}; stdout:\n{self.plan.stdout}")
        if self.plan.stderr.strip():
            lines.append(f"stderr:\n{self.plan.stderr}")
        return "\n".join(lines)


def run_example(pool: Pool, layout: Layout, where: Path, executor: ThreadPoolExecutor) -> Outcome:
    wheels = _wheels(pool, layout, where / "wheels")
    venv = make_venv(where / "venv")
    first = [
        wheels[f"prov{i}=={release(r)}"] for i, r in enumerate(layout.installed) if r is not None
    ]
    first += [w for name, w in wheels.items() if not name.startswith("prov")]
    uv_install(venv, first)

    def imports(env: Path) -> dict[str, Import]:
        found = executor.map(lambda name: import_module(env, name, where, None), layout.names())
        return dict(zip(layout.names(), found, strict=True))

    before = imports(venv)
    kind, i, r = layout.change
    words = [f"prov{i}=={release(r)}"] if kind == "install" else [f"prov{i}"]
    links = ["--offline", "--find-links", os.fspath(where / "wheels"), "--ignore-running"]
    cmd = [kind, *words, "--dry-run", "--json", "--no-requirements-check", *links]
    cmd += ["--python", os.fspath(venv), "--ld-library-path", ""]
    planned = executor.submit(
        cudatx,
        *cmd,
        cwd=where,
        hide=("LD_LIBRARY_PATH", "VIRTUAL_ENV", "UV_*"),
        env={"PYTHONPATH": os.fspath(REPO)},
    )
    copy = where / "copy"
    subprocess.run(["cp", "-a", os.fspath(venv), os.fspath(copy)], check=True)
    if kind == "install":
        uv_install(copy, [wheels[f"prov{i}=={release(r)}"]])
    else:
        uv_uninstall(copy, [f"prov{i}"])
    after = imports(copy)
    env = scan(start_query(os.fspath(venv)), ld_library_path=None)
    site = site_packages(venv)
    scanned = {module_of(ld.root, site): ld.ok for ld in env.loads}
    return Outcome(before, after, scanned, planned.result(), venv, copy)


def check(outcome: Outcome, layout: Layout, pool: Pool) -> None:
    message = "\n" + layout.describe(pool) + "\n" + outcome.describe()
    real_before = {m: r.ok for m, r in outcome.before.items()}
    assert outcome.scanned == real_before, "cudatx's 'loads before' is not reality's" + message
    assert outcome.plan.returncode in (0, 1), "no verdict" + message
    report = json.loads(outcome.plan.stdout)
    site = site_packages(outcome.venv)
    predicted = {module_of(r["root"], site) for r in report["broken_roots"]}
    assert predicted == outcome.stopped, (
        f"broken_roots predicts {sorted(predicted)}; really stop: {sorted(outcome.stopped)}"
        + message
    )
    assert report["safe"] == (not outcome.stopped), "'safe' disagrees with reality" + message
    assert outcome.plan.returncode == (0 if report["safe"] else 1), message
    copy_site = os.fspath(site_packages(outcome.copy))
    for entry in report["broken_roots"]:
        module = module_of(entry["root"], site)
        real = outcome.after[module].error.replace(copy_site, os.fspath(site))
        missing = entry["missing"]
        if entry["detail"] is None:
            assert real.startswith(f"ImportError: {entry['first_missing']}: "), real + message
        elif len(missing) == 1 or missing[0].startswith("`"):
            # One symbol, or a version: glibc's message, word for word.
            assert real == f"ImportError: {entry['detail']}", message
    event(f"modules importing before: {sum(real_before.values())}")
    event(f"modules stopping: {len(outcome.stopped)}")
    failing = [*report["broken"], *report["broken_roots"]]
    event(f"failing on a symbol or version: {any(b['missing'] for b in failing)}")
    event(f"change: {layout.change[0]}")


_KEPT: list[Path] = []


@settings(
    max_examples=ORACLE_EXAMPLES,
    deadline=None,
    database=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(layout=layouts())
def test_plans_predict_what_really_stops_importing_on_versions_and_symbols(
    layout: Layout, pool: Pool, workers: ThreadPoolExecutor
) -> None:
    where = Path(tempfile.mkdtemp(prefix="example-", dir=pool.root.parent))
    note(layout.describe(pool))
    try:
        check(run_example(pool, layout, where, workers), layout, pool)
    except BaseException:
        _KEPT.append(where)
        while len(_KEPT) > 4:
            shutil.rmtree(_KEPT.pop(0), ignore_errors=True)
        note(f"example folders kept in {where}")
        raise
    shutil.rmtree(where)
