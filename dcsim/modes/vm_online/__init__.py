"""``mode: vm_online``: VMs arrive and depart and each of ``placers`` places them, with
optional periodic rescheduling. :mod:`.spec`: the ``vm:`` section (no SimPy); :mod:`.engine`:
the SimPy :class:`~dcsim.modes.vm_online.engine.OnlineEngine`; :mod:`.failures`: its mapping
as a failure target; :mod:`.mode`: the :class:`~dcsim.modes.base.Mode` the runner calls."""
