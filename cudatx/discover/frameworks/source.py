"""What the framework readers share: the source as `ast` reads it (never run), and a small
interpreter of constant expressions for the functions a reader must evaluate on known
arguments (onnxruntime's `_get_nvidia_dll_paths`)."""

from __future__ import annotations

import ast
from collections.abc import Callable

from cudatx.reading import MAX_METADATA, read_bounded


class Shape(Exception):
    """The source does not have the shape a reader knows."""


def functions(tree: ast.Module) -> dict[str, ast.FunctionDef]:
    return {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}


def string(node: ast.expr) -> str:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    raise Shape(f"not a string constant: {ast.unparse(node)}")


def strings(node: ast.expr) -> tuple[str, ...]:
    if isinstance(node, ast.Tuple | ast.List):
        return tuple(string(e) for e in node.elts)
    raise Shape(f"not a tuple of strings: {ast.unparse(node)}")


def assignment(node: ast.stmt) -> tuple[ast.expr, ast.expr] | None:
    """(target, value) of a one-target assignment, annotated or not; None for any other
    statement (an annotation without a value included)."""
    if isinstance(node, ast.Assign) and len(node.targets) == 1:
        return node.targets[0], node.value
    if isinstance(node, ast.AnnAssign) and node.value is not None:
        return node.target, node.value
    return None


def constant(path: str, name: str) -> str | None:
    """The string the module-level `name` of the Python file at `path` is last set to, read
    without importing it; None where the file cannot be read or parsed, or that value is no
    string constant (torch/version.py's `cuda = None` in a CPU build)."""
    try:
        # bounded, and only a regular file: a FIFO there must not hold the scan
        tree = ast.parse(read_bounded(path, MAX_METADATA))
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
        if any(isinstance(t, ast.Name) and t.id == name for t in targets):
            found = assigned.value if isinstance(assigned, ast.Constant) else None
            value = found if isinstance(found, str) else None
    return value


def body(func: ast.FunctionDef) -> list[ast.stmt]:
    """The statements of `func` after its docstring."""
    statements = func.body
    first = statements[0] if statements else None
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
        return statements[1:]
    return statements


