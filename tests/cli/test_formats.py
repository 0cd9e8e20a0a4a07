"""Output formats (cudatx.render.formats): a format is one module and one registration, and
every command whose kind of report it writes offers it in --format (docs/architecture.md, "A
new output format")."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from cudatx.cli import cli
from cudatx.cli.app import Invocation
from cudatx.render import formats
from tests.cli import toyformat
from tests.support.pure_world import build_pure_wheels
from tests.support.venvs import make_venv, uv_install


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A venv of two pure wheels, `pure` and `other` (tests.support.pure_world)."""
    root = tmp_path_factory.mktemp("formats")
    venv = make_venv(root / "venv")
    uv_install(venv, build_pure_wheels(root / "wheels"))
    return venv


@pytest.fixture
def toy(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The toy format registered for this test only."""
    monkeypatch.setattr(formats, "_FORMATS", dict(formats._FORMATS))
    formats.register("toy", toyformat)
    yield


def _cudatx(*args: str) -> Result:
    """cudatx in this process, where the test registered its format, as `main` runs it;
    -q: nothing on stderr but an error (click 8.1's runner mixes the two streams)."""
    run = Invocation(args, [])
    argv = [*args, "-q", "--no-cache"]
    return CliRunner().invoke(cli, argv, obj=run, catch_exceptions=False)


def test_a_registered_format_prints_the_plan(toy: None, venv: Path) -> None:
    done = _cudatx("remove", "other", "--dry-run", "--format", "toy", "--python", str(venv))
    assert done.exit_code == 0, done.output
    assert done.output == "toy: safe: remove other==1.0\n"
    # The same plan as JSON says what the toy's line says.
    plan = json.loads(_cudatx("remove", "other", "--dry-run", "--json", "-p", str(venv)).stdout)
    assert (plan["safe"], plan["remove"]) == (True, [{"name": "other", "version": "1.0"}])


def test_a_format_is_offered_only_where_it_writes_the_kind(toy: None, venv: Path) -> None:
    assert "toy" in formats.formats("plan")
    assert formats.formats("doctor") == ("text", "json")
    done = _cudatx("doctor", "--format", "toy", "--python", str(venv))
    assert done.exit_code == 2
    assert "'toy' is not one of 'text', 'json'" in done.output


def test_unregistered_the_toy_is_no_format(venv: Path) -> None:
    assert "toy" not in formats.formats("plan")
    done = _cudatx("remove", "other", "--dry-run", "--format", "toy", "--python", str(venv))
    assert done.exit_code == 2
