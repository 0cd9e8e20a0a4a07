"""`cudatx demo`: the trap, built offline and looked at."""

from __future__ import annotations

import click

from cudatx.cli.output import Output


@click.command()
@click.option(
    "--keep",
    metavar="DIR",
    type=click.Path(file_okay=False),
    default=None,
    help="Build in DIR (missing or empty) [default: a new folder under the temporary "
    "folder]; either way the environment stays, so the commands it prints work.",
)
@click.option(
    "--compiler",
    metavar="CC",
    default=None,
    help="C compiler for the tiny libraries ['none': use the prebuilt ones; default: $CC, cc].",
)
def demo(keep: str | None, compiler: str | None, out: Output) -> int:
    """Build, offline, a small environment caught in the cu12/cu13 shared-path trap (real
    libraries, real wheels, real uv), then run `doctor`, `why libcudnn.so.9` and a dry run
    of removing the CUDA 13 cuDNN on it; then plan removing a plug-in only a run loads,
    before and after `cudatx trace` of that run."""
    import shlex
    import shutil
    import tempfile
    from pathlib import Path

    from cudatx.analysis.commands import cudatx_line
    from cudatx.demo.build import PLUGIN
    from cudatx.demo.run import REMOVE, TRACED, WHY, run_demo
    from cudatx.render import colour
    from cudatx.render import doctor as render_doctor
    from cudatx.render import plan as render_plan
    from cudatx.render import trace as render_trace
    from cudatx.render import why as render_why

    folder = Path(keep) if keep else Path(tempfile.mkdtemp(prefix="cudatx-demo-"))
    try:
        run = run_demo(folder, compiler=compiler)
    except BaseException:
        if not keep:  # nothing was shown of it: a half-built folder helps no one
            shutil.rmtree(folder, ignore_errors=True)
        raise
    venv = run.built.venv
    if out.quiet:  # what was built, not the walk through it (-q's one meaning: no narration)
        wheels = shlex.quote(str(run.built.wheels))
        out.echo(f"Built a demo environment at {venv} (its wheels in {wheels}).")
        return 0
    out.echo("Built a demo environment:")
    for line in run.built.story:
        out.echo(f"  {line}")
    # Each report coloured as its own command colours it (--color, NO_COLOR, a terminal).
    out.echo(f"\n$ {cudatx_line(run.env, ('doctor',))}")
    out.echo(render_doctor.to_text(run.doctor), nl=False, paint=colour.doctor)
    out.echo(f"\n$ {cudatx_line(run.env, ('why', WHY))}")
    out.echo(render_why.to_text(run.why, run.sites), nl=False, paint=colour.why)
    removal = cudatx_line(run.env, ("remove", REMOVE), uv=run.uv_options)
    out.echo(f"\n$ {removal} --dry-run")
    out.echo(render_plan.to_text(run.plan, removal, run.sites), nl=False, paint=colour.plan)
    plugin = cudatx_line(run.env, ("remove", PLUGIN.name), uv=run.uv_options)
    out.echo(f"\n$ {plugin} --dry-run")
    out.echo(render_plan.to_text(run.plugin_before, plugin, run.sites), nl=False, paint=colour.plan)
    traced = ["cudatx", "trace", "--python", run.env.target.prefix, "--", *TRACED]
    out.echo(f"\n$ {shlex.join(traced)}")
    out.echo(render_trace.recorded(run.trace))
    out.echo(f"\n$ {plugin} --dry-run")
    out.echo(render_plan.to_text(run.plugin_after, plugin, run.sites), nl=False, paint=colour.plan)
    # The commands above name this environment: it stays, so that they can be run.
    out.echo(
        f"\nThe demo environment stays at {venv}, for the commands above (its wheels are in "
        f"{shlex.quote(str(run.built.wheels))}, which they name).\n"
        f"Remove it with: rm -rf {shlex.quote(str(folder))}"
    )
    return 0
