"""Python functions a program calls: their types, and what each call may pass and return.

A function is declared in the program (``CREATE FUNCTION f(x BIGINT) RETURNS STRING
LANGUAGE python AS 'module:function'``) or given to :func:`flowc.compile` as a
:class:`PythonFunction`. Either way flowc knows its types, so every call is checked
(E0283, E0284) and every value the function returns is checked at run time against the
declared type: a PySpark UDF that returns an ``int`` for a DOUBLE column writes NULL
without a word, which flowc turns into an error (E0805) instead.

The types a signature may use are Spark's scalar types and arrays and maps of them
(:func:`signature_problem`); a signature of plain scalars only runs as an Arrow-optimized
UDF (:func:`runs_on_arrow`). This module never imports pyspark.
"""

from __future__ import annotations

import ast as python_ast
import importlib.util
import os
import re
import sys
import threading
from collections.abc import Callable
from importlib.machinery import ModuleSpec, PathFinder
from pathlib import Path

from flowc.fast_dataclass import dataclass
from flowc.sql.sqltypes import TypeSyntaxError, normalize_type

__all__ = [
    "PythonFunction",
    "accepts",
    "attribute_problem",
    "find_module",
    "result_kind",
    "runs_on_arrow",
    "signature_problem",
    "split_target",
]

#: A function's name: Spark registers it under this name (plus a call's number).
FUNCTION_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_MODULE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*")

_INTEGERS = {"TINYINT": 8, "SMALLINT": 16, "INT": 32, "BIGINT": 64}
#: Scalar types and the Python values a function returns for them.
_SCALARS = {
    "BOOLEAN": "bool",
    **{name: f"int{bits}" for name, bits in _INTEGERS.items()},
    "FLOAT": "float",
    "DOUBLE": "float",
    "STRING": "str",
    "BINARY": "bytes",
    "DATE": "date",
    "TIMESTAMP": "timestamp",
}
#: Scalars Spark's Arrow-optimized Python UDFs pass and return exactly as pickled ones do.
_ARROW_SCALARS = frozenset({"BOOLEAN", *_INTEGERS, "FLOAT", "DOUBLE", "STRING"})
#: Numeric widenings a call may make: the argument's type to the parameter's (Spark's
#: implicit casts that lose nothing).
_NUMERIC_ORDER = ("TINYINT", "SMALLINT", "INT", "BIGINT", "FLOAT", "DOUBLE")


@dataclass(frozen=True, slots=True)
class PythonFunction:
    """A Python callable a platform gives :func:`flowc.compile`, with its Spark SQL types.

    ``params`` are (name, type) pairs and ``returns`` a type, as a CREATE FUNCTION writes
    them (``("price", "DECIMAL(10, 2)")``). The program calls it by ``name`` without
    declaring it. A malformed one raises ValueError when it is made: it is the platform's
    code, not the user's program."""

    name: str
    call: Callable[..., object]
    params: tuple[tuple[str, str], ...]
    returns: str

    def __post_init__(self) -> None:
        if not FUNCTION_NAME.fullmatch(self.name):
            raise ValueError(f"function name {self.name!r} is not a plain identifier")
        if not callable(self.call):
            raise ValueError(f"function {self.name!r}: {self.call!r} is not callable")
        for where, type_text in [*((f"parameter {p!r}", t) for p, t in self.params),
                                 ("return type", self.returns)]:  # fmt: skip
            problem = signature_problem(type_text)
            if problem is not None:
                raise ValueError(f"function {self.name!r}, {where}: {problem}")


def signature_problem(type_text: str) -> str | None:
    """Why a type cannot be in a function's signature, or None: a scalar, or an ARRAY or
    MAP of scalars (a STRUCT's Python value, a Row, is not checked field by field)."""
    try:
        normalized = normalize_type(type_text)
    except TypeSyntaxError as error:
        return f"'{type_text}' is not a Spark SQL type ({error})"
    if _scalar(normalized):
        return None
    inner = _parts(normalized)
    if inner is not None and all(_scalar(part) for part in inner):
        return None
    return (
        f"{normalized} is not supported in a function's signature: use scalar types "
        "(BIGINT, DOUBLE, DECIMAL(p, s), STRING, BOOLEAN, DATE, TIMESTAMP, BINARY, ...) "
        "or ARRAY/MAP of them"
    )


