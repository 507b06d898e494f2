"""``mode: queue``: jobs wait for the machine and ``schedulers`` pick which starts (DeepRM's
time-slotted environment, :mod:`dcsim.queue`). :mod:`.spec`: the ``queue:`` and ``workload:``
sections (no SimPy); :mod:`.engine`: a run's job sets played through the environment;
:mod:`.mode`: the :class:`~dcsim.modes.base.Mode` the runner calls."""
