"""Prompt templates compiled once into their static text and their slots.

Jinja builds a render context (and one more per ``{% include %}``) for every prompt; most of
memearena's prompts are static text around a few inserted values, a condition or a loop. A
template made only of text, ``{{ name }}`` / ``{{ name.attr }}`` / ``{{ loop.index }}`` slots,
``{% if %}`` (a name, ``not``, ``is none``), ``{% for %}`` and ``{% include "const" %}`` is
compiled from the environment's own parse (so ``trim_blocks``, ``lstrip_blocks`` and the
trailing newline are the lexer's, as Jinja applies them) into a list of operations; adjacent
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

Getter = Callable[[dict[str, Any]], Any]

_TEXT, _VALUE, _IF, _FOR = 0, 1, 2, 3


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


def _name(name: str) -> Getter:
    return lambda scope: scope[name]  # KeyError: Jinja's StrictUndefined decides


def _getattr(inner: Getter, attr: str) -> Getter:
    def get(scope: dict[str, Any]) -> Any:
        obj = inner(scope)
        # As ``Environment.getattr``: the attribute, else the item (none: Jinja renders).
        try:
            return getattr(obj, attr)
        except AttributeError:
            return obj[attr]

    return get


def _expr(node: nodes.Node) -> Getter:
    if isinstance(node, nodes.Name) and node.ctx == "load":
        return _name(node.name)
    if isinstance(node, nodes.Const):
        value = node.value
        return lambda scope: value
    if isinstance(node, nodes.Getattr) and node.ctx == "load":
        return _getattr(_expr(node.node), node.attr)
    if isinstance(node, nodes.Not):
        inner = _expr(node.node)
        return lambda scope: not inner(scope)
    if (
        isinstance(node, nodes.Test)
        and node.name == "none"
        and not node.args
        and not node.kwargs
        and node.dyn_args is None
        and node.dyn_kwargs is None
    ):
        inner = _expr(node.node)
        return lambda scope: inner(scope) is None
    raise Unsupported(type(node).__name__)


def _target(node: nodes.Node) -> str | tuple[str, ...]:
    if isinstance(node, nodes.Name) and node.ctx == "store":
        return node.name
    if isinstance(node, nodes.Tuple) and node.ctx == "store":
        names = []
        for item in node.items:
            if not (isinstance(item, nodes.Name) and item.ctx == "store"):
                raise Unsupported("nested loop target")
            names.append(item.name)
        return tuple(names)
    raise Unsupported(type(node).__name__)


class _Compiler:
    def __init__(self, env: Environment) -> None:
        self.env = env

    def template(self, name: str, including: tuple[str, ...] = ()) -> list[tuple[Any, ...]]:
        if name in including:
            raise Unsupported(f"recursive include of {name}")
        loader = self.env.loader
        if loader is None:
            raise Unsupported("no loader")
        source = loader.get_source(self.env, name)[0]
        return self.body(self.env.parse(source, name), (*including, name))

    def body(self, node: nodes.Node, including: tuple[str, ...]) -> list[tuple[Any, ...]]:
        ops: list[tuple[Any, ...]] = []
        for child in node.body if isinstance(node, nodes.Template) else node:
            ops.extend(self.statement(child, including))
        return _joined(ops)

    def statement(self, node: nodes.Node, including: tuple[str, ...]) -> list[tuple[Any, ...]]:
        if isinstance(node, nodes.Output):
            return [
                (_TEXT, n.data) if isinstance(n, nodes.TemplateData) else (_VALUE, _expr(n))
                for n in node.nodes
            ]
        if isinstance(node, nodes.If):
            branches = [(_expr(node.test), self.body(node.body, including))]
            branches += [(_expr(e.test), self.body(e.body, including)) for e in node.elif_]
            return [(_IF, branches, self.body(node.else_, including))]
        if isinstance(node, nodes.For):
            if node.else_ or node.test is not None or node.recursive:
                raise Unsupported("for with else, a filter or recursion")
            return [(_FOR, _target(node.target), _expr(node.iter), self.body(node.body, including))]
        if isinstance(node, nodes.Include):
            if not (
                isinstance(node.template, nodes.Const)
                and isinstance(node.template.value, str)
                and node.with_context
                and not node.ignore_missing
            ):
                raise Unsupported("include of a computed name")
            return self.template(node.template.value, including)
        raise Unsupported(type(node).__name__)


def _joined(ops: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    out: list[tuple[Any, ...]] = []
    for op in ops:
        if op[0] == _TEXT and out and out[-1][0] == _TEXT:
            out[-1] = (_TEXT, out[-1][1] + op[1])
        elif op[0] != _TEXT or op[1]:
            out.append(op)
    return out


class CompiledTemplate:
    """One template as static text and slots; ``render(vars)`` gives Jinja's output (before
    memearena's ``strip``), or raises where Jinja would have to decide."""

    def __init__(self, ops: list[tuple[Any, ...]], finalize: Callable[[Any], Any]) -> None:
        self._ops = ops
        self._finalize = finalize

    def render(self, scope: dict[str, Any]) -> str:
        out: list[str] = []
        self._run(self._ops, scope, out)
        return "".join(out)

    def _run(self, ops: list[tuple[Any, ...]], scope: dict[str, Any], out: list[str]) -> None:
        finalize = self._finalize
        for op in ops:
            kind = op[0]
            if kind == _TEXT:
                out.append(op[1])
            elif kind == _VALUE:
                out.append(str(finalize(op[1](scope))))
            elif kind == _IF:
                for test, body in op[1]:
                    if test(scope):
                        self._run(body, scope, out)
                        break
                else:
                    self._run(op[2], scope, out)
            else:
                target, items = op[1], list(op[2](scope))
                for i, item in enumerate(items):
                    inner = dict(scope)
                    if isinstance(target, str):
                        inner[target] = item
                    else:
                        values = tuple(item)
                        if len(values) != len(target):
                            raise ValueError("loop target does not match the item")
                        inner.update(zip(target, values, strict=True))
                    inner["loop"] = _Loop(i, len(items))
                    self._run(op[3], inner, out)


def compile_template(env: Environment, name: str) -> CompiledTemplate | None:
    """``name`` compiled against ``env`` (its loader, lexer settings and ``finalize``), or None
    when it uses a construct the compiled form does not cover."""
    try:
        ops = _Compiler(env).template(name)
    except Unsupported:
        return None
    finalize = env.finalize if env.finalize is not None else (lambda v: v)
    return CompiledTemplate(ops, finalize)
