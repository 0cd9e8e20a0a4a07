"""`cudatx check-requirements` and the pre-commit hook, on small real environments.

The environment is design.md section 1 in small (tests/support/cudnn_world.py) with the cu12
cuDNN installed last, so its bytes are the ones on disk at the shared paths.
"""

from __future__ import annotations

import json
import shlex
import subprocess
from pathlib import Path

import pytest

from tests.support.cli import cudatx
from tests.support.cudnn_world import CU12, CU13, Wheels, build_cudnn_world, install_cudnn_world
from tests.support.digest import diff, tree_digest
from tests.support.precommit_story import run_story

FINDINGS = 1


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> Wheels:
    return build_cudnn_world(tmp_path_factory.mktemp("checkreq"))


@pytest.fixture(scope="module")
def venv(wheels: Wheels, tmp_path_factory: pytest.TempPathFactory) -> Path:
    # cu12 installed last: its bytes are on disk
    return install_cudnn_world(wheels, tmp_path_factory.mktemp("env") / "venv", cu12_last=True)


def _links(wheels: Wheels) -> list[str]:
    return ["--offline", "--find-links", str(wheels.folder)]


@pytest.mark.parametrize("style", ["remote", "local"])
def test_precommit_rejects_dropping_the_dist_whose_bytes_are_on_disk(
    venv: Path, wheels: Wheels, tmp_path: Path, style: str
) -> None:
    before = tree_digest(venv)
    args = ["--python", str(venv), *_links(wheels)]
    rejected, accepted = run_story(venv, tmp_path, CU12, args, style)
    assert rejected.returncode != 0, rejected.output
    assert "libcudnn.so.9" in rejected.output, rejected.output
    assert f"uninstall {CU12} <- line" in rejected.output and "(this change)" in rejected.output
    assert "fix: keep line" in rejected.output
    assert accepted.returncode == 0, accepted.output
    assert diff(before, tree_digest(venv)) == []  # checking changes nothing


def _check(venv: Path, wheels: Wheels, *args: str) -> subprocess.CompletedProcess[str]:
    return cudatx("check-requirements", *args, "--python", venv, *_links(wheels), cwd=venv.parent)


def test_json_blames_the_removed_line(venv: Path, wheels: Wheels, tmp_path: Path) -> None:
    from tests.support.precommit_story import freeze

    frozen = freeze(venv).splitlines()
    kept = [ln for ln in frozen if not ln.startswith((f"{CU12}==", f"{CU12} @ "))]
    requirements = tmp_path / "requirements.txt"
    requirements.write_text("\n".join(kept) + "\n")
    # A freeze that lacks a line nothing requires is still the whole set (a freeze less a
    # leaf the user dropped), in git or not: auto reads it as `uv pip sync`, as --mode sync.
    auto = _check(venv, wheels, str(requirements), "--json")
    assert auto.returncode == FINDINGS, auto.stderr
    assert json.loads(auto.stdout)["files"][0]["mode"] == "sync"
    done = _check(venv, wheels, str(requirements), "--json", "--mode", "sync")
    assert done.returncode == FINDINGS, done.stderr
    assert done.stdout == auto.stdout
    (check,) = json.loads(done.stdout)["files"]
    assert check["mode"] == "sync" and not check["committed"]
    assert [b["name"] for b in check["blame"]] == [CU12]
    assert "libcudnn.so.9" in {b["soname"] for b in check["plan"]["broken"]}
    assert [p["name"] for p in check["plan"]["repair"]["reinstall"]] == [CU13]


def test_a_partial_file_is_an_install_and_quiet_when_safe(
    venv: Path, wheels: Wheels, tmp_path: Path
) -> None:
    requirements = tmp_path / "requirements.in"
    requirements.write_text(f"{CU13}  # nothing to do: installed\n")
    done = _check(venv, wheels, str(requirements))
    assert done.returncode == 0, done.stderr
    assert done.stdout == ""
    # The command the check planned is `install -r FILE` (the file is no SPEC), for this env.
    (check,) = json.loads(_check(venv, wheels, str(requirements), "--json").stdout)["files"]
    assert check["command"] == shlex.join(
        ["cudatx", "install", "-r", str(requirements), "--python", str(venv), *_links(wheels)]
    )


def test_printed_commands_run_as_printed(venv: Path, wheels: Wheels, tmp_path: Path) -> None:
    """The plan's suggestion and the fix name the environment and the wheels the check used,
    shell-quoted: pasted into a shell with another venv active, elsewhere, they plan the same
    change (issue 12: a suggestion without --python planned for cudatx's own venv)."""
    from tests.support.precommit_story import freeze

    folder = tmp_path / "a folder; with $pace"
    folder.mkdir()
    requirements = folder / "requirements.txt"
    kept = [
        ln for ln in freeze(venv).splitlines() if not ln.startswith((f"{CU12}==", f"{CU12} @ "))
    ]
    requirements.write_text("\n".join(kept) + "\n")
    done = _check(venv, wheels, str(requirements), "--mode", "sync")
    assert done.returncode == FINDINGS, done.stderr
    planned = ["sync", str(requirements), "--python", str(venv), *_links(wheels)]
    (suggested,) = [ln for ln in done.stdout.splitlines() if "Suggested: " in ln]
    command = shlex.split(suggested.split("Suggested: ")[1].split("  (")[0])
    assert command == ["cudatx", *planned, "--dry-run", "--repair"]
    (fix,) = [ln for ln in done.stdout.splitlines() if "fix: " in ln and "--repair" in ln]
    assert shlex.split(fix.split("`")[1]) == ["cudatx", *planned[:2], "--repair", *planned[2:]]
    other = tmp_path / "other"
    other.mkdir()
    pasted = cudatx(*command[1:], cwd=other, env={"VIRTUAL_ENV": str(other)})
    assert pasted.returncode == 0, pasted.stderr
    assert pasted.stdout.startswith("Safe:"), pasted.stdout


