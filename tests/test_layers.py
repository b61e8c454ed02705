"""The package's shape: layered folders whose imports run one way, and small modules."""

import ast
import pathlib

import smallgemm

ROOT = pathlib.Path(smallgemm.__file__).parent
# Lowest first: a module may import its own layer and the layers below it, never one above.
LAYERS = {
    "version": 0,
    "progress": 0,
    "machine": 0,
    "simd": 1,
    "kernels": 2,
    "drivers": 3,
    "plan": 4,
    "api": 5,
    "tools": 6,
    "tune": 6,
    "nn": 6,
    "njit": 6,
    "dask": 6,
    "cuda": 6,
    "__init__": 6,
    "__main__": 6,
}
MAX_LINES = 500
MAX_PARAMETERS = 12  # what belongs together travels as a record (simd.records)


def _modules():
    for path in sorted(ROOT.rglob("*.py")):
        if "__pycache__" not in path.parts:
            yield path, ".".join(path.relative_to(ROOT.parent).with_suffix("").parts)


def _layer(module: str) -> int:
    """The rank of a module of the package (``smallgemm.plan.rules``: plan's)."""
    parts = module.split(".")
    return LAYERS[parts[1] if len(parts) > 1 else "__init__"]


def _imported(path: pathlib.Path, module: str):
    """The package's modules (or the packages the names come from) that ``module`` imports."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target == "smallgemm":  # `from smallgemm import x` or `from . import x` at the top
                yield from (f"smallgemm.{alias.name}" for alias in node.names)
            elif target.startswith("smallgemm."):
                yield target
        elif isinstance(node, ast.Import):
            yield from (a.name for a in node.names if a.name.startswith("smallgemm."))


def test_every_module_sits_in_a_layer():
    for _path, module in _modules():
        _layer(module)  # a KeyError names a folder without a layer


def test_imports_run_from_higher_layers_to_lower_ones_only():
    upward = [
        f"{module} imports {target}"
        for path, module in _modules()
        for target in _imported(path, module)
        if _layer(target) > _layer(module)
    ]
    assert not upward, "imports that run back up:\n" + "\n".join(upward)


def test_the_layer_check_sees_an_upward_import(tmp_path):
    """The check itself: a machine module importing the plan is caught."""
    path = tmp_path / "cpu.py"
    path.write_text("from ..plan import rules\nfrom . import settings\n")
    targets = list(_imported(path, "smallgemm.machine.cpu"))
    assert targets == ["smallgemm.plan", "smallgemm.machine"]
    assert _layer(targets[0]) > _layer("smallgemm.machine.cpu")


def test_no_module_is_over_the_line_limit():
    """The package's modules and the tests'."""
    paths = [path for path, _ in _modules()] + sorted(pathlib.Path(__file__).parent.glob("*.py"))
    long = [f"{path.name}: {n}" for path in paths if (n := len(path.read_text().splitlines())) > MAX_LINES]
    assert not long, f"modules over {MAX_LINES} lines: {long}"


def _parameters(function: ast.FunctionDef) -> int:
    arguments = function.args
    return len(arguments.posonlyargs) + len(arguments.args) + len(arguments.kwonlyargs)


def test_no_function_takes_more_than_twelve_parameters():
    long = [
        f"{module}.{node.name}: {count}"
        for path, module in _modules()
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.FunctionDef) and (count := _parameters(node)) > MAX_PARAMETERS
    ]
    assert not long, f"functions over {MAX_PARAMETERS} parameters: {long}"


def test_the_parameter_count_sees_every_kind_of_parameter():
    """The check itself: positional-only, ordinary and keyword-only parameters all count."""
    function = ast.parse("def f(a, /, b, *c, d, **e): pass").body[0]
    assert _parameters(function) == 3
