"""The column names results already use (their tables and summaries): a swept key, a
workload attribute or a label never takes one of them."""

#: Column names results already use; a swept key never takes one of them.
RESERVED_COLUMNS = frozenset({
    "experiment", "allocator", "seed", "run_id", "code_id", "wall_time_s", "received", "accepted",
    "acceptance_ratio", "acceptance_last20", "mean_concurrent", "mean_footprint",
    "mean_decision_s", "sim_time", "window_start", "window_end", "id", "arrival", "duration",
    "bandwidth", "start", "end", "n_servers", "servers", "locality", "footprint", "measured",
    "wait", "decision_s", "time", "active", "cpu", "mem",
    # queue mode
    "jobset", "dropped", "slowdown", "completion_time", "mean_slowdown",
    "mean_completion_time", "finished", "unfinished", "jobsets", "forced_jobsets",
    # failures (their table and summary columns)
    "n_failures", "interrupted", "reallocated", "lost_request_time", "lost_vm_time", "event",
    "kind", "component", "lost_time", "interruptions",
    # power: (dcsim.modes.loss.power)
    "energy_j", "energy_servers_j", "energy_network_j", "mean_power_w", "mean_power_servers_w",
    "mean_power_network_w", "power_ons", "carbon_g", "power_w", "power_servers_w",
    "power_network_w",
    # the statistics' columns (dcsim.results.stats.STAT_COLUMNS, beside the swept keys in
    # the tables of `dcsim run` and `dcsim report`)
    "mean", "half_width", "ci_low", "ci_high", "n", "identical", "clipped",
    # gpu mode (its pods/ and timeseries/ tables and its summary; not its pods' "name",
    # which a sweep of some `name` key keeps: the writer refuses that clash)
    "row", "inflated", "num_gpu", "gpu_milli", "gpu_types", "node", "devices",
    "arrived_gpu_share", "alloc_gpu_share", "frag_gpus", "arrived_pct", "pods", "frag_ratio",
    "alloc_cpu_share", "alloc_mem_share", "unalloc_gpus", "rejected", "final_alloc_gpu_share",
    "used_nodes", "nodes", "gpus", "typical_pods", "gpu_acceptance",
    # gpu mode with gpu.power and failures
    "power_gpu_w", "power_cpu_w", "mean_power_gpu_w", "mean_power_cpu_w", "energy_gpu_j",
    "energy_cpu_j", "lost_pod_time", "lost_gpu_time", "avail_gpu", "avail_cpu",
})
