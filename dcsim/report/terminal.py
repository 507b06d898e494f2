"""The report's tables on a terminal: with rich when it is installed (the ``plot`` extra)
and standard output is a terminal, plain text otherwise (a pipe, a file, a CI log)."""

from __future__ import annotations

import sys
from collections.abc import Callable

from dcsim.report.tables import plain


def print_tables(rep, echo: Callable[[str], None]) -> None:
    """Print every table of ``rep`` (a :class:`~dcsim.report.build.Report`)."""
    try:
        if not sys.stdout.isatty():
            raise ImportError
        from rich.console import Console
        from rich.table import Table
    except ImportError:
        for title, text in rep.text_tables(plain):
            echo(f"\n{title}\n{text}")
        return
    console = Console()
    for title, rows in rep.text_tables(lambda rows: rows):
        table = Table(title=title, title_justify="left")
        for i, head in enumerate(rows[0]):
            table.add_column(head, justify="left" if i == 0 else "right")
        for row in rows[1:]:
            table.add_row(*row)
        console.print(table)
