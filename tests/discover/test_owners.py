"""Owners of files are one seam (cudatx.discover.owners): nothing outside that package names
one, and a new owner is one module, added here by this test alone (docs/architecture.md,
"A new owner of files")."""

from __future__ import annotations

import ast
import json
import re
import shlex
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from cudatx.analysis.doctor import diagnose
from cudatx.discover.owners import Owns, register, unregister
from cudatx.discover.target import start_query
from cudatx.environment import Environment
from cudatx.errors import ForeignOwned
from cudatx.models import Distribution, Finding, PackageRecord, PythonTarget, RecordEntry
from cudatx.planning.change import Planning, propose_removal
from cudatx.scan import scan
from tests.support import compile_lib, make_venv, record_hash, site_packages

if TYPE_CHECKING:
    from cudatx.cache import ScanCache

PACKAGE = Path(__file__).resolve().parents[2] / "cudatx"
OWNER_WORDS = re.compile(r"conda|dpkg|(?<![a-z])rpm(?![a-z])", re.IGNORECASE)
# The variable uv and cudatx read to find the interpreter (cudatx.discover.target): it names
# an environment to work on, not an owner of files.
INTERPRETER_VARIABLE = "CONDA_PREFIX"
# The CLI's help (CUDATX_DPKG_ADMINDIR) and the errors (the exit code's name) may name them.
ALLOWED = 3
# A framework's own words, read from its files: CuPy's _wheel.json says how it was packaged.
FRAMEWORK_DATA = {"discover/frameworks/cupy.py"}


def _named(path: Path) -> bool:
    """Whether the code of `path` names an owner kind: in a name or a string that is not a
    docstring (comments and docstrings may say what an owner is)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    for node in ast.walk(tree):
        words: list[str] = []
        if isinstance(node, ast.Name):
            words = [node.id]
        elif isinstance(node, ast.Attribute):
            words = [node.attr]
        elif isinstance(node, ast.FunctionDef | ast.ClassDef | ast.AsyncFunctionDef):
            words = [node.name]
        elif isinstance(node, ast.alias):
            words = [node.name, node.asname or ""]
        elif isinstance(node, ast.ImportFrom):
            words = [node.module or ""]
        elif isinstance(node, ast.arg):
            words = [node.arg]
        elif isinstance(node, ast.keyword):
            words = [node.arg or ""]
        elif (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and id(node) not in docstrings
        ):
            words = [node.value.replace(INTERPRETER_VARIABLE, "")]
        if any(OWNER_WORDS.search(w) for w in words):
            return True
    return False


def test_owner_kinds_are_named_in_at_most_three_modules_outside_the_owners_package() -> None:
    naming = sorted(
        str(p.relative_to(PACKAGE))
        for p in PACKAGE.rglob("*.py")
        if "owners" not in p.relative_to(PACKAGE).parts[:2] and _named(p)
    )
    outside = [m for m in naming if m not in FRAMEWORK_DATA]
    assert len(outside) <= ALLOWED, outside
    assert set(outside) <= {"errors.py", "cli/__init__.py", "cli/app.py"}, outside


# -- a toy owner --------------------------------------------------------------------------

DATABASE = "toy-db.json"  # in the prefix: one entry per package, its files under the site
LIBRARY = "toylib/libtoy.so"


class Toy(Owns):
    """A package manager whose packages uv must not touch, as Spack's or a distribution's
    Python packages: its database is one JSON file in the prefix."""

    keys = ("toy",)
    name = "toypm"
    packages = "toy package"
    prefix = "toy:"
    listing = "toy database entry"
    hashes = "toy database's"

    def read(
        self, target: PythonTarget, cache: ScanCache | None
    ) -> tuple[tuple[Distribution, ...], list[Finding]]:
        database = Path(target.prefix) / DATABASE
        if not database.is_file():
            return (), []
        return tuple(
            Distribution(
                name=self.prefix + entry["name"],
                display_name=entry["name"],
                version=entry["version"],
                metadata_dir=str(database),
                site=target.install_site,
                owner="toy",
                records=tuple(
                    RecordEntry(path, "sha256", digest, size)
                    for path, digest, size in entry["files"]
                ),
                requires=(),
                package=PackageRecord(name=entry["name"], build=""),
            )
            for entry in json.loads(database.read_text())
        ), []

    def command(
        self, prefix: str, verb: str, records: Sequence[Distribution], *, exact: bool
    ) -> str:
        words = [f"{r.display_name}@{r.version}" if exact else r.display_name for r in records]
        return shlex.join(["toypm", verb, "--root", prefix, *words])


@pytest.fixture
def toy() -> Iterator[Toy]:
    owner = Toy()
    register(owner)
    yield owner
    unregister(owner)


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A venv where the toy database owns one library under the site folder (the bytes of
    its own build), and a wheel (fx-toy) lists the same path, its bytes on disk."""
    root = tmp_path_factory.mktemp("toy")
    venv = make_venv(root / "venv")
    site = site_packages(venv)
    source = "int toy(void) { return %d; }\n"
    library = compile_lib(site / LIBRARY, soname="libtoy.so", source=source % 1)
    own = compile_lib(root / "toy" / "libtoy.so", soname="libtoy.so", source=source % 2)
    digest = record_hash(own.read_bytes()).removeprefix("sha256=")
    listed = [[LIBRARY, digest, own.stat().st_size]]
    (venv / DATABASE).write_text(
        json.dumps([{"name": "libtoy", "version": "1.0", "files": listed}])
    )
    meta = site / "fx_toy-1.0.dist-info"
    meta.mkdir()
    (meta / "METADATA").write_text("Metadata-Version: 2.1\nName: fx-toy\nVersion: 1.0\n")
    (meta / "INSTALLER").write_text("uv\n")
    data = library.read_bytes()
    (meta / "RECORD").write_text(
        f"{LIBRARY},{record_hash(data)},{len(data)}\n"
        "fx_toy-1.0.dist-info/METADATA,,\nfx_toy-1.0.dist-info/INSTALLER,,\n"
        "fx_toy-1.0.dist-info/RECORD,,\n"
    )
    return venv


