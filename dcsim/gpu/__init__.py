"""GPU-sharing clusters (FGD, Weng et al., ATC'23): nodes with GPU devices, pods asking for
a share of one GPU or for whole GPUs, the state that places them device by device, the
Alibaba 2023 GPU trace's node and pod lists, and the fragmentation measure."""

from dcsim.gpu.cluster import MILLI, GpuCluster, GpuClusterView, GpuNodes, GpuPlacement, GpuPod
from dcsim.gpu.frag import FragModel, TypicalPods, typical_pods
from dcsim.gpu.trace import PodTable, check_against, read_nodes, read_pods

__all__ = ["MILLI", "FragModel", "GpuCluster", "GpuClusterView", "GpuNodes", "GpuPlacement",
           "GpuPod", "PodTable", "TypicalPods", "check_against", "read_nodes", "read_pods",
           "typical_pods"]
