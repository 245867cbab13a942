"""Rows to the terminal as a table, CSV or JSON (the format a user picks with --format)."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Sequence
from typing import Any

from rich.console import Console
from rich.table import Table

FORMATS = ("table", "csv", "json")


def render(console: Console, title: str, columns: Sequence[str], rows: Sequence[Sequence[Any]],
           fmt: str = "table") -> None:
    if fmt == "json":
        # print(), not rich: JSON must reach the pipe byte for byte
        print(json.dumps([dict(zip(columns, r, strict=True)) for r in rows], indent=2,
                         default=str))
    elif fmt == "csv":
        buf = io.StringIO()
        writer = csv.writer(buf)
        writer.writerow(columns)
        writer.writerows(rows)
        print(buf.getvalue(), end="")
    else:
        table = Table(title=title)
        for column in columns:
            table.add_column(column)
        for row in rows:
            table.add_row(*("" if v is None else str(v) for v in row))
        console.print(table)
