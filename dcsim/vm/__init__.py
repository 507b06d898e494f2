"""VM rescheduling (VMR²L): the two-NUMA placement model, the authors' mapping format, a
synthetic mapping generator and the static ``reschedule`` command's logic."""

from dcsim.vm.model import (
    BOTH,
    FRAGMENT_CORES,
    VM,
    Host,
    InvalidMigration,
    MappingState,
    Migration,
    MoveRecord,
    fragment_rate,
)

__all__ = ["BOTH", "FRAGMENT_CORES", "VM", "Host", "InvalidMigration", "MappingState",
           "Migration", "MoveRecord", "fragment_rate"]
