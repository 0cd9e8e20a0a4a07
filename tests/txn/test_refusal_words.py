"""The refusal of an unsafe plan points at what the plan printed (issue 34 item 5): it names
the sections that say why (their JSON keys under --json) and suggests --repair only where
the plan does. Real wheels, a real venv, cudatx run as a user runs it."""

from __future__ import annotations

import json
import re
import subprocess

from tests.support.txn_world import CU12, CU13, REFUSED, Venv, assert_same, error, journals, run

# Every heading a plan prints for a reason it is unsafe (docs/commands.md, "remove").
HEADINGS = (
    "Would break",
    "Frameworks' contexts",
    "Would leave requirements unmet",
    "Would mix CUDA majors",
    "Would leave hollow",
    "Would overwrite",
    "Trial",
)


def _refused(venv: Venv, *args: str) -> tuple[subprocess.CompletedProcess[str], list[str], str]:
    """The refusal of `remove ARGS`: the run, the names its error line quotes, what follows."""
    done = run(venv, "remove", *args, "--yes", "--ignore-running")
    assert done.returncode == REFUSED, done.stderr
    line = error(done)
    why, _, rest = line.partition(";")
    return done, re.findall(r'"([^"]+)"', why), rest


def _check_text(done: subprocess.CompletedProcess[str], named: list[str], rest: str) -> None:
    lines = done.stdout.splitlines()
    printed = [h for h in HEADINGS if any(ln.startswith(h) for ln in lines)]
    assert printed, done.stdout
    assert named == printed, (named, done.stdout)
    suggested = any(ln.startswith("Suggested: ") and "--repair" in ln for ln in lines)
    assert ("--repair" in rest) == suggested, (rest, done.stdout)
    assert "--force" in rest


def test_the_refusal_names_the_sections_the_plan_printed(venv: Venv) -> None:
    before = venv.digest()
    # cuDNN 12 taken away: a break, and cuDNN 13 left hollow; the repair that reinstalls it
    # restores other bytes, so the plan suggests it for its own dry run to check.
    done, named, rest = _refused(venv, CU12)
    assert named == ["Would break", "Would leave hollow"]
    _check_text(done, named, rest)
    assert "--repair may make it safe" in rest
    # cuDNN 13 taken away: the repair restores cuDNN 12's bytes, which are on disk: checked
    # safe, and said so.
    done, named, rest = _refused(venv, CU13)
    _check_text(done, named, rest)
    assert "--repair makes it safe" in rest
    # cuBLAS 12 taken away: a break no repair helps (nothing else owns the file), so no
    # --repair is suggested, and no section that was not printed is named.
    done, named, rest = _refused(venv, "nvidia-cublas-cu12")
    assert named == ["Would break"]
    _check_text(done, named, rest)
    assert rest.strip() == "--force applies it anyway"
    assert_same(before, venv.digest())
    assert journals(venv) == []


def test_under_json_it_names_the_plans_keys(venv: Venv) -> None:
    done, named, rest = _refused(venv, CU12, "--json")
    plan = json.loads(done.stdout)
    assert named == ["broken", "losses"]
    assert all(plan[key] for key in named), named
    assert "--repair may make it safe" in rest and plan["repair"]["safe"] is None