def test_no_environment_checks_the_file_or_fails_as_asked(wheels: Wheels, tmp_path: Path) -> None:
    """With no environment the file is checked alone (its wheels' paths), and says so;
    --require-env fails instead (exit 3)."""
    requirements = tmp_path / "requirements.txt"
    requirements.write_text(f"{CU12}\n")
    hide = ("VIRTUAL_ENV", "CONDA_PREFIX")
    env = {"PRE_COMMIT": "1", "VIRTUAL_ENV": str(tmp_path)}  # pre-commit's own: never trusted
    command = ("check-requirements", str(requirements), *_links(wheels))
    checked = cudatx(*command, cwd=tmp_path, hide=hide, env=env)
    assert checked.returncode == 0 and checked.stdout == "", checked.stdout + checked.stderr
    assert "no environment to check: checking the wheels" in checked.stderr
    failed = cudatx(*command, "--require-env", cwd=tmp_path, hide=hide, env=env)
    assert failed.returncode == 3, failed.stderr
    assert failed.stderr.count("\n") == 1 and "no environment to check" in failed.stderr


def test_malformed_file_is_one_line(venv: Path, wheels: Wheels, tmp_path: Path) -> None:
    bad = tmp_path / "requirements.txt"
    bad.write_text("torch===\n")
    done = _check(venv, wheels, str(bad))
    assert done.returncode == 2, done.stderr
    assert "requirements.txt:1" in done.stderr and "Traceback" not in done.stderr
    lock = tmp_path / "uv.lock"
    lock.write_text("version = [\n")
    done = _check(venv, wheels, str(lock))
    assert done.returncode == 2 and "not valid TOML" in done.stderr, done.stderr


def test_the_mode_holds_from_commit_to_commit(wheels: Wheels, tmp_path: Path) -> None:
    """The hook's sequence: commit a freeze, then one that drops a line nothing requires
    (accepted: removing it breaks nothing), then one that only adds a comment. The second
    check reads the file as the first did (sync), never as an install that suddenly lacks
    what the environment holds (the mode flipped when the committed file stopped listing
    every installed distribution)."""
    import subprocess as sp

    from tests.support import build_wheel, uv_install
    from tests.support.precommit_story import freeze

    leaf = build_wheel(tmp_path / "leaf", "leafpkg", "1.0", {"leafpkg/__init__.py": b"X = 1\n"})
    venv = install_cudnn_world(wheels, tmp_path / "venv", cu12_last=True)
    uv_install(venv, [leaf])
    repo = tmp_path / "repo"
    repo.mkdir()
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.invalid"]
    sp.run([*git, "init", "-q"], check=True)
    requirements = repo / "requirements.txt"
    frozen = freeze(venv)
    requirements.write_text(frozen)
    sp.run([*git, "add", "."], check=True)
    sp.run([*git, "commit", "-q", "-m", "freeze"], check=True)
    links = [*_links(wheels), "--find-links", str(leaf.parent)]

    def check() -> dict[str, object]:
        done = cudatx(
            "check-requirements", requirements, "--json", "--python", venv, *links, cwd=repo
        )
        assert done.returncode == 0, done.stdout + done.stderr
        (found,) = json.loads(done.stdout)["files"]
        assert isinstance(found, dict)
        return found

    dropped = "".join(ln for ln in frozen.splitlines(True) if not ln.startswith("leafpkg"))
    requirements.write_text(dropped)
    first = check()
    sp.run([*git, "commit", "-q", "-am", "drop leafpkg"], check=True)
    requirements.write_text("# pinned by uv pip freeze\n" + dropped)
    second = check()
    assert first["mode"] == second["mode"] == "sync", (first["mode"], second["mode"])
    # Blame names the lines whose change alone matters: dropping the cuDNN whose bytes are on
    # disk too breaks torch; the harmless leaf dropped before is no part of it.
    sp.run([*git, "commit", "-q", "-am", "a comment"], check=True)
    requirements.write_text(
        "".join(ln for ln in dropped.splitlines(True) if not ln.startswith(CU12))
    )
    done = cudatx("check-requirements", requirements, "--json", "--python", venv, *links, cwd=repo)
    assert done.returncode == FINDINGS, done.stdout + done.stderr
    (third,) = json.loads(done.stdout)["files"]
    assert [b["name"] for b in third["blame"]] == [CU12], third["blame"]
