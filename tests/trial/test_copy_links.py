"""The copy shadow never leads back into the original (issue 32): a link in the environment
that names another of its folders by its absolute path (or climbs out of it and back in by
its name) is made to lead into the copy, so a `--trial-cmd` that writes through it writes the
copy. A link that leads outside the environment stays as it is (docs/trial.md).

The pure world (real wheels, real uv), `--trial-shadow copy`; the original digested (paths,
kinds, modes, bytes, link targets) before and after.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from cudatx.trial.shadow import shadow
from tests.support.digest import diff, tree_digest
from tests.support.pure_world import World, build_pure_wheels, install_pure_world, run


@pytest.fixture
def world(tmp_path: Path) -> World:
    return install_pure_world(build_pure_wheels(tmp_path / "wheels"), tmp_path)


def _links(w: World) -> dict[str, Path]:
    """Links in pure/ into `other/`: absolute to the folder, absolute to a file, and
    relative climbing out of the environment and back in by its name."""
    pure, other = w.site / "pure", w.site / "other"
    made = {
        "folder": pure / "abs_folder",
        "file": pure / "abs_file",
        "climbing": pure / "climbing",
    }
    made["folder"].symlink_to(other)
    made["file"].symlink_to(other / "data.txt")
    up = os.path.relpath(w.venv.parent, pure)  # out of the venv, then in again by its name
    made["climbing"].symlink_to(os.path.join(up, w.venv.name, os.path.relpath(other, w.venv)))
    return made


def test_a_write_through_an_in_environment_link_never_reaches_the_original(
    world: World,
) -> None:
    _links(world)
    rel = os.path.relpath(world.site / "pure", world.venv)
    writes = "; ".join(
        f'echo vandal >> "$VIRTUAL_ENV/{rel}/{via}"'
        for via in ("abs_folder/data.txt", "abs_file", "climbing/data.txt")
    )
    before = tree_digest(world.venv, exclude=())
    done = run(world, "remove", "pure", "--dry-run", "--offline", "--trial-shadow", "copy",
               "--trial-cmd", writes)  # fmt: skip
    assert done.returncode in (0, 1), done.stderr
    assert diff(before, tree_digest(world.venv, exclude=())) == []
    assert (world.site / "other" / "data.txt").read_text() == "precious\n"


def test_the_copy_resolves_links_inside_into_itself_and_leaves_those_outside(
    world: World,
) -> None:
    made = _links(world)
    outside = world.site / "pure" / "outside"
    outside.symlink_to(world.sentinel / "keep.txt")
    with shadow(os.fspath(world.venv), ("copy",)) as shade:
        copy = Path(shade.prefix)
        for link in made.values():
            in_copy = copy / link.relative_to(world.venv)
            assert Path(os.path.realpath(in_copy)).is_relative_to(copy), in_copy
        in_copy = copy / outside.relative_to(world.venv)
        assert os.readlink(in_copy) == os.fspath(world.sentinel / "keep.txt")
