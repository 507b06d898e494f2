"""Helpers shared by test modules (never a test module itself: no test imports another)."""
