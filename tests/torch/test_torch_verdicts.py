"""Verdicts on real torch environments (slow): healthy ones are quiet, and the contaminated
one of the seed story is cured by what cudatx says, in both directions.

- torch 2.9.1+cu128 with its cu12 wheels, then the cu13 cuDNN, NCCL, cuSPARSELt and NVSHMEM
  installed over them: `remove cuda:13 --repair` is safe, applied it leaves torch loading
  cuDNN 9.10 with every cu12 RECORD hash matching, and doctor's fixes, run as printed on a
  copy, cure it the same way;
- torch 2.14.1+cu130 with the cu12 four over its cu13 ones: the same with `cuda:12`.

The cu12 wheels come from the package index, the cu13 ones from this machine's wheel store
(pip's find-links), which uv is pointed at as a user's configuration would.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from cudatx.discover.dists import scan_distributions
from tests.support.cli import cudatx
from tests.support.torch_env import download_wheels, local_store, torch_env, torch_with
from tests.support.venvs import make_venv, uv_bin

pytestmark = pytest.mark.slow

CU12 = {
    "nvidia-cudnn-cu12": "9.10.2.21",
    "nvidia-nccl-cu12": "2.27.5",
    "nvidia-cusparselt-cu12": "0.7.1",
    "nvidia-nvshmem-cu12": "3.3.20",
}
CU13 = {
    "nvidia-cudnn-cu13": "9.24.0.43",
    "nvidia-nccl-cu13": "2.30.7",
    "nvidia-cusparselt-cu13": "0.8.1",
    "nvidia-nvshmem-cu13": "3.4.5",
}
# (torch release, the four it needs, the four installed over them, the selector that cures)
STORIES = [
    pytest.param(("2.9.1", CU12, CU13, "cuda:13"), id="torch-2.9.1-cu13-over"),
    pytest.param(("2.14.1", CU13, CU12, "cuda:12"), id="torch-2.14.1-cu12-over"),
]


def _cudatx(env: Path, *args: str | os.PathLike[str]) -> subprocess.CompletedProcess[str]:
    store = local_store()
    links = ["--find-links", os.fspath(store)] if store else []
    return cudatx(*args, "--python", env, *links, hide=(), timeout=None)


def _doctor(env: Path) -> dict[str, object]:
    done = cudatx("doctor", "--json", "--python", env, hide=(), timeout=None)
    report: dict[str, object] = json.loads(done.stdout)
    assert done.returncode == (1 if report["errors"] else 0), done.stderr
    return report


def _site(env: Path) -> Path:
    return next((env / "lib").glob("python*/site-packages"))


def _records_match(env: Path, names: dict[str, str]) -> None:
    """Every file of these distributions matches its RECORD, byte for byte."""
    dists, _ = scan_distributions((str(_site(env)),))
    found = {d.name: d for d in dists}
    assert {n: found[n].version for n in names if n in found} == names
    for name in names:
        dist = found[name]
        for entry in dist.records:
            if entry.hash_algorithm != "sha256":
                continue
            data = (Path(dist.site) / entry.path).read_bytes()
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
            assert digest.decode() == entry.hash_digest, f"{name}: {entry.path}"


def _cudnn_mapped(env: Path) -> str:
    """The libcudnn.so.9 `import torch` maps, read from /proc/self/maps of a real
    interpreter."""
    code = (
        "import torch\n"
        "paths = {l.split()[-1] for l in open('/proc/self/maps') if 'libcudnn.so.9' in l}\n"
        "print(*paths)\n"
    )
    done = subprocess.run(
        [str(env / "bin" / "python"), "-c", code], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("verdicts")


def _contaminated(version: str, over: dict[str, str], into: Path) -> Path:
    wheels = download_wheels([f"{n}=={v}" for n, v in over.items()], into / "wheels")
    return torch_with(wheels, into, version)


# -- healthy environments are quiet ---------------------------------------------------------


@pytest.mark.parametrize("version", ["2.9.1", "2.14.1"])
def test_a_clean_torch_env_is_quiet_and_reads_its_own_preloads(version: str) -> None:
    env = torch_env(version)
    report = _doctor(env)
    assert report["errors"] == 0 and report["warnings"] == 0, report["problems"]
    init_py = _site(env) / "torch" / "__init__.py"
    assert f"torch preload list: read from {init_py}" in report["notes"]  # type: ignore[operator]
    plan = json.loads(_cudatx(env, "remove", "pip", "--dry-run", "--json").stdout)
    assert plan["safe"] and plan["preexisting"] == []


def test_installing_torchvision_on_torch_2_14_is_safe() -> None:
    env = torch_env("2.14.1")
    done = _cudatx(env, "install", "torchvision==0.29.1", "--dry-run", "--json")
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr
    plan = json.loads(done.stdout)
    assert plan["safe"] and plan["preexisting"] == []
    assert "torchvision" in {p["name"] for p in plan["install"]}


def test_installing_torch_into_an_empty_venv_is_safe(tmp_path: Path) -> None:
    empty = make_venv(tmp_path / "empty")
    done = _cudatx(empty, "install", "torch==2.14.1", "--dry-run", "--json")
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr
    plan = json.loads(done.stdout)
    assert plan["safe"] and plan["preexisting"] == [] and plan["broken"] == []


# -- the seed story, both directions --------------------------------------------------------


@pytest.fixture(scope="module", params=STORIES)
def story(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, dict[str, str], dict[str, str], str, Path]]:
    version, keep, over, selector = request.param
    env = _contaminated(version, over, tmp_path_factory.mktemp(f"seed-{version}"))
    yield version, keep, over, selector, env
    shutil.rmtree(env, ignore_errors=True)


def test_a_trial_of_the_seed_removal_sees_import_torch_fail_and_the_repair_keep_it(
    story: tuple[str, dict[str, str], dict[str, str], str, Path],
) -> None:
    """The seed environment itself (issue 25): `remove cuda:13 --dry-run --trial` is unsafe,
    the trial showing `import torch` failing on libcudnn.so.9 in its shadow; with --repair
    the trial sees every import still working. Runs before the cure below changes `env`."""
    version, _, _, selector, env = story
    done = _cudatx(env, "remove", selector, "--dry-run", "--trial", "--json")
    assert done.returncode == 1, done.stdout[-2000:] + done.stderr
    trial = json.loads(done.stdout)["trial"]
    torch = {r["check"]: r for r in trial["roots"]}["import torch"]
    if version == "2.9.1":
        # The seed: torch imports before (on the CUDA 13 bytes), and not after.
        assert (torch["model"], torch["trial"]) == ("breaks", "breaks"), torch
        assert "libcudnn.so.9" in torch["error"], torch
    else:
        # torch 2.14.1 with the cu12 four over its own: its import already fails (cu12's
        # NCCL lacks ncclCommResume), as doctor says; removing the four alone keeps it
        # failing, now on the files the removal deletes.
        assert torch["trial"] == "failed before", torch
        assert "libcudnn.so.9" in torch["error"], torch
    repaired = _cudatx(env, "remove", selector, "--repair", "--dry-run", "--trial", "--json")
    assert repaired.returncode == 0, repaired.stdout[-2000:] + repaired.stderr
    after = json.loads(repaired.stdout)["trial"]
    assert [r["check"] for r in after["roots"] if r["trial"] == "breaks"] == [], after
    fixed = {r["check"]: r for r in after["roots"]}["import torch"]
    assert fixed["trial"] == ("loads" if version == "2.9.1" else "fixed"), fixed


def test_the_cure_is_safe_then_applied_restores_torchs_own_builds(
    story: tuple[str, dict[str, str], dict[str, str], str, Path],
) -> None:
    _, keep, over, selector, env = story
    before = _doctor(env)
    assert before["errors"] and before["fixes"], before
    dry = _cudatx(env, "remove", selector, "--dry-run", "--repair", "--json")
    assert dry.returncode == 0, dry.stdout[-3000:] + dry.stderr
    plan = json.loads(dry.stdout)
    assert plan["safe"] and {p["name"] for p in plan["remove"]} == set(over)
    assert {p["name"] for p in plan["reinstall"]} == set(keep)
    # Applied as a user would: no --force; no process here maps these files.
    applied = _cudatx(env, "remove", selector, "--repair", "--yes")
    assert applied.returncode == 0, applied.stderr
    _records_match(env, keep)
    site = _site(env)
    cudnn = _cudnn_mapped(env)
    assert cudnn == os.path.realpath(site / "nvidia/cudnn/lib/libcudnn.so.9")
    after = _doctor(env)
    assert after["errors"] == 0 and after["warnings"] == 0, after["problems"]


def test_doctors_fixes_run_as_printed_cure_a_copy(
    story: tuple[str, dict[str, str], dict[str, str], str, Path], tmp_path: Path
) -> None:
    version, keep, over, _, _ = story
    env = _contaminated(version, over, tmp_path)
    report = _doctor(env)
    fixes = report["fixes"]
    assert isinstance(fixes, list) and len(fixes) == 1, fixes  # one cudatx command cures it
    (fix,) = fixes
    assert fix.startswith("cudatx remove ") and " --repair " in fix and "--yes" in fix
    # Every error is of that one cause: the builds swapped in, or what they lack (torch
    # 2.14.1's libtorch_cuda uses NCCL symbols the CUDA 12 NCCL 2.27 does not define).
    assert all(p["removes"] for p in report["problems"] if p["severity"] == "error"), report
    store = local_store()
    environ = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "CONDA_PREFIX")}
    environ["PATH"] = os.pathsep.join(
        [os.path.dirname(sys.executable), os.path.dirname(uv_bin()), environ.get("PATH", "")]
    )
    if store:
        environ["UV_FIND_LINKS"] = os.fspath(store)  # where this machine's uv finds wheels
    done = subprocess.run(["bash", "-c", fix], env=environ, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    _records_match(env, keep)
    after = _doctor(env)
    assert after["errors"] == 0 and after["warnings"] == 0, after["problems"]


# -- the aftermath: the twins uninstalled by hand, every one of torch's four left hollow ------


_LIBRARIES = ("libcudnn.so.9", "libnccl.so.2", "libcusparseLt.so.0", "libnvshmem_host.so.3")


@pytest.mark.parametrize("tale", STORIES)
def test_the_aftermath_is_named_whole_and_cured_in_one_round(
    tale: tuple[str, dict[str, str], dict[str, str], str], tmp_path: Path
) -> None:
    """The seed user's loop: a plain `uv pip uninstall` of the four twins leaves torch's own
    four hollow. One doctor names all four libraries (the real import names only the first),
    its fixes are one command, and run as printed they bring `import torch` back in one
    round: doctor then exits 0."""
    version, keep, over, _ = tale
    env = _contaminated(version, over, tmp_path)
    done = subprocess.run(
        [uv_bin(), "pip", "uninstall", "--python", os.fspath(env), *over],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert _import_torch(env).returncode != 0  # the real import fails on the first of them
    report = _doctor(env)
    errors = [p for p in report["problems"] if p["severity"] == "error"]  # type: ignore[attr-defined]
    said = json.dumps(errors)
    assert all(lib in said for lib in _LIBRARIES), said
    assert {d for p in errors for d in p["distributions"]} >= set(keep), errors
    fixes = report["fixes"]
    assert isinstance(fixes, list) and len(fixes) == 1, fixes
    environ = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "CONDA_PREFIX")}
    environ["PATH"] = os.pathsep.join(
        [os.path.dirname(sys.executable), os.path.dirname(uv_bin()), environ.get("PATH", "")]
    )
    store = local_store()
    if store:
        environ["UV_FIND_LINKS"] = os.fspath(store)
    ran = subprocess.run(["bash", "-c", fixes[0]], env=environ, capture_output=True, text=True)
    assert ran.returncode == 0, ran.stderr[-3000:]
    imported = _import_torch(env)
    assert imported.returncode == 0, imported.stderr[-3000:]
    after = _doctor(env)
    assert after["errors"] == 0, after["problems"]


def _import_torch(env: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(env / "bin" / "python"), "-c", "import torch"],
        capture_output=True,
        text=True,
        check=False,
    )
