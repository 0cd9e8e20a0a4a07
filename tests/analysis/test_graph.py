"""The environment graph and its four renderings, on a real venv with real ELF objects.

Three wheels installed by real uv: gx-app (a real extension module that needs gx-core's
library through its RPATH, and a name no file provides), gx-core (two libraries, the first
needing the second) and gx-win (a pure wheel that gx-app requires only on Windows).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import networkx as nx
import pytest

from cudatx.analysis.graph import around, build_graph
from cudatx.discover.target import start_query
from cudatx.environment import Environment
from cudatx.errors import ExitCode, NotInEnvironment
from cudatx.render import graph as render_graph
from cudatx.render.formats import formats
from cudatx.scan import scan
from tests.support import (
    build_wheel,
    compile_extension,
    compile_lib,
    make_venv,
    site_packages,
    uv_install,
)

FORMATS = formats("graph")


def render(graph: nx.MultiDiGraph, fmt: str) -> str:
    return render_graph.render(graph, fmt).text


@dataclass
class Fixture:
    site: Path
    env: Environment
    graph: nx.MultiDiGraph
    ext: str  # key of the extension module

    def file(self, rel: str) -> str:
        return f"file:{self.env.keys(str(self.site / rel))}"


@pytest.fixture(scope="module")
def fx(tmp_path_factory: pytest.TempPathFactory) -> Fixture:
    root = tmp_path_factory.mktemp("graph")
    build = root / "build"
    (build / "gxcore" / "lib").mkdir(parents=True)
    dep = compile_lib(build / "gxcore/lib/libgxdep.so", soname="libgxdep.so")
    core = compile_lib(build / "gxcore/lib/libgxcore.so", soname="libgxcore.so", needed=[dep])
    (build / "gxapp").mkdir()
    ext = compile_extension(
        build / "gxapp",
        "_ext",
        needed=[core],
        rpath="$ORIGIN/../gxcore/lib",
        extra_needed_names=["libgxnowhere.so.1"],
    )
    wheels = root / "wheels"
    built = [
        build_wheel(
            wheels,
            "gx-app",
            "1.0",
            {f"gxapp/{ext.name}": ext},
            requires=[
                "gx-core>=1.0",
                'gx-win; sys_platform == "win32"',
                'gx-win; extra == "full"',
                "gx-absent>=1",
            ],
            metadata_extra=["Provides-Extra: full"],
        ),
        build_wheel(
            wheels,
            "GX_Core",
            "1.0",
            {"gxcore/lib/libgxcore.so": core, "gxcore/lib/libgxdep.so": dep},
            requires=["gx-win>=2"],
        ),
        build_wheel(wheels, "gx-win", "1.0", {"gxwin/__init__.py": b""}),
    ]
    venv = make_venv(root / "venv")
    uv_install(venv, built)
    site = site_packages(venv)
    env = scan(start_query(str(venv)), ld_library_path=None)
    ext_key = env.keys(str(site / "gxapp" / ext.name))
    return Fixture(site, env, build_graph(env), ext_key)


def _edges(g: nx.MultiDiGraph, kind: str) -> list[tuple[str, str, dict[str, object]]]:
    return [(u, v, d) for u, v, d in g.edges(data=True) if d["kind"] == kind]


# -- the model ------------------------------------------------------------------------------


def test_nodes(fx: Fixture) -> None:
    g = fx.graph
    for name in ("gx-app", "gx-core", "gx-win"):
        assert g.nodes[f"dist:{name}"]["kind"] == "distribution"
        assert g.nodes[f"dist:{name}"]["version"] == "1.0"
    for rel in ("gxcore/lib/libgxcore.so", "gxcore/lib/libgxdep.so"):
        assert g.nodes[fx.file(rel)] == {
            "kind": "file",
            "path": fx.file(rel)[len("file:") :],
            "owned": True,
            "label": rel,
        }
    assert g.nodes[f"file:{fx.ext}"]["owned"] is True
    assert g.nodes["soname:libgxcore.so"]["kind"] == "soname"
    assert g.nodes["missing:libgxnowhere.so.1"]["status"] == "not found"
    # Only loaded ELF objects are files: gx-win's __init__.py and the RECORD files are not.
    paths = [d["path"] for _, d in g.nodes(data=True) if d["kind"] == "file"]
    assert not any(p.endswith((".py", "RECORD", "METADATA")) for p in paths)
    for _, data in g.nodes(data=True):
        assert all(isinstance(v, str | int | bool) for v in data.values()), data


def test_owns(fx: Fixture) -> None:
    owns = {(u, v) for u, v, _ in _edges(fx.graph, "owns")}
    assert ("dist:gx-core", fx.file("gxcore/lib/libgxcore.so")) in owns
    assert ("dist:gx-core", fx.file("gxcore/lib/libgxdep.so")) in owns
    assert ("dist:gx-app", f"file:{fx.ext}") in owns
    assert not any(u == "dist:gx-win" for u, _ in owns)


def test_needs_with_evidence(fx: Fixture) -> None:
    needs = {(u, v): d for u, v, d in _edges(fx.graph, "needs")}
    core = needs[(fx.file("gxcore/lib/libgxcore.so"), "soname:libgxdep.so")]
    assert core["evidence"] == "DT_NEEDED"
    assert core["roots"] == fx.ext
    ext = needs[(f"file:{fx.ext}", "soname:libgxcore.so")]
    assert ext["evidence"] == "DT_NEEDED"
    assert (f"file:{fx.ext}", "soname:libgxnowhere.so.1") in needs
    # The import: Python's import code (libpython, or the interpreter) dlopens the module.
    imports = [(u, v) for (u, v), d in needs.items() if d["evidence"] == "import"]
    assert [v for _, v in imports if fx.ext in v] == [f"soname:{fx.ext}"]
    importer = next(u for u, v in imports if v == f"soname:{fx.ext}")
    assert fx.graph.nodes[importer]["owned"] is False


def test_resolves_with_how(fx: Fixture) -> None:
    resolves = {(u, v): d for u, v, d in _edges(fx.graph, "resolves")}
    for name, rel in (("libgxcore.so", "libgxcore.so"), ("libgxdep.so", "libgxdep.so")):
        edge = resolves[(f"soname:{name}", fx.file(f"gxcore/lib/{rel}"))]
        # libgxdep.so is needed by libgxcore.so, which has no RPATH: the extension's serves.
        assert edge == {"kind": "resolves", "how": "rpath", "source": fx.ext, "status": "resolved"}
    assert resolves[(f"soname:{fx.ext}", f"file:{fx.ext}")]["how"] == "path"
    gone = resolves[("soname:libgxnowhere.so.1", "missing:libgxnowhere.so.1")]
    assert gone["status"] == "not found"


def test_requires_with_markers_evaluated(fx: Fixture) -> None:
    requires = {(u, v): d for u, v, d in _edges(fx.graph, "requires")}
    assert requires == {
        ("dist:gx-app", "dist:gx-core"): {
            "kind": "requires",
            "specifier": ">=1.0",
            "satisfied": True,
        },
        # gx-core's own requirement is unmet (gx-win is 1.0): an edge, marked so.
        ("dist:gx-core", "dist:gx-win"): {
            "kind": "requires",
            "specifier": ">=2",
            "satisfied": False,
        },
    }


def test_build_is_deterministic(fx: Fixture) -> None:
    again = build_graph(fx.env)
    assert list(again.nodes(data=True)) == list(fx.graph.nodes(data=True))
    assert list(again.edges(keys=True, data=True)) == list(fx.graph.edges(keys=True, data=True))
    for fmt in FORMATS:
        assert render(again, fmt) == render(fx.graph, fmt)


# -- around ---------------------------------------------------------------------------------


def test_around_distribution(fx: Fixture) -> None:
    plain = around(fx.graph, "GX_App")
    # No requires edges unless asked; gx-core stays as the provider of what gx-app needs.
    assert not _edges(plain, "requires")
    assert "dist:gx-core" in plain and fx.file("gxcore/lib/libgxcore.so") in plain
    part = around(fx.graph, "GX_App", requires=True)  # canonicalised
    assert part.number_of_nodes() < fx.graph.number_of_nodes()
    assert {"soname:libgxcore.so", "soname:libgxnowhere.so.1"} <= set(part)
    assert "dist:gx-core" in part  # required: one step away
    assert fx.file("gxcore/lib/libgxdep.so") in part  # gx-app -> gx-core -> its file
    assert "soname:libgxdep.so" not in part  # three steps away
    assert set(around(fx.graph, "gx-app", radius=0)) == {"dist:gx-app"}


def test_around_soname_and_file(fx: Fixture) -> None:
    part = around(fx.graph, "libgxdep.so", radius=1)
    # The soname, and the file of that basename: their needers, providers and owners.
    assert {
        "soname:libgxdep.so",
        fx.file("gxcore/lib/libgxdep.so"),
        fx.file("gxcore/lib/libgxcore.so"),
        "dist:gx-core",
    } <= set(part)
    # Radius 0: the file, and its owners (every co-owner of a shared path is kept).
    assert set(around(fx.graph, "gxcore/lib/libgxcore.so", radius=0)) == {
        fx.file("gxcore/lib/libgxcore.so"),
        "dist:gx-core",
    }
    assert set(around(fx.graph, fx.ext, radius=0)) == {
        f"file:{fx.ext}",
        f"soname:{fx.ext}",
        "dist:gx-app",
    }


def test_around_unknown_name(fx: Fixture) -> None:
    with pytest.raises(NotInEnvironment) as caught:
        around(fx.graph, "no-such-thing")
    assert caught.value.exit_code is ExitCode.NOT_FOUND


# -- renderings -----------------------------------------------------------------------------


def test_json(fx: Fixture) -> None:
    data = json.loads(render(fx.graph, "json"))
    assert data["schema_version"] == 1
    assert len(data["nodes"]) == fx.graph.number_of_nodes()
    assert len(data["edges"]) == fx.graph.number_of_edges()
    assert [n["id"] for n in data["nodes"]] == sorted(fx.graph)
    back = nx.node_link_graph(data, directed=True, multigraph=True, edges="edges")
    assert back.number_of_nodes() == fx.graph.number_of_nodes()
    assert back.number_of_edges() == fx.graph.number_of_edges()


def test_graphml(fx: Fixture) -> None:
    back = nx.parse_graphml(render(fx.graph, "graphml"))
    assert back.is_directed() and back.is_multigraph()
    assert back.number_of_nodes() == fx.graph.number_of_nodes()
    assert back.number_of_edges() == fx.graph.number_of_edges()
    assert back.nodes[fx.file("gxcore/lib/libgxcore.so")]["owned"] is True


_DOT_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')


def _check_dot(text: str, graph: nx.MultiDiGraph) -> None:
    lines = text.splitlines()
    assert lines[0] == "digraph cudatx {" and lines[-1] == "}"
    bare = _DOT_STRING.sub("S", text)  # what is left outside quoted strings
    assert bare.count("{") == bare.count("}") == 1
    assert bare.count('"') == 0
    node_lines = [_DOT_STRING.sub("S", ln) for ln in lines]
    assert sum(1 for ln in node_lines if re.fullmatch(r"  S \[.*\];", ln)) == len(graph)
    assert sum(1 for ln in node_lines if re.fullmatch(r"  S -> S \[.*\];", ln)) == (
        graph.number_of_edges()
    )


def test_dot(fx: Fixture, tmp_path: Path) -> None:
    text = render(fx.graph, "dot")
    _check_dot(text, fx.graph)
    assert f'"file:{fx.ext}" -> "soname:libgxcore.so" [label="needs DT_NEEDED"];' in text
    if shutil.which("dot") is not None:
        done = subprocess.run(
            ["dot", "-Tsvg"], input=text, capture_output=True, text=True, check=False
        )
        assert done.returncode == 0, done.stderr
        assert "<svg" in done.stdout


_MERMAID_NODE = re.compile(
    r"  ([A-Za-z0-9_]+)(\[\[|\[|\(|\{\{)\"[^\"]*\"(\]\]|\]|\)|\}\})(:::\w+)?"
)
_MERMAID_EDGE = re.compile(r"  ([A-Za-z0-9_]+) (-->|-\.->)\|\"[^\"]*\"\| ([A-Za-z0-9_]+)")


def _check_mermaid(text: str, graph: nx.MultiDiGraph) -> None:
    lines = text.splitlines()
    assert lines[0] == "flowchart LR"
    defined = [m.group(1) for ln in lines if (m := _MERMAID_NODE.fullmatch(ln))]
    assert len(defined) == len(set(defined)) == len(graph)
    edges = [m for ln in lines if (m := _MERMAID_EDGE.fullmatch(ln))]
    assert len(edges) == graph.number_of_edges()
    for m in edges:
        assert m.group(1) in defined and m.group(3) in defined
    rest = [ln for ln in lines[1:] if not _MERMAID_NODE.fullmatch(ln)]
    rest = [ln for ln in rest if not _MERMAID_EDGE.fullmatch(ln)]
    assert rest == ["  classDef missing stroke:#c00,color:#c00"]


def test_mermaid(fx: Fixture) -> None:
    text = render(fx.graph, "mermaid")
    _check_mermaid(text, fx.graph)
    assert re.search(r"-\.->\|\"resolves not found\"\| missing_libgxnowhere_so_1\b", text)


def test_renderers_escape_hostile_names() -> None:
    """Quotes, backslashes, braces and clashing ids survive every format."""
    g = nx.MultiDiGraph()
    names = ['soname:a"b', "soname:a\\b", "soname:a{b}", "soname:a_b", "soname:a b<c>#&"]
    for name in names:
        g.add_node(name, kind="soname", name=name[len("soname:") :], label=name)
    g.add_node("missing:x", kind="missing", name="x", status="not found", label="x")
    for name in names:
        g.add_edge("missing:x", name, kind="needs", evidence='DT_"NEEDED"', roots="")
    g.add_edge(names[0], "missing:x", kind="resolves", how="", source="", status="not found")

    dot = render(g, "dot")
    _check_dot(dot, g)
    assert '"soname:a\\"b"' in dot and '"soname:a\\\\b"' in dot
    if shutil.which("dot") is not None:
        done = subprocess.run(["dot", "-Tsvg"], input=dot, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr

    mermaid = render(g, "mermaid")
    _check_mermaid(mermaid, g)
    assert "#quot;" in mermaid and "#lt;c#gt;#35;#amp;" in mermaid

    back = nx.parse_graphml(render(g, "graphml"))
    assert set(back) == set(g)
    data = json.loads(render(g, "json"))
    assert {n["id"] for n in data["nodes"]} == set(g)

    with pytest.raises(ValueError, match="unknown graph format"):
        render(g, "svg")
