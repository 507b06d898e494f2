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
        from rich.text import Text
    except ImportError:
        for title, text in rep.text_tables(plain):
            echo(f"\n{title}\n{text}")
        return
    console = Console()
    for _metric, title, rows, note in rep.sections():
        # Text: brackets in a cell or the footnote ([low, high]) are not rich markup
        table = Table(title=Text(title), title_justify="left",
                      caption=Text(note) if note else None, caption_justify="left")
        for i, head in enumerate(rows[0]):
            table.add_column(Text(head), justify="left" if i == 0 else "right")
        for row in rows[1:]:
            table.add_row(*(Text(c) for c in row))
        console.print(table)
