"""GSM8K: grade-school math word problems, the gold number after ``####``, numeric scoring."""

from __future__ import annotations

import ast
import operator
import re
from decimal import Decimal, InvalidOperation
from fractions import Fraction
from pathlib import Path
from typing import Any

from langchain_core.tools import BaseTool, tool

from genmem.envs.base import Environment, EnvTools, Outcome, Task
from genmem.envs.bundled import DATA_DIR, read_gsm8k

__all__ = [
    "GSM8K_TEST",
    "GSM8KEnvironment",
    "calculate",
    "calculator_tool",
    "extract_number",
    "gold_number",
    "gsm8k_queries",
    "score_gsm8k",
]

GSM8K_TEST = DATA_DIR / "gsm8k" / "test.jsonl"
"""GSM8K test split, 1,319 problems (MIT, see data/gsm8k/LICENSE)."""

_NUMBER = re.compile(r"-?\$?\s?\d[\d,]*(?:\.\d+)?")


def gold_number(answer: str) -> str:
    """The gold number of a GSM8K reference solution (what follows ``####``), commas removed."""
    if "####" not in answer:
        raise ValueError("a GSM8K answer ends with '#### <number>'; this one has no '####'")
    return answer.rsplit("####", 1)[1].strip().replace(",", "")


def _to_decimal(text: str) -> Decimal | None:
    cleaned = text.replace(",", "").replace("$", "").replace(" ", "").rstrip(".")
    try:
        return Decimal(cleaned)
    except InvalidOperation:
        return None


def extract_number(text: str | None) -> str | None:
    """The number an answer states: the last number in it (commas and ``$`` removed)."""
    if not text:
        return None
    found = _NUMBER.findall(text)
    if not found:
        return None
    value = _to_decimal(found[-1])
    return None if value is None else format(value.normalize(), "f")


def score_gsm8k(answer: str | None, gold: Any) -> float:
    """1.0 when the answer's number equals the gold number (numerically), else 0.0."""
    predicted = extract_number(answer)
    target = _to_decimal(str(gold))
    if predicted is None or target is None:
        return 0.0
    return 1.0 if Decimal(predicted) == target else 0.0


def gsm8k_queries(
    path: Path = GSM8K_TEST, limit: int | None = None, offset: int = 0
) -> list[dict[str, Any]]:
    """GSM8K problems as queries ``{"id", "query", "reference"}`` (reference = gold number)."""
    rows = read_gsm8k(path, limit=None if limit is None else offset + limit)[offset:]
    return [
        {
            "id": f"{path.stem}-{offset + i}",
            "query": r["question"],
            "reference": gold_number(r["answer"]),
        }
        for i, r in enumerate(rows)
    ]


_OPS: dict[type, Any] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
    ast.USub: operator.neg,
    ast.UAdd: operator.pos,
}


def calculate(expression: str) -> str:
    """Evaluate an arithmetic expression (numbers, + - * / // % **, parentheses) exactly."""

    def value(node: ast.AST) -> Fraction:
        if isinstance(node, ast.Constant) and type(node.value) in (int, float):
            return Fraction(str(node.value))
        if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
            left, right = value(node.left), value(node.right)
            if isinstance(node.op, ast.Pow) and (right.denominator != 1 or abs(right) > 64):
                raise ValueError("powers must be whole numbers up to 64")
            if isinstance(node.op, ast.Div | ast.FloorDiv | ast.Mod) and right == 0:
                raise ValueError("division by zero")
            result = _OPS[type(node.op)](left, right)
            return Fraction(result)
        if isinstance(node, ast.UnaryOp) and type(node.op) in _OPS:
            return _OPS[type(node.op)](value(node.operand))
        raise ValueError(f"only numbers and + - * / // % ** are allowed, not {ast.dump(node)[:40]}")

    text = (expression or "").replace(",", "").replace("$", "").replace("×", "*").strip()
    if not text or len(text) > 200:
        raise ValueError("give an arithmetic expression of 1 to 200 characters")
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError:
        raise ValueError(f"not an arithmetic expression: {expression!r}") from None
    result = value(tree.body)
    if result.denominator == 1:
        return str(result.numerator)
    exact = Decimal(result.numerator) / Decimal(result.denominator)
    return format(exact.quantize(Decimal("1e-10")).normalize(), "f")


def calculator_tool() -> BaseTool:
    """A ``calculator`` tool for the solver; a bad expression comes back as the tool's result."""

    @tool("calculator")
    def calculator(expression: str) -> str:
        """Evaluate an arithmetic expression such as '(48 / 2) + 48' and return the number."""
        try:
            return calculate(expression)
        except ValueError as exc:
            return f"error: {exc}"

    return calculator


class GSM8KEnvironment(Environment):
    """GSM8K problems: a calculator for the solver, numeric scoring against the gold number."""

    name = "gsm8k"
    metric_names = ("accuracy",)

    def __init__(
        self, path: Path = GSM8K_TEST, *, calculator: bool = True, name: str | None = None
    ) -> None:
        self.path = Path(path)
        self.calculator = calculator
        self.name = name or ("gsm8k" if self.path == GSM8K_TEST else self.path.stem)
        self._queries = gsm8k_queries(self.path)  # a bad line fails here, named path:line

    def tasks(self, limit: int | None = None) -> list[Task]:
        """The problems in file order, the gold number as reference."""
        return [
            Task(id=q["id"], query=q["query"], reference=q["reference"])
            for q in self._queries[:limit]
        ]

    def tools(self) -> EnvTools:
        """The calculator, for the solver (when enabled)."""
        return EnvTools(solver=(calculator_tool(),) if self.calculator else ())

    def score(self, task: Task, answer: str | None) -> Outcome:
        """1 when the answer's last number equals the gold number."""
        value = score_gsm8k(answer, task.reference)
        return Outcome(score=value, success=value == 1.0, metrics={"accuracy": value})
