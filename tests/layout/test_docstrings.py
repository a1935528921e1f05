"""Every hvdkit module, public class, public function and public method says what it is for."""

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "hvdkit"


def undocumented() -> list[str]:
    missing = []
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text())
        rel = path.relative_to(PACKAGE.parent)
        if not ast.get_docstring(tree):
            missing.append(f"{rel}: module")
        for node in tree.body:
            if not isinstance(node, (ast.FunctionDef, ast.ClassDef)) or node.name.startswith("_"):
                continue
            if not ast.get_docstring(node):
                missing.append(f"{rel}:{node.lineno} {node.name}")
            if isinstance(node, ast.ClassDef):
                for sub in node.body:
                    if isinstance(sub, ast.FunctionDef) and not sub.name.startswith("_") and not ast.get_docstring(sub):
                        missing.append(f"{rel}:{sub.lineno} {node.name}.{sub.name}")
    return missing


def test_public_api_has_docstrings():
    assert undocumented() == []
