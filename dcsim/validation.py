"""The base of every configuration model (true/false is not a number; unknown keys and
non-finite floats refused) and the one conversion of a pydantic error into dcsim's message
(``where.field.path: reason``).

Pydantic's lax mode reads ``true`` as 1 for an ``int`` or ``float`` field, so ``--set
seed=true`` or ``rate: yes`` would run with a number the user never wrote. Every config
model derives from :class:`ConfigModel`, which refuses a boolean for a field that does not
take one (non-finite floats are refused by each model's ``allow_inf_nan=False``).
"""

from __future__ import annotations

import types
import typing
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError, model_validator
from pydantic_core import PydanticCustomError

from dcsim.errors import ConfigError

__all__ = ["ConfigModel", "StrictModel", "error_lines", "first_error"]


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


class StrictModel(ConfigModel):
    """A config section: unknown keys and non-finite floats are errors."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


def first_error(exc: ValidationError, where: str = "", *, model: type[BaseModel] | None = None,
                sep: str = ".", unknown: str | None = "unknown field", suffix: str = "") -> str:
    """``exc``'s first error as ``where<sep>field.path: reason<suffix>``.

    Pydantic's internals are dropped from the path (``function-...`` validator steps) and
    from the reason (``Value error, ``); an unknown key reads ``unknown`` (None keeps
    pydantic's wording). With ``model``, a model validator's message that starts with one of
    the model's field names (``"path: no such file"``) is reported under that field."""
    err = exc.errors()[0]
    loc = [str(x) for x in err["loc"] if not str(x).startswith("function-")]
    msg = err["msg"].removeprefix("Value error, ")
    if unknown is not None and err["type"] in ("extra_forbidden",
                                               "unexpected_keyword_argument"):
        msg = unknown
    if model is not None:
        head, colon, rest = msg.partition(": ")
        if colon and head.isidentifier() and head in _field_names(model, loc):
            loc, msg = [*loc, head], rest
    path = ".".join(loc)
    field = sep.join(x for x in (where, path) if x)
    return f"{field}: {msg}{suffix}" if field else f"{msg}{suffix}"


def _field_names(model: Any, loc: list[str]) -> set[str]:
    """The field names of the (nested) model at ``loc``."""
    m: Any = model
    for part in loc:
        f = getattr(m, "model_fields", {}).get(part)
        if f is None:
            return set()
        m = _model_of(f.annotation)
        if m is None:
            return set()
    return set(getattr(m, "model_fields", {}))


def _model_of(annotation: Any) -> Any:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for a in getattr(annotation, "__args__", ()):
        found = _model_of(a)
        if found is not None:
            return found
    return None


def error_lines(err: ValidationError, where: str, data: Any = None,
                kinds: tuple[str, ...] = ()) -> str:
    """Up to three of ``err``'s errors, as ``where.field.path: reason`` joined by ``; ``
    (``(and N more)`` after them). Discriminated unions' tags are dropped from the path
    (``demand.cpu.exponential.mean`` reads ``demand.cpu.mean``): a tag that ``data`` gives as
    its ``dist`` or ``process``, or one of ``kinds`` (a union tagged by ``kind``, whose
    unknown or missing tag reads ``where.kind: unknown kind ...; expected one of ...``)."""
    lines = []
    for e in err.errors()[:3]:
        parts, node = [where] if where else [], data
        loc = list(e["loc"])
        msg = e["msg"].removeprefix("Value error, ")
        if kinds and e["type"] in ("union_tag_invalid", "union_tag_not_found"):
            loc = ["kind"]
            if e["type"] == "union_tag_invalid":
                msg = (f"unknown kind {e['input'].get('kind')!r}; expected one of "
                       + ", ".join(kinds))
        elif kinds and loc and loc[0] in kinds:
            loc = loc[1:]  # the union's branch, not a field
        for key in loc:
            if isinstance(node, dict) and key not in node and key in (node.get("dist"),
                                                                        node.get("process")):
                continue  # the union's tag, not a field
            parts.append(f"[{key}]" if isinstance(key, int) else str(key))
            node = node.get(key) if isinstance(node, dict) else (
                node[key] if isinstance(node, list) and isinstance(key, int)
                and key < len(node) else None)
        lines.append(f"{'.'.join(parts).replace('.[', '[')}: {msg}")
    more = len(err.errors()) - 3
    return "; ".join(lines) + (f" (and {more} more)" if more > 0 else "")


def validate_section(model: type[BaseModel], raw: Any, where: str) -> Any:
    """``model`` validated from ``raw``; the first error as a :class:`ConfigError` naming
    the field path under ``where`` (e.g. ``vm.reschedule.mnl: Input should be ...``); an
    instance of ``model`` (a section parsed already) is returned as it is."""
    if isinstance(raw, model):
        return raw
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: expected a mapping of settings, got {raw!r}")
    try:
        return model.model_validate(raw)
    except ValidationError as e:
        raise ConfigError(first_error(e, where, model=model, unknown=None)) from None
