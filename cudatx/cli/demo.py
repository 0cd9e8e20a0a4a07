"""`cudatx demo`: the trap, built offline and looked at."""

from __future__ import annotations

import click


@click.command()
@click.option(
    "--keep",
    metavar="DIR",
    type=click.Path(file_okay=False),
    default=None,
    help="Build in DIR (missing or empty) and keep it [default: a temporary folder].",
)
@click.option(
    "--compiler",
    metavar="CC",
    default=None,
    help="C compiler for the tiny libraries ['none': use the prebuilt ones; default: $CC, cc].",
)
def demo(keep: str | None, compiler: str | None) -> int:
    """Build, offline, a small environment caught in the cu12/cu13 shared-path trap (real
    libraries, real wheels, real uv), then run `doctor`, `why libcudnn.so.9` and a dry run
    of removing the CUDA 13 cuDNN on it."""
    import shutil
    import tempfile
    from pathlib import Path

    from cudatx.demo.run import REMOVE, WHY, run_demo
    from cudatx.render import doctor as render_doctor
    from cudatx.render import plan as render_plan
    from cudatx.render import why as render_why

    folder = Path(keep) if keep else Path(tempfile.mkdtemp(prefix="cudatx-demo-"))
    try:
        run = run_demo(folder, compiler=compiler)
        venv = run.built.venv
        click.echo("Built a demo environment:")
        for line in run.built.story:
            click.echo(f"  {line}")
        click.echo(f"\n$ cudatx doctor --python {venv}")
        click.echo(render_doctor.to_text(run.doctor), nl=False)
        click.echo(f"\n$ cudatx why {WHY} --python {venv}")
        click.echo(render_why.to_text(run.why, run.sites), nl=False)
        click.echo(f"\n$ cudatx remove {REMOVE} --dry-run --python {venv}")
        click.echo(render_plan.to_text(run.plan, f"cudatx remove {REMOVE}", run.sites), nl=False)
        if keep:
            click.echo(f"\nThe environment stays at {venv}.")
    finally:
        if not keep:
            shutil.rmtree(folder, ignore_errors=True)
    return 0
