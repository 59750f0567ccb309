"""``CREATE FUNCTION`` and the functions given to :func:`flowc.compile`: checked up front.

Functions are read before any other statement, so a query may call a function declared
below it (a CREATE FUNCTION changes no stream; its place in the file does not matter, as
a view's does). What is checked here, each at its span:

- E0280: the name (a plain identifier, not one of Spark's functions, declared once), the
  signature (present: flowc checks every call against it; Flink's untyped form gets a
  hint) and its types (:func:`flowc.sql.python_functions.signature_problem`);
- E0281: a LANGUAGE other than python;
- E0282: a target that is not ``module:function``; where the job runs on Spark
  (:func:`check_function_sources`), a module flowc cannot find in the job's folder or the
  installed packages, or a module with no such top-level function (read, never run);
- E0956: in an untrusted program, a module function the embedding did not allow.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from sqlglot import exp
from sqlglot.errors import SqlglotError

from flowc import ast
from flowc.diagnostics import Reporter
from flowc.errorcodes import Code
from flowc.program import Column, FunctionDef, Program
from flowc.spans import Span
from flowc.sql.python_functions import (
    FUNCTION_NAME,
    PythonFunction,
    attribute_problem,
    find_module,
    leads_out,
    runs_on_arrow,
    signature_problem,
    split_target,
)
from flowc.sql.spark_functions import FUNCTIONS
from flowc.sql.sql_parsing import parse_sql_uncached
from flowc.sql.sqltypes import normalize_type
from flowc.trust import policy as trust

__all__ = ["check_function_sources", "declare_functions"]


def declare_functions(
    tree: ast.Program,
    given: Sequence[PythonFunction],
    policy: trust.TrustPolicy,
    reporter: Reporter,
) -> tuple[dict[str, FunctionDef], frozenset[str]]:
    """Every function the program may call, by lower-case name (Spark's function names
    are case-insensitive), and the names of those whose declaration has errors (their
    calls are not reported again as unknown functions)."""
    functions: dict[str, FunctionDef] = {}
    start = Span(file=tree.file, line=1, column=1, end_line=1, end_column=1)
    for function in given:
        key = function.name.lower()
        if key in functions or _builtin(key):
            raise ValueError(
                f"function {function.name!r} is given twice or is one of Spark's functions"
            )
        params = tuple(Column(name, normalize_type(type_)) for name, type_ in function.params)
        returns = normalize_type(function.returns)
        functions[key] = FunctionDef(
            name=key,
            params=params,
            returns=returns,
            module=None,
            attribute=None,
            span=start,
            arrow=runs_on_arrow([*(c.type for c in params), returns]),
        )
    broken: set[str] = set()
    for statement in tree.statements:
        if isinstance(statement, ast.CreateFunction):
            declared = _declare(statement, functions, policy, reporter)
            if declared is not None:
                functions[declared.name] = declared
            elif statement.name.value.lower() not in functions:
                broken.add(statement.name.value.lower())
    return functions, frozenset(broken)


def _declare(
    node: ast.CreateFunction,
    functions: dict[str, FunctionDef],
    policy: trust.TrustPolicy,
    reporter: Reporter,
) -> FunctionDef | None:
    name = node.name.value
    key = name.lower()
    ok = True
    if not FUNCTION_NAME.fullmatch(name):
        reporter.error(
            Code.E0280,
            f"function name '{name}' is not a plain identifier",
            node.name.span,
            help="name it with letters, digits and '_' (Spark registers it by that name)",
        )
        ok = False
    elif key in functions:
        first = functions[key]
        where = "given to flowc.compile" if first.embedded else f"declared at {first.span}"
        reporter.error(
            Code.E0280,
            f"function '{name}' is declared twice",
            node.name.span,
            help=f"it is already {where}; rename one",
        )
        ok = False
    elif _builtin(key):
        reporter.error(
            Code.E0280,
            f"'{name}' is one of Spark's functions",
            node.name.span,
            help=f"name yours differently (e.g. my_{key}): Spark would call one or the other",
        )
        ok = False
    language = node.language.value.lower() if node.language is not None else None
    if language != "python":
        reporter.error(
            Code.E0281,
            f"functions in {language or 'Java (Flink default)'} cannot run on Spark here",
            node.language.span if node.language is not None else node.target.span,
            help="write it in Python: CREATE FUNCTION f(x BIGINT) RETURNS STRING "
            "LANGUAGE python AS 'module:function'",
        )
        ok = False
    if node.signature is None:
        reporter.error(
            Code.E0280,
            f"function '{name}' declares no types",
            node.name.span,
            help=f"flowc checks every call: declare them, as in CREATE FUNCTION {name}"
            "(x BIGINT, s STRING) RETURNS STRING LANGUAGE python AS 'module:function'",
        )
        return None
    params = _params(node.signature, reporter)
    returns = _type(node.signature.returns, reporter)
    if language != "python":
        return None  # a Java class name: nothing of it to look for
    target = _target(node, policy, reporter)
    if not ok or params is None or returns is None or target is None:
        return None
    module, attribute = target
    return FunctionDef(
        name=key,
        params=params,
        returns=returns,
        module=module,
        attribute=attribute,
        span=node.span,
        arrow=runs_on_arrow([*(c.type for c in params), returns]),
        target_span=node.target.span,
    )


def check_function_sources(
    program: Program, base: str, reporter: Reporter, trusted: bool = True
) -> None:
    """E0282 for a module not in the job's folder ``base`` nor installed, or a module of
    the job's folder without the function at its top level (read, never run). Only where
    the job runs on Spark (check, run): a plan needs no module, and a .flow file compiled
    away from its folder still has its plans. Untrusted, installed modules come first (no
    file of the job's folder shadows one), and a module file of the job's folder that
    leads out of it through a symbolic link is E0960 (it is not read)."""
    for function in program.functions:
        if function.module is None or function.attribute is None:
            continue
        span = function.target_span or function.span
        found = find_module(function.module, base, installed_first=not trusted)
        if isinstance(found, Path) and not trusted and leads_out(found, base):
            reporter.error(
                Code.E0960,
                f"the file of Python module '{function.module}' leads out of the base "
                "directory through a symbolic link",
                span,
                help="put the module's file itself in the base directory, or install it",
            )
            continue
        if found is False:
            reporter.error(
                Code.E0282,
                f"Python module '{function.module}' is not in the job's folder nor installed",
                span,
                help=f"put {function.module.replace('.', '/')}.py beside the .flow file "
                f"({_shown(base)}), or install the package that has it",
            )
        elif isinstance(found, Path):
            problem = attribute_problem(found, function.attribute)
            if problem is not None:
                reporter.error(
                    Code.E0282,
                    f"function '{function.attribute}' not found in module '{function.module}'",
                    span,
                    help=problem,
                )


def _params(signature: ast.FunctionSignature, reporter: Reporter) -> tuple[Column, ...] | None:
    params: list[Column] = []
    seen: set[str] = set()
    ok = True
    for param in signature.params:
        if param.name.value in seen:
            reporter.error(
                Code.E0280,
                f"parameter '{param.name.value}' is declared twice",
                param.name.span,
                help="give each parameter its own name",
            )
            ok = False
        seen.add(param.name.value)
        type_text = _type(param.type, reporter)
        if type_text is None:
            ok = False
        else:
            params.append(Column(param.name.value, type_text))
    return tuple(params) if ok else None


def _type(ref: ast.TypeRef, reporter: Reporter) -> str | None:
    problem = signature_problem(ref.text)
    if problem is not None:
        reporter.error(
            Code.E0280,
            problem if "not supported" in problem else f"unknown type '{ref.text}'",
            ref.span,
            help="Python values are checked against the declared types at run time",
        )
        return None
    return normalize_type(ref.text)


def _target(
    node: ast.CreateFunction, policy: trust.TrustPolicy, reporter: Reporter
) -> tuple[str, str] | None:
    text = str(node.target.python)
    span = node.target.span
    target = split_target(text)
    if target is None:
        reporter.error(
            Code.E0282,
            f"'{text}' does not name a Python function",
            span,
            help="write 'module:function' (a module of the job's folder or an installed one)",
        )
        return None
    module, attribute = target
    if not policy.trusted and f"{module}:{attribute}" not in policy.functions:
        reporter.error(
            Code.E0956,
            f"function '{module}:{attribute}' is not allowed in an untrusted program",
            span,
            help="an untrusted program runs only the Python functions its platform allows "
            "(flowc.compile(..., allowed_functions=...)) or gives (functions=...)",
        )
        return module, attribute  # declared all the same: its calls add no follow-on errors
    return module, attribute


def _builtin(name: str) -> bool:
    """One of Spark's functions, or a name sqlglot reads as a function of its own (which
    it would write back under another name)."""
    if name in FUNCTIONS:
        return True
    try:
        tree = parse_sql_uncached(f"{name}(x)", "spark")
    except SqlglotError:
        return True
    return not isinstance(tree, exp.Anonymous)


def _shown(base: str) -> str:
    return base if len(base) < 60 else "..." + base[-57:]
