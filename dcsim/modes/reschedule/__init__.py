"""``mode: reschedule``: each of ``reschedulers`` migrates at most MNL VMs of a mapping (VMR²L).
:mod:`.spec`: the ``vm:`` section; :mod:`.engine`: one rescheduler's run on the mapping;
:mod:`.command`: ``dcsim reschedule MAPPING.json``; :mod:`.mode`: the
:class:`~dcsim.modes.base.Mode` the runner calls."""
