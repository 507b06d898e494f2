"""Reading a trainer's YAML settings into its ``TrainConfig`` (a pydantic dataclass)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from pydantic import ValidationError

from dcsim.config_files import load_yaml, read_text, set_dotted
from dcsim.errors import ConfigError
from dcsim.validation import first_error

T = TypeVar("T")


def read_train_config(path: str | Path, cls: type[T], *,
                      renamed: dict[str, Callable[[dict[str, Any]], str]] | None = None,
                      **overrides: Any) -> T:
    """Read YAML ``path`` (keys: ``cls``'s fields) into ``cls``; ``overrides`` replace keys
    (CLI options; a dotted key such as ``topology.channels`` sets one entry of a
    section). Every problem is a :class:`ConfigError` naming the file and the field;
    ``renamed``: keys of an older version, each with a function of the settings read
    that says what replaces it."""
    path = Path(path)
    raw = load_yaml(read_text(path), str(path))
    raw = {} if raw is None else raw
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: expected a mapping of {cls.__name__} fields at the top "
                          "level")
    for key, value in overrides.items():  # dotted keys (--set a.b=v) reach into sections
        if "." in key:
            set_dotted(raw, key, value, where=f"{path}: --set")
        else:
            raw[key] = value
    for key, replacement in (renamed or {}).items():
        if key in raw:
            raise ConfigError(f"{path}: {key}: no longer a setting; {replacement(raw)}")
    try:
        return cls(**raw)
    except ValidationError as e:
        raise ConfigError(first_error(e, str(path), sep=": ")) from None
    except ValueError as e:  # __post_init__ checks
        raise ConfigError(f"{path}: {e}") from None
