"""`cudatx demo`: build the trap environment, then look at it as a user would."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from cudatx.analysis.doctor import DoctorReport, diagnose
from cudatx.analysis.why import WhyReport, explain
from cudatx.demo.build import DemoEnv, build_demo
from cudatx.planning.change import Planning, propose_removal
from cudatx.planning.models import Plan
from cudatx.scan import scan

WHY = "libcudnn.so.9"
REMOVE = "nvidia-cudnn-cu13"


@dataclass(frozen=True)
class DemoRun:
    built: DemoEnv
    sites: tuple[str, ...]
    doctor: DoctorReport
    why: WhyReport
    plan: Plan  # of removing REMOVE


def run_demo(folder: Path, *, compiler: str | None) -> DemoRun:
    """Build the demo environment in `folder`, then run doctor, why and a removal's plan."""
    built = build_demo(folder, compiler=compiler)
    env = scan(str(built.venv), ld_library_path=None)
    plan = propose_removal(env, (REMOVE,), (), Planning()).plan
    return DemoRun(
        built=built,
        sites=env.target.site_packages,
        doctor=diagnose(env),
        why=explain(env, WHY),
        plan=plan,
    )
