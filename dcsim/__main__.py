"""``python -m dcsim`` is the ``dcsim`` command."""

from dcsim.cli import main

main()
