"""Files appear whole or not at all: the one atomic writer every part of dcsim uses.

Light on purpose (no pandas or pyarrow), so checkpoint and mapping code can use it without
importing the results stack.
"""

from __future__ import annotations

import os
from pathlib import Path

from dcsim.errors import naming_path


def write_atomic(path: str | os.PathLike, data: bytes) -> None:
    """Write ``data`` beside ``path`` and rename it into place; a failure leaves neither a
    torn file nor its temporary, and an ``OSError`` names ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    try:
        with naming_path(path), open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
