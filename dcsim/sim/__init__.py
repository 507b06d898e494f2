"""The SimPy core every simulation engine is built on (:mod:`dcsim.sim.core`) and the
schedule of component failures and repairs (:mod:`dcsim.sim.failures`,
:mod:`dcsim.sim.failure_stream`). Each simulation family's own engine lives in its mode's
package (:mod:`dcsim.modes`); importing this package imports nothing."""
