"""Reading a report table cell back into its numbers (the number-format tests share it)."""

from __future__ import annotations

import re
from decimal import Decimal

NUMBER = re.compile(r"^(-?\d+(?:\.(\d+))?)(e[+-]\d+)?$")


def parts(text: str) -> list[tuple[Decimal, int, str]]:
    """Each number of a cell: (value, decimals of its mantissa, exponent suffix)."""
    out = []
    for token in re.split(r" ± |\[|\]|, ", text.replace(" †", "").replace(" *", "")):
        token = token.strip()
        if not token:
            continue
        m = NUMBER.match(token)
        assert m, f"{token!r} of {text!r} is not a number"
        out.append((Decimal(token), len(m.group(2) or ""), m.group(3) or ""))
    return out
