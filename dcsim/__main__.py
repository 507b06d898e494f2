"""``python -m dcsim`` is the ``dcsim`` command."""

from dcsim.cli import program

program()
