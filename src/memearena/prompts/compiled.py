"""Prompt templates compiled once into their static text and their slots.

Jinja builds a render context (and one more per ``{% include %}``) for every prompt; most of
memearena's prompts are static text around a few inserted values, a condition or a loop. A
template made only of text, ``{{ name }}`` / ``{{ name.attr }}`` / ``{{ loop.index }}`` slots,
``{% if %}`` (a name, ``not``, ``is none``), ``{% for %}`` and ``{% include "const" %}`` is
compiled from the environment's own parse (so ``trim_blocks``, ``lstrip_blocks`` and the
trailing newline are the lexer's, as Jinja applies them) into one Python function; adjacent
text, included templates' text too, is joined once. Every inserted value goes through the
environment's ``finalize`` (the defence against untrusted text), exactly as Jinja's own
compiled code does. A construct outside that set makes the template Jinja's to render, and so
does any failure while rendering (a missing variable, a value of another shape): Jinja then
renders it, or raises its own error. Tests pin the two renderers to the same bytes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from jinja2 import Environment, nodes

__all__ = ["CompiledTemplate", "Unsupported", "compile_template"]


class Unsupported(Exception):
    """A template construct the compiled form does not cover (Jinja renders the template)."""


class _Loop:
    """What ``loop`` gives inside a ``{% for %}`` (the attributes Jinja's loop has of these)."""

    __slots__ = ("index0", "length")

    def __init__(self, index0: int, length: int) -> None:
        self.index0 = index0
        self.length = length

    @property
    def index(self) -> int:
        return self.index0 + 1

    @property
    def first(self) -> bool:
        return self.index0 == 0

    @property
    def last(self) -> bool:
        return self.index0 == self.length - 1


def _getattr(obj: Any, attr: str) -> Any:
    # As ``Environment.getattr``: the attribute, else the item (neither: Jinja renders).
    try:
        return getattr(obj, attr)
    except AttributeError:
        return obj[attr]


class _Compiler:
    """Python source of one template's render function: ``scope`` holds the variables (a
    missing one is a KeyError), loop variables are locals."""

    def __init__(self, env: Environment) -> None:
        self.env = env
        self.lines: list[str] = []
        self.text: list[str] = []  # static text not yet written out
        self.loops = 0

    def flush(self, depth: int) -> None:
        if self.text:
            self.lines.append("    " * depth + f"a({''.join(self.text)!r})")
            self.text = []

    def emit(self, depth: int, line: str) -> None:
        self.flush(depth)
        self.lines.append("    " * depth + line)

    def template(
        self, name: str, names: dict[str, str], depth: int, including: tuple[str, ...]
    ) -> None:
        if name in including:
            raise Unsupported(f"recursive include of {name}")
        loader = self.env.loader
        if loader is None:
            raise Unsupported("no loader")
        source = loader.get_source(self.env, name)[0]
        ast = self.env.parse(source, name)
        self.body(ast.body, names, depth, (*including, name))

    def body(
        self, body: list[nodes.Node], names: dict[str, str], depth: int, including: tuple[str, ...]
    ) -> None:
        for node in body:
            self.statement(node, names, depth, including)

    def block(
        self, body: list[nodes.Node], names: dict[str, str], depth: int, including: tuple[str, ...]
    ) -> None:
        before = len(self.lines)
        self.body(body, names, depth, including)
        self.flush(depth)
        if len(self.lines) == before:
            self.lines.append("    " * depth + "pass")

    def statement(
        self, node: nodes.Node, names: dict[str, str], depth: int, including: tuple[str, ...]
    ) -> None:
        if isinstance(node, nodes.Output):
            for n in node.nodes:
                if isinstance(n, nodes.TemplateData):
                    self.text.append(n.data)
                else:
                    self.emit(depth, f"a(str(fin({self.expr(n, names)})))")
        elif isinstance(node, nodes.If):
            self.emit(depth, f"if {self.expr(node.test, names)}:")
            self.block(node.body, names, depth + 1, including)
            for e in node.elif_:
                self.emit(depth, f"elif {self.expr(e.test, names)}:")
                self.block(e.body, names, depth + 1, including)
            if node.else_:
                self.emit(depth, "else:")
                self.block(node.else_, names, depth + 1, including)
        elif isinstance(node, nodes.For):
            if node.else_ or node.test is not None or node.recursive:
                raise Unsupported("for with else, a filter or recursion")
            if any(True for _ in node.find_all(nodes.Include)):
                raise Unsupported("include inside a loop")
            self.loops += 1
            k = self.loops
            inner = dict(names)
            target = node.target
            if isinstance(target, nodes.Name) and target.ctx == "store":
                inner[target.name] = f"v{k}_{target.name}"
                store = inner[target.name]
            elif isinstance(target, nodes.Tuple) and all(
                isinstance(i, nodes.Name) and i.ctx == "store" for i in target.items
            ):
                for i in target.items:
                    inner[i.name] = f"v{k}_{i.name}"  # type: ignore[attr-defined]
                store = "(" + "".join(inner[i.name] + ", " for i in target.items) + ")"  # type: ignore[attr-defined]
            else:
                raise Unsupported("loop target")
            uses_loop = any(n.name == "loop" for b in node.body for n in b.find_all(nodes.Name))
            self.emit(depth, f"items{k} = list({self.expr(node.iter, names)})")
            if uses_loop:
                inner["loop"] = f"loop{k}"
                self.emit(depth, f"for i{k}, {store} in enumerate(items{k}):")
                self.emit(depth + 1, f"loop{k} = Loop(i{k}, len(items{k}))")
            else:
                self.emit(depth, f"for {store} in items{k}:")
            self.block(node.body, inner, depth + 1, including)
        elif isinstance(node, nodes.Include):
            if not (
                isinstance(node.template, nodes.Const)
                and isinstance(node.template.value, str)
                and node.with_context
                and not node.ignore_missing
            ):
                raise Unsupported("include of a computed name")
            self.template(node.template.value, names, depth, including)
        else:
            raise Unsupported(type(node).__name__)

    def expr(self, node: nodes.Node, names: dict[str, str]) -> str:
        if isinstance(node, nodes.Name) and node.ctx == "load":
            return names.get(node.name) or f"scope[{node.name!r}]"
        if isinstance(node, nodes.Const) and type(node.value) in (str, int, float, bool):
            return repr(node.value)
        if isinstance(node, nodes.Const) and node.value is None:
            return "None"
        if isinstance(node, nodes.Getattr) and node.ctx == "load":
            return f"getattr_({self.expr(node.node, names)}, {node.attr!r})"
        if isinstance(node, nodes.Not):
            return f"(not {self.expr(node.node, names)})"
        if (
            isinstance(node, nodes.Test)
            and node.name == "none"
            and not node.args
            and not node.kwargs
            and node.dyn_args is None
            and node.dyn_kwargs is None
        ):
            return f"({self.expr(node.node, names)} is None)"
        raise Unsupported(type(node).__name__)


class CompiledTemplate:
    """One template as static text and slots; ``render(vars)`` gives Jinja's output (before
    memearena's ``strip``), or raises where Jinja would have to decide."""

    def __init__(self, source: str, fn: Callable[[dict[str, Any]], str]) -> None:
        self.source = source
        """The generated Python source (for reading, and the tests)."""
        self.render = fn


def compile_template(env: Environment, name: str) -> CompiledTemplate | None:
    """``name`` compiled against ``env`` (its loader, lexer settings and ``finalize``), or None
    when it uses a construct the compiled form does not cover."""
    c = _Compiler(env)
    try:
        c.template(name, {}, 1, ())
    except Unsupported:
        return None
    c.flush(1)
    source = "\n".join(
        [
            "def render(scope):",
            "    out = []",
            "    a = out.append",
            *c.lines,
            "    return ''.join(out)",
        ]
    )
    finalize = env.finalize if env.finalize is not None else (lambda v: v)
    space: dict[str, Any] = {"fin": finalize, "getattr_": _getattr, "Loop": _Loop}
    exec(compile(source, f"<compiled {name}>", "exec"), space)  # our own source, from the parse
    return CompiledTemplate(source, space["render"])