def _scan(venv: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Environment:
    monkeypatch.setenv("CUDATX_CACHE_DIR", str(tmp_path / "cache"))
    return scan(start_query(str(venv)), ld_library_path=None)


def test_the_toy_owner_lists_its_library(
    toy: Toy, venv: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    env = _scan(venv, monkeypatch, tmp_path)
    record = env.distribution("toy:libtoy")
    assert record is not None and record.owner == "toy"
    assert [d.name for d in env.owners_of(str(site_packages(venv) / LIBRARY))] == [
        "fx-toy",
        "toy:libtoy",
    ]


def test_a_plan_refuses_to_remove_its_package_and_prints_its_command(
    toy: Toy, venv: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    env = _scan(venv, monkeypatch, tmp_path)
    with pytest.raises(ForeignOwned) as refused:
        propose_removal(env, ("toy:libtoy",), (), Planning())
    meta = DATABASE
    assert refused.value.message == (
        f"libtoy 1.0 ({meta}) was installed by toypm: cudatx applies changes through uv only "
        "and never changes toypm's packages; to remove it, run: "
        f"{shlex.join(['toypm', 'remove', '--root', str(venv), 'libtoy'])}"
    )
    # By the owner's own name too, as a name no wheel has.
    with pytest.raises(ForeignOwned):
        propose_removal(env, ("libtoy",), (), Planning())


def test_doctor_leaves_the_co_owned_path_to_the_toy_owner_with_its_command(
    toy: Toy, venv: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    env = _scan(venv, monkeypatch, tmp_path)
    problem = next(p for p in diagnose(env).problems if p.code == "co-owned")
    command = shlex.join(["toypm", "install", "--root", str(venv), "libtoy@1.0"])
    assert problem.why.endswith(
        f"; cudatx never changes toypm's packages (toy:libtoy): toypm restores their own "
        f"files with {command}"
    )
    assert problem.fix is None  # no cudatx command: uv must not touch the toy's package


def test_without_it_the_library_is_the_wheels_alone(
    venv: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    env = _scan(venv, monkeypatch, tmp_path)
    assert env.distribution("toy:libtoy") is None
    assert not [p for p in diagnose(env).problems if p.code == "co-owned"]