def runs_on_arrow(types: list[str]) -> bool:
    return all(normalize_type(t) in _ARROW_SCALARS for t in types)


def accepts(param: str, argument: str) -> bool:
    """A call may pass a value of type ``argument`` for ``param``: the same type, a
    numeric widening, DATE for TIMESTAMP, NULL, or a type flowc cannot tell (cast)."""
    if argument in ("UNKNOWN", "VOID", "NULL") or param == argument:
        return True
    if param in _NUMERIC_ORDER and argument in _NUMERIC_ORDER:
        return _NUMERIC_ORDER.index(argument) <= _NUMERIC_ORDER.index(param)
    if param == "DOUBLE" and argument.startswith("DECIMAL"):
        return True
    if param.startswith("DECIMAL") and argument in _INTEGERS:
        return True
    return param == "TIMESTAMP" and argument == "DATE"


def result_kind(type_text: str) -> str:
    """What the generated program checks a returned value against: ``int64``, ``str``,
    ``decimal:10:2``, ``array:str``, ``map:str:float``..."""
    normalized = normalize_type(type_text)
    if normalized.startswith("DECIMAL"):
        precision, scale = _decimal(normalized)
        return f"decimal:{precision}:{scale}"
    if normalized in _SCALARS:
        return _SCALARS[normalized]
    parts = _parts(normalized)
    assert parts is not None, normalized  # signature_problem refused everything else
    kind = "array" if normalized.startswith("ARRAY") else "map"
    return ":".join([kind, *(result_kind(part) for part in parts)])


def split_target(text: str) -> tuple[str, str] | None:
    """``module:function`` (flowc's) or ``module.function`` (Flink's): (module, attribute),
    or None when it is neither."""
    module, colon, attribute = text.partition(":")
    if not colon:
        module, _, attribute = text.rpartition(".")
    if not _MODULE.fullmatch(module) or not FUNCTION_NAME.fullmatch(attribute):
        return None
    return module, attribute


def find_module(module: str, base: str, installed_first: bool = False) -> Path | bool | None:
    """Where ``module`` is, without running any of it: its source file in the job's folder
    ``base`` (``a/b.py`` or ``a/b/__init__.py``), else an installed top-level module's
    source (None for one with no Python source: compiled, built in). False: nowhere.

    ``installed_first`` (untrusted programs): an installed module is found first, and the
    job's folder is searched only for a module that is not installed, so no file there
    shadows an installed module the platform allowed (the generated program loads them
    the same way, :func:`flowc.spark.generated_runtime.load_functions`).
    """
    parts = module.split(".")
    if installed_first:
        spec = installed_spec(parts[0], base)
        if spec is not None:
            return _installed_source(spec, parts)
    folder = Path(base).joinpath(*parts[:-1])
    for candidate in (folder / f"{parts[-1]}.py", folder / parts[-1] / "__init__.py"):
        if candidate.is_file():
            return candidate
    own = (Path(base) / parts[0]).is_dir() or (Path(base) / f"{parts[0]}.py").is_file()
    if installed_first or own:
        return False  # the job's own module or package, without that submodule
    try:
        spec = importlib.util.find_spec(parts[0])
    except (ImportError, ValueError):
        return False
    if spec is None:
        return False
    return _installed_source(spec, parts)


def _installed_source(spec: ModuleSpec, parts: list[str]) -> Path | None:
    if len(parts) > 1:
        return None  # a submodule of an installed package: importing it would run code
    origin = spec.origin
    return Path(origin) if origin and origin.endswith(".py") else None


def installed_spec(name: str, base: str) -> ModuleSpec | None:
    """The top-level module ``name`` as installed: found by Python's finders on
    ``sys.path`` without the job's folder ``base`` (nor any entry inside it, such as the
    current folder ``''`` when that is in it), and not from a file inside ``base``; modules
    already imported are not asked (one could come from an earlier job's folder), and
    ``sys.path`` is left as it is (compiles run in threads)."""
    root = os.path.realpath(base)
    path = [entry for entry in sys.path if not _inside(entry or os.getcwd(), root)]
    for finder in sys.meta_path:
        try:
            if finder is PathFinder:
                spec = PathFinder.find_spec(name, path)
            elif hasattr(finder, "find_spec"):
                spec = finder.find_spec(name, None)
            else:
                continue
        except (ImportError, ValueError):
            continue
        if spec is not None:
            origin = spec.origin
            if origin and os.path.isabs(origin) and _inside(origin, root):
                return None
            return spec
    return None


