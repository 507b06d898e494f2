"""Allocators: policies that choose where a request goes. They only choose; the engine acts."""

from dcsim.allocators.base import FIRST_STEP, Allocator, Choice, StepBoundary

__all__ = ["FIRST_STEP", "Allocator", "Choice", "StepBoundary"]