class Eval:
    """Constant expressions of one module, with its functions called as written.

    Enough of Python to run `_get_nvidia_dll_paths` and its helpers on known arguments:
    constants, names, f-strings, tuples and lists, `and`/`or`/`not`, comparisons, `x if c
    else y`, subscripts, `int()`, `str.split/isdigit/startswith`, and calls of the module's
    own functions (assignments, `if`, `return`). Anything else is a Shape: the framework is
    reported as not read.
    """

    def __init__(self, functions: dict[str, ast.FunctionDef], names: dict[str, object]):
        self.functions = functions
        self.names = names
        self.depth = 0

    def call(self, name: str, args: list[object], kwargs: dict[str, object]) -> object:
        func = self.functions.get(name)
        if func is None or self.depth > 8:
            raise Shape(f"a call cudatx cannot follow: {name}")
        params = [a.arg for a in func.args.args]
        local: dict[str, object] = dict(zip(params, args, strict=False))
        defaults = func.args.defaults
        for param, default in zip(params[len(params) - len(defaults) :], defaults, strict=True):
            local.setdefault(param, self.expr(default, {}))
        local.update(kwargs)
        if set(local) - set(params):
            raise Shape(f"{name} called with unknown arguments")
        self.depth += 1
        try:
            done, value = self.run(body(func), local)
        finally:
            self.depth -= 1
        return value if done else None

    def run(self, body: list[ast.stmt], local: dict[str, object]) -> tuple[bool, object]:
        for node in body:
            if isinstance(node, ast.Return):
                return True, None if node.value is None else self.expr(node.value, local)
            if isinstance(node, ast.Assign) and len(node.targets) == 1:
                target = node.targets[0]
                if not isinstance(target, ast.Name):
                    raise Shape("an assignment to something other than a name")
                local[target.id] = self.expr(node.value, local)
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                if node.value is not None:
                    local[node.target.id] = self.expr(node.value, local)
            elif isinstance(node, ast.If):
                branch = node.body if self.expr(node.test, local) else node.orelse
                done, value = self.run(branch, local)
                if done:
                    return done, value
            elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
                continue  # a docstring or a bare constant
            else:
                raise Shape(f"a statement cudatx does not evaluate: {type(node).__name__}")
        return False, None

    def expr(self, node: ast.expr, local: dict[str, object]) -> object:
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.Name):
            if node.id in local:
                return local[node.id]
            if node.id in self.names:
                return self.names[node.id]
            raise Shape(f"an unknown name: {node.id}")
        if isinstance(node, ast.JoinedStr):
            parts = []
            for value in node.values:
                if isinstance(value, ast.FormattedValue) and value.format_spec is None:
                    parts.append(str(self.expr(value.value, local)))
                elif isinstance(value, ast.Constant):
                    parts.append(str(value.value))
                else:
                    raise Shape("an f-string with a format")
            return "".join(parts)
        if isinstance(node, ast.Tuple):
            return tuple(self.expr(e, local) for e in node.elts)
        if isinstance(node, ast.List):
            return [self.expr(e, local) for e in node.elts]
        if isinstance(node, ast.BoolOp):
            is_and = isinstance(node.op, ast.And)
            result: object = is_and
            for value in node.values:
                result = self.expr(value, local)
                if bool(result) is not is_and:
                    return result
            return result
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            return not self.expr(node.operand, local)
        if isinstance(node, ast.IfExp):
            chosen = node.body if self.expr(node.test, local) else node.orelse
            return self.expr(chosen, local)
        if isinstance(node, ast.Compare) and len(node.ops) == 1:
            return compare(
                node.ops[0], self.expr(node.left, local), self.expr(node.comparators[0], local)
            )
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            left, right = self.expr(node.left, local), self.expr(node.right, local)
            if isinstance(left, list) and isinstance(right, list):
                return left + right
            if isinstance(left, str) and isinstance(right, str):
                return left + right
            raise Shape("an addition of other than lists or strings")
        if isinstance(node, ast.Subscript):
            seq = self.expr(node.value, local)
            index = self.expr(node.slice, local)
            if isinstance(seq, tuple | list | str) and isinstance(index, int):
                return seq[index]
            raise Shape("a subscript cudatx does not evaluate")
        if isinstance(node, ast.Call):
            return self._call(node, local)
        raise Shape(f"an expression cudatx does not evaluate: {type(node).__name__}")

    def _call(self, node: ast.Call, local: dict[str, object]) -> object:
        args = [self.expr(a, local) for a in node.args]
        kwargs = {k.arg: self.expr(k.value, local) for k in node.keywords if k.arg}
        if len(kwargs) != len(node.keywords):
            raise Shape("a call with **kwargs")
        func = node.func
        if isinstance(func, ast.Name):
            if func.id == "int" and len(args) == 1 and isinstance(args[0], str | int):
                try:
                    return int(args[0])
                except ValueError as exc:
                    raise Shape(f"int() of {args[0]!r}") from exc
            return self.call(func.id, args, kwargs)
        if isinstance(func, ast.Attribute):
            owner = self.expr(func.value, local)
            if isinstance(owner, str) and func.attr in ("split", "isdigit", "startswith"):
                method: Callable[..., object] = getattr(owner, func.attr)
                return method(*args, **kwargs)
        raise Shape(f"a call cudatx does not evaluate: {ast.unparse(node)}")


def compare(op: ast.cmpop, left: object, right: object) -> bool:
    if isinstance(op, ast.Eq):
        return left == right
    if isinstance(op, ast.NotEq):
        return left != right
    if isinstance(op, ast.In | ast.NotIn) and isinstance(right, str | tuple | list):
        found = left in right
        return found if isinstance(op, ast.In) else not found
    if isinstance(left, int) and isinstance(right, int):
        if isinstance(op, ast.GtE):
            return left >= right
        if isinstance(op, ast.Gt):
            return left > right
        if isinstance(op, ast.Lt):
            return left < right
        if isinstance(op, ast.LtE):
            return left <= right
    raise Shape("a comparison cudatx does not evaluate")


def module_string(text: str, name: str) -> str | None:
    for node in ast.parse(text).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
            if isinstance(target, ast.Name) and target.id == name:
                return string(node.value)
    return None
