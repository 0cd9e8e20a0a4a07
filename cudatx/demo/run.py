"""`cudatx demo`: build the trap environment, then look at it as a user would: doctor, why,
a removal's plan; then the plug-in only a run loads, planned before and after a trace."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from cudatx.analysis.doctor import DoctorReport, diagnose
from cudatx.analysis.why import WhyReport, explain
from cudatx.demo.build import PLUGIN, PLUGIN_WORKLOAD, DemoEnv, build_demo
from cudatx.discover.target import start_query
from cudatx.discover.traces import Trace
from cudatx.environment import Environment
from cudatx.planning.change import Planning, propose_removal
from cudatx.planning.models import Plan
from cudatx.scan import scan
from cudatx.txn.trace import trace

WHY = "libcudnn.so.9"
REMOVE = "nvidia-cudnn-cu13"
TRACED = ("python", "-c", PLUGIN_WORKLOAD)


@dataclass(frozen=True)
class DemoRun:
    built: DemoEnv
    sites: tuple[str, ...]
    doctor: DoctorReport
    why: WhyReport
    plan: Plan  # of removing REMOVE
    env: Environment  # as scanned before the plan, for the commands the demo prints
    uv_options: tuple[str, ...]  # where the plan found wheels
    plugin_before: Plan  # of removing the plug-in, before the trace: nothing names it
    trace: Trace  # the traced run of TRACED
    plugin_after: Plan  # the same, after it: the run's load counts


def run_demo(folder: Path, *, compiler: str | None) -> DemoRun:
    """Build the demo environment in `folder`, then run doctor, why and a removal's plan."""
    built = build_demo(folder, compiler=compiler)
    query = start_query(str(built.venv))  # asked once: the rescan after the trace reuses it
    env = scan(query, ld_library_path=None)
    # Where the demo's wheels are, so that the repair the plan suggests stages them, offline.
    where = ("--offline", "--find-links", str(built.wheels))
    planning = Planning(uv_options=where)
    plan = propose_removal(env, (REMOVE,), (), planning).plan
    before = propose_removal(env, (PLUGIN.name,), (), planning).plan
    traced = trace(env.target, TRACED, cwd=str(folder))
    rescanned = scan(query, ld_library_path=None)
    after = propose_removal(rescanned, (PLUGIN.name,), (), planning).plan
    return DemoRun(
        built=built,
        sites=env.target.site_packages,
        doctor=diagnose(env),
        why=explain(env, WHY),
        plan=plan,
        env=env,
        uv_options=where,
        plugin_before=before,
        trace=traced,
        plugin_after=after,
    )
