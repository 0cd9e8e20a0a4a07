"""torch.version.cuda of an installed torch, read from torch/version.py without importing it."""

from __future__ import annotations

import ast
import os
from collections.abc import Callable

from cudatx.models import Distribution


def read_torch_cuda(dist: Distribution, real: Callable[[str], str] = str) -> str | None:
    """The `cuda` string of `dist`'s torch/version.py; None when unreadable or a CPU build.
    `real` maps a path to the file holding its bytes (a staged file, in a simulation)."""
    path = os.path.join(dist.site, "torch", "version.py")
    if not os.path.exists(path):  # RECORD may spell it otherwise (13,000 rows: only then)
        relative = next(
            (e.path for e in dist.records if os.path.normpath(e.path) == "torch/version.py"),
            "torch/version.py",
        )
        path = os.path.join(dist.site, relative)
    try:
        with open(real(path), "rb") as stream:
            tree = ast.parse(stream.read())
    except (OSError, SyntaxError, ValueError):
        return None
    value: str | None = None
    for node in tree.body:
        if isinstance(node, ast.Assign):
            targets, assigned = node.targets, node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets, assigned = [node.target], node.value
        else:
            continue
        if any(isinstance(t, ast.Name) and t.id == "cuda" for t in targets):
            constant = assigned.value if isinstance(assigned, ast.Constant) else None
            value = constant if isinstance(constant, str) else None
    return value
