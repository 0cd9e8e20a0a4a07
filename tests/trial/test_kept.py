"""The judgement before a change, kept between trials (cudatx.trial.kept, issue 36).

Real wheels, real uv, the real interpreter judging in the shadow: a second trial of an
unchanged environment takes the first one's judgement before the change, and says so; a
file the checks read changed in place (same inode, same folder), a file of the site folders
that is no module, --no-cache and a `--trial-cmd` each have it judged again.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path
from typing import Any

import pytest

from tests.support.blind_world import BlindWheels, blind_env, build_blind_world
from tests.support.cli import cudatx
from tests.support.venvs import site_packages

pytestmark = pytest.mark.skipif(shutil.which("cc") is None, reason="needs a C compiler")

SETTLE_S = 2.1  # cudatx.cache.RACY_NS: a file younger than that is never keyed


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> BlindWheels:
    return build_blind_world(tmp_path_factory.mktemp("blind"))


def _trial(venv: Path, cache: Path, *more: str, exit_code: int = 1) -> dict[str, Any]:
    """The trial of removing hiddenlib, which blindpkg loads: unsafe (exit 1), unless
    blindpkg fails to import before the change too."""
    done = cudatx(
        "remove", "hiddenlib", "--python", venv, "--dry-run", "--trial", "--json", *more,
        env={"CUDATX_CACHE_DIR": os.fspath(cache)},
    )  # fmt: skip
    assert done.returncode == exit_code, done.stdout + done.stderr
    trial: dict[str, Any] = json.loads(done.stdout)["trial"]
    return trial


def _verdicts(trial: dict[str, Any]) -> dict[str, tuple[str, str, str | None]]:
    return {r["check"]: (r["model"], r["trial"], r["error"]) for r in trial["roots"]}


@pytest.fixture
def settled(wheels: BlindWheels, tmp_path: Path) -> Path:
    venv = blind_env(wheels, tmp_path / "venv")
    time.sleep(SETTLE_S)
    return venv


def test_a_second_trial_of_an_unchanged_environment_keeps_the_judgement_before(
    settled: Path, tmp_path: Path
) -> None:
    first = _trial(settled, tmp_path / "cache")
    assert first["before_kept"] == 0
    second = _trial(settled, tmp_path / "cache")
    assert second["before_kept"] > 0  # the files and folders its checks read
    assert _verdicts(second) == _verdicts(first)
    assert _verdicts(second)["import blindpkg"][1] == "breaks"
    assert _verdicts(second)["import hiddenlib"][1] == "removed"

    done = cudatx(
        "remove", "hiddenlib", "--python", settled, "--dry-run", "--trial",
        env={"CUDATX_CACHE_DIR": os.fspath(tmp_path / "cache")},
    )  # fmt: skip
    said = (
        "  the judgement before the change is an earlier trial's: none of the "
        f"{second['before_kept']} files its checks read has changed since "
        "(--no-cache judges it again)"
    )
    assert said in done.stdout.splitlines()


def test_a_module_changed_in_place_is_judged_again(settled: Path, tmp_path: Path) -> None:
    """blindpkg now fails to import before the change: a kept judgement would call its
    failure after the change a break of the change."""
    _trial(settled, tmp_path / "cache")
    init = site_packages(settled) / "blindpkg" / "__init__.py"
    inode = init.stat().st_ino
    with init.open("r+b") as stream:  # in place: the same inode, the folder unchanged
        stream.seek(0)
        stream.write(b"raise ImportError('broken') #")  # the rest of the first line: a comment
    assert init.stat().st_ino == inode
    again = _trial(settled, tmp_path / "cache", exit_code=0)
    assert again["before_kept"] == 0
    assert _verdicts(again)["import blindpkg"][1] == "failed before"


def test_a_file_of_the_site_folders_that_no_check_imports_is_read_too(
    settled: Path, tmp_path: Path
) -> None:
    _trial(settled, tmp_path / "cache")
    metadata = next(site_packages(settled).glob("hiddenlib-*.dist-info")) / "METADATA"
    with metadata.open("ab") as stream:
        stream.write(b"\n")
    assert _trial(settled, tmp_path / "cache")["before_kept"] == 0


@pytest.mark.parametrize("asked", [("--no-cache",), ("--trial-cmd", "true")])
def test_no_cache_and_a_users_command_judge_before_every_time(
    settled: Path, tmp_path: Path, asked: tuple[str, ...]
) -> None:
    _trial(settled, tmp_path / "cache", *asked)
    assert _trial(settled, tmp_path / "cache", *asked)["before_kept"] == 0


def test_a_module_linked_from_elsewhere_and_edited_there_is_judged_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A module file in the site folder that is a symlink (into a project's checkout) is
    kept by its target's state too: the link itself does not change when the file it
    names is edited in place, nor does the site folder."""
    from cudatx.cache import open_cache
    from cudatx.trial import kept

    monkeypatch.setattr(kept, "RACY_NS", 0)  # in process: keep files however new
    site = tmp_path / "site"
    site.mkdir()
    source = tmp_path / "project" / "mod.py"
    source.parent.mkdir()
    source.write_text("VALUE = 1\n")
    (site / "mod.py").symlink_to(source)
    reads = {"files": [str(site / "mod.py")], "folders": [str(site)], "complete": True}
    cache = open_cache({"CUDATX_CACHE_DIR": os.fspath(tmp_path / "cache")})
    assert cache is not None
    try:
        started = time.time_ns() + 1_000_000_000
        judged = {"outcomes": {}, "reads": reads}
        assert kept.keep(cache, "env", "facts", judged, [str(site)], str, started) > 0
        assert kept.recall(cache, "env", "facts", [str(site)]) is not None
        with source.open("ab") as stream:  # in place: the link and the folder unchanged
            stream.write(b"raise ImportError('edited')\n")
        assert kept.recall(cache, "env", "facts", [str(site)]) is None
    finally:
        cache.close()


