"""The trial (issue 25): the planned change made in a shadow of the environment and judged
by the real interpreter, beside the model's verdict.

Real wheels, real uv, real ELF files; the judge is the real interpreter importing in the
shadow. The original environment is digested (paths, kinds, modes, bytes, link targets,
`__pycache__` included) before and after every trial: nothing a trial does reaches it.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest

from cudatx.trial.shadow import ShadowFailed, shadow
from tests.support.blind_world import BlindWheels, blind_env, build_blind_world
from tests.support.cli import cudatx
from tests.support.digest import diff, tree_digest
from tests.support.twin_world import CU13, build_twin_world, contaminated
from tests.support.venvs import site_packages, uv_uninstall

pytestmark = pytest.mark.skipif(shutil.which("cc") is None, reason="needs a C compiler")

TORCH_INIT = b"from torch._C import *\n"  # as the real torch loads its extension


def _digest(venv: Path) -> dict[str, Any]:
    return tree_digest(venv, exclude=())  # __pycache__ too: the trial imports with -B


def _json(done: Any) -> dict[str, Any]:
    assert done.stdout, done.stderr
    data: dict[str, Any] = json.loads(done.stdout)
    return data


def _roots(trial: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {r["check"]: r for r in trial["roots"]}


@pytest.fixture(scope="module")
def blind_wheels(tmp_path_factory: pytest.TempPathFactory) -> BlindWheels:
    return build_blind_world(tmp_path_factory.mktemp("blind"))


def _where(wheels: BlindWheels) -> list[str]:
    return ["--offline", "--find-links", os.fspath(wheels.folder)]


def test_the_trial_catches_the_break_the_model_is_blind_to(
    blind_wheels: BlindWheels, tmp_path: Path
) -> None:
    venv = blind_env(blind_wheels, tmp_path / "venv")
    model = cudatx("remove", "hiddenlib", "--python", venv, "--dry-run", "--json")
    assert model.returncode == 0, model.stderr  # the model sees no edge: safe
    assert _json(model)["trial"] is None

    done = cudatx("remove", "hiddenlib", "--python", venv, "--dry-run", "--trial", "--json")
    assert done.returncode == 1, done.stderr
    plan = _json(done)
    assert plan["safe"] is False
    trial = plan["trial"]
    row = _roots(trial)["import blindpkg"]
    assert (row["model"], row["trial"]) == ("loads", "breaks")
    assert row["error"].startswith("OSError: ") and "libhidden.so" in row["error"]
    assert trial["disagreements"] == [f"the model missed: import blindpkg fails: {row['error']}"]
    assert _roots(trial)["import hiddenlib"]["trial"] == "removed"

    text = cudatx("remove", "hiddenlib", "--python", venv, "--dry-run", "--trial")
    assert text.returncode == 1
    assert "Unsafe: 1 check failed in the trial." in text.stdout
    assert "the model missed: import blindpkg fails: OSError:" in text.stdout


def test_an_apply_whose_trial_breaks_stops_before_touching_the_environment(
    blind_wheels: BlindWheels, tmp_path: Path
) -> None:
    venv = blind_env(blind_wheels, tmp_path / "venv")
    before = _digest(venv)
    done = cudatx("remove", "hiddenlib", "--python", venv, "--yes", "--trial")
    assert done.returncode == 1, done.stderr
    assert "refusing to apply an unsafe plan" in done.stderr
    assert diff(before, _digest(venv)) == []
    assert not (venv / ".cudatx").exists()


# Tries to write into site-packages three ways (a new file, an existing file in place, a
# deletion), then checks that each happened where it ran: in the shadow.
_VANDAL = (
    "python -c \"import os, sysconfig; s = sysconfig.get_paths()['purelib']; "
    "open(os.path.join(s, 'planted.py'), 'w').write('x = 1'); "
    "f = open(os.path.join(s, 'blindpkg', '__init__.py'), 'r+'); f.write('#'); f.close(); "
    "os.unlink(os.path.join(s, 'hiddenlib', '__init__.py')); "
    "assert os.path.exists(os.path.join(s, 'planted.py'))\""
)


def _available(method: str, venv: Path) -> None:
    try:
        with shadow(os.fspath(venv), (method,)):
            pass
    except ShadowFailed as exc:
        pytest.skip(f"this machine makes no {method} shadow: {exc.message}")


def test_a_check_that_failed_before_is_unchanged_for_the_model(
    blind_wheels: BlindWheels, tmp_path: Path
) -> None:
    """An import that fails before the change (and after it) is `failed before` for the
    trial; the model, which has no break of its own for it, says `unchanged`, not `loads`,
    and neither side blames the change."""
    from tests.support import build_wheel, uv_install

    venv = blind_env(blind_wheels, tmp_path / "venv")
    broken = build_wheel(
        tmp_path / "wheels", "alreadybroken", "1.0",
        {"alreadybroken/__init__.py": b"raise ImportError('broken before any change')\n"},
    )  # fmt: skip
    uv_install(venv, [broken])
    done = cudatx("remove", "blindpkg", "--python", venv, "--dry-run", "--trial", "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    row = _roots(_json(done)["trial"])["import alreadybroken"]
    assert (row["model"], row["trial"]) == ("unchanged", "failed before"), row
    assert row["disagreement"] is None


@pytest.mark.parametrize("method", ["overlay", "reflink", "copy"])
def test_the_original_is_never_written(
    blind_wheels: BlindWheels, tmp_path: Path, method: str
) -> None:
    venv = blind_env(blind_wheels, tmp_path / "venv")
    _available(method, venv)
    before = _digest(venv)
    how = ["--python", venv, "--dry-run", "--trial-shadow", method, "--json"]

    removal = cudatx("remove", "hiddenlib", *how, "--trial-cmd", _VANDAL)
    trial = _json(removal)["trial"]
    assert trial["method"] == method
    # The command wrote in the shadow (its own check passed before the change) ...
    # (it passed before the change; after it, the file it deletes left with hiddenlib)
    cmd = _roots(trial)[f"--trial-cmd {_VANDAL!r}"]
    assert (cmd["trial"], cmd["model"]) == ("breaks", "not modelled"), cmd
    assert diff(before, _digest(venv)) == []

    install = cudatx("install", "extra", *how, *_where(blind_wheels), "--trial-cmd", _VANDAL)
    assert install.returncode == 0, install.stdout + install.stderr
    trial = _json(install)["trial"]
    assert _roots(trial)["import extra"]["trial"] == "loads"  # arrived, in the shadow only
    assert _roots(trial)[f"--trial-cmd {_VANDAL!r}"]["trial"] == "loads"
    assert diff(before, _digest(venv)) == []

    doctor = cudatx("doctor", "--python", venv, "--trial-shadow", method, "--json")
    assert _json(doctor)["trial"]["method"] == method
    assert diff(before, _digest(venv)) == []
    # ... and the original still imports, untouched.
    assert not (site_packages(venv) / "planted.py").exists()
    assert (site_packages(venv) / "hiddenlib" / "__init__.py").exists()


def test_doctor_trial_names_each_failing_import_and_whether_the_model_knows(
    blind_wheels: BlindWheels, tmp_path: Path
) -> None:
    venv = blind_env(blind_wheels, tmp_path / "venv")
    assert cudatx("doctor", "--python", venv, "--trial").returncode == 0
    uv_uninstall(venv, ["hiddenlib"])
    before = _digest(venv)
    done = cudatx("doctor", "--python", venv, "--trial", "--json")
    assert done.returncode == 1, done.stderr
    trial = _json(done)["trial"]
    (failing,) = trial["failing"]
    assert failing["check"] == "import blindpkg"
    assert failing["known"] is False and "libhidden.so" in failing["error"]
    assert trial["unknown"] == 1
    text = cudatx("doctor", "--python", venv, "--trial")
    assert "x import blindpkg fails (UNKNOWN to the model): OSError:" in text.stdout
    assert diff(before, _digest(venv)) == []


@pytest.fixture(scope="module")
def twin_venv(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("twins")
    wheels = build_twin_world(root, torch_init=TORCH_INIT)
    return contaminated(wheels, root / "venv"), wheels.folder


def test_the_seed_removal_fails_in_the_trial_and_the_repair_does_not(
    twin_venv: tuple[Path, Path],
) -> None:
    venv, folder = twin_venv
    before = _digest(venv)
    how = ["--python", venv, "--dry-run", "--trial", "--json", "--offline"]
    how += ["--find-links", folder]

    done = cudatx("remove", "cuda:13", *how)  # the seed's four cu13 twins
    assert done.returncode == 1, done.stderr
    plan = _json(done)
    assert sorted(p["name"] for p in plan["remove"]) == sorted(CU13)
    row = _roots(plan["trial"])["import torch"]
    assert (row["model"], row["trial"]) == ("breaks", "breaks")
    assert row["error"] == (
        "ImportError: libcudnn.so.9: cannot open shared object file: No such file or directory"
    )
    assert plan["trial"]["disagreements"] == []

    repaired = cudatx("remove", "cuda:13", *how, "--repair")
    assert repaired.returncode == 0, repaired.stdout + repaired.stderr
    trial = _json(repaired)["trial"]
    assert trial["breaks"] == 0 and trial["disagreements"] == []
    assert {r["trial"] for r in trial["roots"]} == {"loads"}
    assert "import torch" in _roots(trial)
    assert diff(before, _digest(venv)) == []


def test_a_run_time_load_no_import_makes_is_named_as_the_trial_blind_spot(
    tmp_path: Path,
) -> None:
    from tests.support.twin_world import healthy

    wheels = build_twin_world(tmp_path / "w", torch_init=TORCH_INIT)
    venv = healthy(wheels, tmp_path / "venv")
    done = cudatx(
        "remove", "nvidia-cublas-cu12", "--python", venv, "--dry-run", "--trial", "--json"
    )
    assert done.returncode == 1  # the model's verdict stands: cuDNN dlopens cuBLASLt
    trial = _json(done)["trial"]
    assert trial["breaks"] == 0
    assert trial["disagreements"] == [
        "the model expected a break the trial did not see: import torch works; only a GPU "
        "run would show it (a load made at run time)"
    ]


@pytest.mark.skipif(os.geteuid() != 0, reason="the refusal is root's")
@pytest.mark.parametrize(
    "how", ["world-writable folder above", "owned by another user", "a package of another user"]
)
def test_root_runs_no_trial_in_an_environment_another_user_can_write(
    blind_wheels: BlindWheels, tmp_path: Path, how: str, request: pytest.FixtureRequest
) -> None:
    # Where every user can reach it, with an interpreter every user can run: as root, cudatx
    # asks an interpreter another user can write as its owner (cudatx.trust), who could not
    # reach a test's private tmp_path.
    from tests.support.users import SYSTEM_PYTHON

    if not os.access(SYSTEM_PYTHON, os.X_OK):
        pytest.skip(f"no {SYSTEM_PYTHON} that every user can run")
    top = Path(tempfile.mkdtemp(prefix="cudatx-trial-", dir="/tmp"))
    top.chmod(0o755)
    request.addfinalizer(lambda: shutil.rmtree(top, ignore_errors=True))
    shared = top / "shared"
    shared.mkdir()
    venv = blind_env(blind_wheels, shared / "venv", SYSTEM_PYTHON)
    if how == "owned by another user":
        os.chown(site_packages(venv), 65534, 65534)
    elif how == "a package of another user":
        os.chown(site_packages(venv) / "blindpkg", 65534, 65534)
    else:
        os.chmod(shared, 0o777)  # no sticky bit: anyone can swap venv for their own
    marker = tmp_path / "ran"
    before = _digest(venv)
    done = cudatx(
        "remove", "hiddenlib", "--python", venv, "--dry-run", "--trial-cmd", f"touch {marker}"
    )
    assert done.returncode == 17, done.stdout + done.stderr
    assert "a trial runs the environment's code, and cudatx runs as root" in done.stderr
    assert not marker.exists()
    assert diff(before, _digest(venv)) == []
    # Without the flag, the plan is made as always: the model reads, it runs nothing.
    assert cudatx("remove", "hiddenlib", "--python", venv, "--dry-run").returncode == 0


def test_check_requirements_and_sync_take_a_trial(
    blind_wheels: BlindWheels, tmp_path: Path
) -> None:
    venv = blind_env(blind_wheels, tmp_path / "venv")
    pins = tmp_path / "requirements.txt"
    pins.write_text("blindpkg==1.0\n")  # as a sync: hiddenlib goes
    where = [*_where(blind_wheels), "--mode", "sync"]
    plain = cudatx("check-requirements", pins, "--python", venv, *where)
    assert plain.returncode == 0, plain.stdout + plain.stderr
    tried = cudatx("check-requirements", pins, "--python", venv, *where, "--trial", "--json")
    assert tried.returncode == 1, tried.stdout + tried.stderr
    (check,) = json.loads(tried.stdout)["files"]
    assert check["mode"] == "sync"
    assert _roots(check["plan"]["trial"])["import blindpkg"]["trial"] == "breaks"

    where = _where(blind_wheels)
    synced = cudatx("sync", pins, "--python", venv, *where, "--dry-run", "--trial", "--json")
    assert synced.returncode == 1
    assert _json(synced)["trial"]["disagreements"][0].startswith(
        "the model missed: import blindpkg fails: OSError:"
    )


def test_a_safe_apply_with_a_trial_goes_on(blind_wheels: BlindWheels, tmp_path: Path) -> None:
    venv = blind_env(blind_wheels, tmp_path / "venv")
    done = cudatx("install", "extra", "--python", venv, "--yes", "--trial", *_where(blind_wheels))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "nothing that worked before fails after (3 checks)" in done.stdout
    assert (site_packages(venv) / "extra" / "__init__.py").exists()


def test_a_copy_runs_its_own_scripts_not_the_originals(tmp_path: Path) -> None:
    """A copy lives elsewhere: a script whose #! names the original interpreter would run
    the original. The copy's are rewritten; the original's are not."""
    from tests.support.venvs import make_venv

    venv = make_venv(tmp_path / "venv")
    script = venv / "bin" / "tool"
    script.write_text(f"#!{venv}/bin/python\nprint('hi')\n")
    other = venv / "bin" / "other"
    other.write_text("#!/bin/sh\necho hi\n")
    before = _digest(venv)
    with shadow(os.fspath(venv), ("copy",)) as shade:
        assert shade.method == "copy" and shade.prefix != os.fspath(venv)
        copied = Path(shade.prefix) / "bin"
        assert (copied / "tool").read_text() == f"#!{shade.prefix}/bin/python\nprint('hi')\n"
        assert (copied / "other").read_text() == "#!/bin/sh\necho hi\n"
        assert shade.bytes_copied > 0
        assert shade.relocate(os.fspath(script)) == os.fspath(copied / "tool")
        assert shade.relocate("/usr/bin/python3") == "/usr/bin/python3"
        folder = shade.folder
    assert not os.path.exists(folder)
    assert diff(before, _digest(venv)) == []


def test_a_framework_load_step_catches_what_its_import_does_not(
    blind_wheels: BlindWheels, tmp_path: Path
) -> None:
    from tests.support.venvs import make_venv, uv_install

    venv = make_venv(tmp_path / "venv")
    uv_install(venv, [blind_wheels.onnxruntime, blind_wheels.hidden])
    how = ["--python", venv, "--dry-run", "--json"]
    assert cudatx("remove", "hiddenlib", *how).returncode == 0  # the model: safe
    done = cudatx("remove", "hiddenlib", *how, "--trial")
    assert done.returncode == 1, done.stdout + done.stderr
    rows = _roots(_json(done)["trial"])
    assert rows["import onnxruntime"]["trial"] == "loads"  # its import loads nothing
    step = rows["onnxruntime's preload_dlls() and CUDA provider"]
    assert (step["model"], step["trial"]) == ("loads", "breaks")
    assert step["disagreement"].startswith(
        "the model missed: onnxruntime's preload_dlls() and CUDA provider fails: OSError: "
    )


@pytest.mark.parametrize("command", ["remove", "install", "sync", "check-requirements", "doctor"])
def test_the_help_says_a_trial_runs_the_environments_code(command: str) -> None:
    done = cudatx(command, "--help")
    text = " ".join(done.stdout.split())
    assert "RUNS THE ENVIRONMENT'S CODE" in text
    assert (
        "never without this flag, and never as root on an environment another user can write"
        in text
    )


def test_the_trial_runs_the_uv_steps_the_apply_runs(tmp_path: Path) -> None:
    """One command, `remove cuda:13 --repair --yes --trial`, with a uv that logs each call:
    the trial's uninstall and reinstalls in the shadow are the apply's, word for word, but
    for the trial's --link-mode copy (the overlay keeps the prefix's path)."""
    from tests.support.venvs import uv_bin

    wheels = build_twin_world(tmp_path / "w", torch_init=TORCH_INIT)
    venv = contaminated(wheels, tmp_path / "venv")
    # The log lies in uv's cache: the one folder besides the environment (or the shadow)
    # that a confined uv may write in the apply and in the trial alike (cudatx.sandbox).
    cache = tmp_path / "uv-cache"
    cache.mkdir()
    log = cache / "calls.log"
    uv = tmp_path / "uv"
    uv.write_text(f'#!/bin/sh\nprintf "%s\\n" "$*" >> {log}\nexec {uv_bin()} "$@"\n')
    uv.chmod(0o755)
    done = cudatx(
        "remove", "cuda:13", "--repair", "--yes", "--trial", "--trial-shadow", "overlay",
        "--python", venv, "--uv", uv, "--offline", "--find-links", wheels.folder,
        env={"UV_CACHE_DIR": os.fspath(cache)},
    )  # fmt: skip
    if done.returncode == 17 or "no shadow" in done.stderr:
        pytest.skip(done.stderr)
    assert done.returncode == 0, done.stdout + done.stderr
    calls = log.read_text().splitlines()
    changing = [c for c in calls if c.startswith(("pip uninstall", "pip install"))]
    changing = [c for c in changing if "--dry-run" not in c and "--prefix" not in c]
    # The trial's calls come first (in the shadow), then the apply's.
    assert len(changing) == 2 * (1 + len(CU13))  # the uninstall, then one reinstall each
    trial, applied = changing[: len(changing) // 2], changing[len(changing) // 2 :]
    assert all("--link-mode copy" in c for c in trial if c.startswith("pip install"))
    assert all("--only-binary :all:" in c for c in trial if c.startswith("pip install"))
    assert not any("--link-mode" in c for c in applied)
    assert [c.replace(" --link-mode copy", "") for c in trial] == applied
    assert "nothing that worked before fails after" in done.stdout
    # and the real environment, changed by the apply, imports as the trial said it would
    import subprocess

    real = subprocess.run([venv / "bin" / "python", "-c", "import torch"], check=False)
    assert real.returncode == 0


def test_a_change_uv_cannot_make_in_the_shadow_is_unsafe_with_uvs_error(
    blind_wheels: BlindWheels, tmp_path: Path
) -> None:
    from tests.support.venvs import uv_bin

    venv = blind_env(blind_wheels, tmp_path / "venv")
    uv = tmp_path / "uv"  # fails where the trial installs (only it asks for --link-mode copy)
    uv.write_text(
        '#!/bin/sh\ncase "$*" in *"--link-mode copy"*) echo "error: no space left" >&2; '
        f'exit 2;; esac\nexec {uv_bin()} "$@"\n'
    )
    uv.chmod(0o755)
    how = ["--python", venv, "--dry-run", "--trial", "--json", "--uv", uv]
    done = cudatx("install", "extra", *how, *_where(blind_wheels))
    assert done.returncode == 1, done.stdout + done.stderr
    plan = _json(done)
    assert plan["safe"] is False
    assert plan["trial"]["error"] == "uv pip install failed: error: no space left"
    assert plan["notes"][-1].startswith("the trial could not make the change in the shadow")
