"""A configuration value whose type is chosen, by one field, among registered classes.

``topology: {kind: dragonfly, ...}``, ``arrival: {process: hawkes, ...}`` and every
``dist:`` are such values: the built-in kinds and those of installed or local plugins
register through the same hook (:data:`dcsim.plugins.NAME_FIELD`), and validation is the
discriminated union of whatever is registered when it runs. Errors keep pydantic's paths
and messages, as a union written out by hand would give them.
"""

from __future__ import annotations

from typing import Annotated, Any, Union

from pydantic import Field, PlainValidator, TypeAdapter, ValidationError
from pydantic_core import InitErrorDetails, PydanticCustomError

from dcsim.errors import PluginError

#: kind -> (the registered classes the adapter was made for, the adapter)
_adapters: dict[str, tuple[tuple[type, ...], TypeAdapter[Any]]] = {}


def registered_classes(kind: str) -> dict[str, type]:
    """The classes registered for ``kind``, by name, built-ins first."""
    from dcsim import plugins

    return {name: r.cls for name, r in plugins.registered(kind).items()}


def names(kind: str) -> tuple[str, ...]:
    """The names a value of ``kind`` may select, built-ins first."""
    return tuple(registered_classes(kind))


def adapter(kind: str, found: dict[str, type] | None = None) -> TypeAdapter[Any]:
    """The discriminated union of every class registered for ``kind`` (``found``: what
    :func:`registered_classes` answered, when the caller has it); made again only when what
    is registered changes."""
    from dcsim.plugins import NAME_FIELD

    classes = tuple((found if found is not None else registered_classes(kind)).values())
    cached = _adapters.get(kind)
    if cached is not None and cached[0] == classes:
        return cached[1]
    if not classes:
        raise PluginError(f"no {kind} is registered")
    made: TypeAdapter[Any] = TypeAdapter(
        classes[0] if len(classes) == 1
        else Annotated[Union[classes], Field(discriminator=NAME_FIELD[kind])])  # noqa: UP007
    _adapters[kind] = (classes, made)
    return made


def validate(kind: str, value: Any) -> Any:
    """``value`` (a mapping, or an instance of a registered class) validated as ``kind``.
    A name nothing registers, while an installed plugin failed to load, is an error at the
    selecting field that says so (the broken plugin may be what provides it)."""
    from dcsim.plugins import NAME_FIELD, broken_note

    found = registered_classes(kind)  # asked once per value
    field = NAME_FIELD[kind]
    tag = value.get(field) if isinstance(value, dict) else None
    if isinstance(tag, str) and tag not in found:
        note = broken_note()
        if note:
            raise ValidationError.from_exception_data(kind, [InitErrorDetails(
                type=PydanticCustomError("unknown_plugin", "{msg}", {"msg": (
                    f"unknown {field} {tag!r}; expected one of {', '.join(found)}"
                    + note)}),
                loc=(field,), input=tag)])
    return adapter(kind, found).validate_python(value)


def RegisteredUnion(kind: str, before: Any = None) -> Any:  # noqa: N802 - a type factory
    """The annotation of a field holding a ``kind`` value: validated against what is
    registered at validation time, after ``before(value)`` (a shorthand's expansion or a
    clearer message for a missing selecting field) where given; dumped as its own model."""

    def check(value: Any) -> Any:
        return validate(kind, before(value) if before is not None else value)

    return Annotated[Any, PlainValidator(check)]