def test_a_machine_whose_gpu_answers_otherwise_is_judged_before_again_once(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Where the kept judgement's GPU probe said otherwise than the trial's (a driver
    installed since), the judgement before is made again; the session after the change,
    already made, is not made twice. The sessions are stood in for: what is judged here is
    the order of the trial's steps, not a session."""
    from types import SimpleNamespace

    from cudatx.sandbox import Confinement
    from cudatx.trial import kept, run
    from cudatx.trial.judge import Outcome
    from cudatx.trial.shadow import Shadow

    made: list[str] = []

    def session(*args: Any, reads: bool = False) -> tuple[Any, ...]:
        judging = args[-1]
        made.append(judging)
        shade = Shadow("overlay", "/env", "/env", str(tmp_path), 0.0, 0)
        judged = run.Judged({"import x": Outcome(True)}, {}, 1.0, "1 GPU")
        said = {"outcomes": {}, "owners": {}, "seconds": 1.0, "gpu": "1 GPU"}
        return shade, judged, 0.0, None, (), said

    earlier = {"outcomes": {}, "owners": {}, "seconds": 5.0, "gpu": "no GPU (no driver)"}
    monkeypatch.setattr(run, "_session", session)
    monkeypatch.setattr(kept, "recall", lambda *a: (earlier, 12))
    monkeypatch.setattr(kept, "keep", lambda *a: 0)
    target = SimpleNamespace(python="/env/bin/python", site_packages=(), prefix="/env")
    env = SimpleNamespace(target=target, ld_library_path=None, view=SimpleNamespace(cache=None))
    options = run.TrialOptions()
    trial = run._both(env, object(), None, (), options, Confinement("none", "", False))  # type: ignore[arg-type]
    assert made == ["after", "before"]
    assert trial.before_kept == 0 and trial.before.gpu == "1 GPU"
