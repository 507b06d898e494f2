"""Allocators: policies that choose where a request goes. They only choose; the engine acts."""

from dcsim.allocators.base import Allocator, Choice

__all__ = ["Allocator", "Choice"]
