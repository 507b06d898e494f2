"""The base of every configuration model: true/false is not a number.

Pydantic's lax mode reads ``true`` as 1 for an ``int`` or ``float`` field, so ``--set
seed=true`` or ``rate: yes`` would run with a number the user never wrote. Every config
model derives from :class:`ConfigModel`, which refuses a boolean for a field that does not
take one (non-finite floats are refused by each model's ``allow_inf_nan=False``).
"""

from __future__ import annotations

import types
import typing
from typing import Any

from pydantic import BaseModel, model_validator
from pydantic_core import PydanticCustomError

__all__ = ["ConfigModel"]


def _takes_bool(annotation: Any) -> bool:
    """Whether ``annotation`` (unions, Optional, Annotated, Literal included) admits a bool."""
    if annotation is bool or annotation is Any or annotation is object:
        return True
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _takes_bool(typing.get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType):
        return any(_takes_bool(a) for a in typing.get_args(annotation))
    if origin is typing.Literal:
        return any(isinstance(a, bool) for a in typing.get_args(annotation))
    return False  # numbers, None, strings, containers and models: true/false is not one


class ConfigModel(BaseModel):
    """A pydantic model whose numeric fields refuse ``true`` / ``false``."""

    @model_validator(mode="before")
    @classmethod
    def _no_bool_numbers(cls, data: Any) -> Any:
        if isinstance(data, dict):
            for name, value in data.items():
                if isinstance(value, bool):
                    field = cls.model_fields.get(name) if isinstance(name, str) else None
                    if field is not None and not _takes_bool(field.annotation):
                        raise PydanticCustomError(
                            "bool_number", "{field}: expected a number, not {value}",
                            {"field": name, "value": str(value).lower()})
        return data
