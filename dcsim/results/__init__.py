"""Parquet results: the only package that writes Arrow."""
