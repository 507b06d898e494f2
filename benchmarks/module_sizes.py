"""Module sizes of ``dcsim``, for review (no limit: size is no gate since #35).

    python benchmarks/module_sizes.py [--top 20] [--packages]

Prints each module's lines (all, and code: not blank, not a comment, not a docstring),
longest first, then the total. ``--packages`` sums them per package instead. A long module
is worth a look, not a cut: split one along a seam (its halves would share no private
names, which ``tests/test_architecture.py`` checks), never to meet a number.
"""

from __future__ import annotations

import argparse
import ast
import io
import tokenize
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def code_lines(source: str) -> int:
    """Lines holding code: not blank, not only a comment, not part of a docstring."""
    doc: set[int] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef
                      | ast.AsyncFunctionDef) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) \
                    and isinstance(first.value.value, str):
                doc.update(range(first.lineno, (first.end_lineno or first.lineno) + 1))
    code: set[int] = set()
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type not in (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT,
                            tokenize.DEDENT, tokenize.ENDMARKER):
            code.update(range(tok.start[0], tok.end[0] + 1))
    return len(code - doc)


def sizes(root: Path = ROOT) -> list[tuple[str, int, int]]:
    """``(module path, lines, code lines)`` of every module under ``dcsim/``."""
    out = []
    for p in sorted((root / "dcsim").rglob("*.py")):
        src = p.read_text()
        out.append((p.relative_to(root).as_posix(), len(src.splitlines()), code_lines(src)))
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--top", type=int, default=None, help="only the N longest")
    ap.add_argument("--packages", action="store_true", help="sum per package")
    args = ap.parse_args(argv)
    rows = sizes()
    if args.packages:
        per: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
        for path, n, c in rows:
            acc = per[path.rpartition("/")[0]]
            acc[0] += 1
            acc[1] += n
            acc[2] += c
        table = sorted(((k, n, c, m) for k, (m, n, c) in per.items()), key=lambda r: -r[1])
        print(f"{'package':<40} {'modules':>7} {'lines':>7} {'code':>7}")
        for k, n, c, m in table[:args.top]:
            print(f"{k:<40} {m:>7} {n:>7} {c:>7}")
    else:
        rows.sort(key=lambda r: (-r[1], r[0]))
        print(f"{'module':<52} {'lines':>6} {'code':>6}")
        for path, n, c in rows[:args.top]:
            print(f"{path:<52} {n:>6} {c:>6}")
    print(f"{len(rows)} modules, {sum(r[1] for r in rows)} lines, "
          f"{sum(r[2] for r in rows)} code lines")


if __name__ == "__main__":
    main()
