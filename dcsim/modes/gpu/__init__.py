"""``mode: gpu``: GPU-sharing clusters (FGD, ATC'23); each of ``gpu_allocators`` places the
pods of a node list and pod list. :mod:`.spec`: the ``gpu:`` section (no SimPy);
:mod:`.engine`: the one-pass protocol and the online engine; :mod:`.failures`: the online
cluster as a failure target; :mod:`.mode`: the :class:`~dcsim.modes.base.Mode` the runner
calls."""