def leads_out(source: Path, base: str) -> bool:
    """Whether a module file found in the job's folder ``base`` is, links followed,
    outside it (an installed module's file is not in ``base`` to begin with)."""
    written = os.path.abspath(source)
    in_folder = written.startswith(os.path.join(os.path.abspath(base), ""))
    return in_folder and not _inside(written, os.path.realpath(base))


def _inside(path: str, root: str) -> bool:
    real = os.path.realpath(path)
    return real == root or real.startswith(root.rstrip(os.sep) + os.sep)


#: CPython 3.11 turns a parse into Python's ast objects with interpreter-wide state that
#: two threads at once corrupt ("SystemError: AST constructor recursion depth mismatch",
#: python/cpython#106905, seen in tests/test_udfs.py's threads): flowc.compile is called
#: from many threads, so every parse of Python source in the compiler takes this lock.
_PYTHON_AST = threading.Lock()


def parse_python(source: str | bytes, filename: str = "<unknown>") -> python_ast.Module:
    """``ast.parse``, one thread at a time (:data:`_PYTHON_AST`)."""
    with _PYTHON_AST:
        return python_ast.parse(source, filename=filename)


def attribute_problem(source: Path, attribute: str) -> str | None:
    """Why ``attribute`` is not a function of the module in ``source``, read without
    running it (a ``def``, an assignment or an import at the top level); None if it is, or
    if the module cannot be read."""
    try:
        tree = parse_python(source.read_bytes(), filename=str(source))
    except (OSError, SyntaxError, ValueError) as error:
        return f"cannot read {source.name}: {error}"
    for node in tree.body:
        if isinstance(node, python_ast.FunctionDef | python_ast.AsyncFunctionDef):
            if node.name == attribute:
                return (
                    None
                    if isinstance(node, python_ast.FunctionDef)
                    else (f"'{attribute}' is an async function: Spark calls functions directly")
                )
        elif isinstance(node, python_ast.ClassDef) and node.name == attribute:
            return None  # a class: calling it makes an instance, a value
        elif isinstance(node, python_ast.Import | python_ast.ImportFrom):
            if any((alias.asname or alias.name.split(".")[0]) == attribute for alias in node.names):
                return None
            if any(alias.name == "*" for alias in node.names):
                return None  # a star import: cannot tell without running it
        elif isinstance(node, python_ast.Assign | python_ast.AnnAssign | python_ast.AugAssign):
            targets = node.targets if isinstance(node, python_ast.Assign) else [node.target]
            if any(_binds(target, attribute) for target in targets):
                return None
        elif isinstance(node, python_ast.If | python_ast.Try):
            return None if attribute in python_ast.unparse(node) else _missing(attribute, source)
    return _missing(attribute, source)


def _missing(attribute: str, source: Path) -> str:
    return f"{source.name} defines no '{attribute}' at its top level"


def _binds(target: python_ast.expr, name: str) -> bool:
    if isinstance(target, python_ast.Name):
        return target.id == name
    if isinstance(target, python_ast.Tuple | python_ast.List):
        return any(_binds(element, name) for element in target.elts)
    return False


def _scalar(normalized: str) -> bool:
    return normalized in _SCALARS or normalized.startswith("DECIMAL")


def _decimal(normalized: str) -> tuple[int, int]:
    numbers = [int(n) for n in re.findall(r"\d+", normalized)]
    precision, scale = [*numbers, 10, 0][:2]
    return precision, scale


def _parts(normalized: str) -> list[str] | None:
    """The element type of an ARRAY, the key and value types of a MAP; else None."""
    match = re.fullmatch(r"(ARRAY|MAP)<(.*)>", normalized)
    if match is None:
        return None
    inner = match.group(2)
    if match.group(1) == "ARRAY":
        return [inner.strip()]
    depth = 0
    for i, char in enumerate(inner):
        depth += {"<": 1, "(": 1, ">": -1, ")": -1}.get(char, 0)
        if char == "," and depth == 0:
            return [inner[:i].strip(), inner[i + 1 :].strip()]
    return None
