"""The type stub of the extension (_rankscope.pyi) against the built module: every public name, class member and
parameter is in both, with the same names and defaults; and every name the package exports exists and is documented."""
import ast
import inspect
import os
import re

import rankscope
from rankscope import _rankscope

STUB = os.path.join(os.path.dirname(rankscope.__file__), "_rankscope.pyi")


def stub_tree():
    with open(STUB) as f:
        return ast.parse(f.read())


def stub_parameters(function):
    names = [a.arg for a in function.args.args if a.arg != "self"]
    defaults = [ast.unparse(d) for d in function.args.defaults]
    return names, defaults


def runtime_parameters(doc):
    """Parameter names and defaults from pybind11's signature line 'name(self: T, a: int = 0, ...) -> R'."""
    signature = doc.splitlines()[0]
    inside = signature[signature.index("(") + 1:signature.rindex(") ->")]
    names, defaults, depth, current = [], [], 0, ""
    for char in inside + ",":  # split on top-level commas (defaults may hold parentheses)
        if char in "([":
            depth += 1
        elif char in ")]":
            depth -= 1
        if char == "," and depth == 0:
            if current.strip():
                name, _, rest = current.strip().partition(":")
                if name != "self":
                    names.append(name)
                    if " = " in rest:
                        defaults.append(rest.split(" = ", 1)[1])
            current = ""
        else:
            current += char
    return names, defaults


def same_default(stub, runtime):
    if stub == "...":
        return True
    try:
        return ast.literal_eval(stub) == ast.literal_eval(runtime)
    except ValueError:
        return stub == runtime


def check_function(stub_function, runtime_doc, where):
    stub_names, stub_defaults = stub_parameters(stub_function)
    names, defaults = runtime_parameters(runtime_doc)
    assert stub_names == names, (where, stub_names, names)
    assert len(stub_defaults) == len(defaults), (where, stub_defaults, defaults)
    assert all(same_default(s, r) for s, r in zip(stub_defaults, defaults)), (where, stub_defaults, defaults)


def test_stub_and_extension_have_the_same_names_and_parameters():
    tree = stub_tree()
    stubbed = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            stubbed[node.name] = node
        elif isinstance(node, ast.AnnAssign):
            stubbed[node.target.id] = node
    public = {name for name in dir(_rankscope) if not name.startswith("__")}
    assert set(stubbed) == public, (set(stubbed) ^ public)
    for name, node in stubbed.items():
        runtime = getattr(_rankscope, name)
        if isinstance(node, ast.FunctionDef):
            check_function(node, runtime.__doc__, name)
        elif isinstance(node, ast.ClassDef) and name != "Error":
            members = {m.name if not isinstance(m, ast.AnnAssign) else m.target.id: m for m in node.body
                       if isinstance(m, (ast.FunctionDef, ast.AnnAssign))}
            # pybind11 >= 2.12 (torch 2.x ships its headers) adds _pybind11_conduit_v1_ to every class: its interop
            # hook, not part of rankscope's API.
            runtime_members = {k for k, v in vars(runtime).items()
                               if (not k.startswith("__") or (k == "__init__" and "instancemethod" in type(v).__name__))
                               and k != "_pybind11_conduit_v1_"}
            assert set(members) == runtime_members, (name, set(members) ^ runtime_members)
            for member, member_node in members.items():
                value = vars(runtime)[member]
                if isinstance(member_node, ast.FunctionDef) and not isinstance(value, property):
                    check_function(member_node, value.__doc__, f"{name}.{member}")


def test_every_exported_name_exists_and_public_functions_are_documented_and_annotated():
    for name in rankscope.__all__:
        value = getattr(rankscope, name)
        if inspect.isfunction(value):
            assert value.__doc__ and len(value.__doc__) > 20, name
            signature = inspect.signature(value)
            assert signature.return_annotation is not inspect.Signature.empty, name
            assert all(p.annotation is not inspect.Parameter.empty for p in signature.parameters.values()), name
    assert os.path.isfile(os.path.join(os.path.dirname(rankscope.__file__), "py.typed"))
    assert re.fullmatch(r"\d+\.\d+\.\d+", rankscope.__version__)
