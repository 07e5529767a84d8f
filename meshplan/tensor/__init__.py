"""meshplan.tensor — DistDL-style distributed tensors: partitions, the five primitives with their adjoints
(plus all-gather / reduce-scatter) and distributed layers (DistDL paper, sections 3–4).  See docs/tensor.md.

    import meshplan.tensor as mt
    P = mt.Partition((1, 1, 4))                    # ranks 0..3 of COMM_WORLD
    x = P.scatter(x_global, root=0)                # this rank's balanced block
    conv = mt.Conv1d(P, 3, 2, kernel_size=5, padding=2)
    y = conv.forward(x); dx = conv.backward(dy)    # conv.weight_grad / conv.bias_grad summed on every rank
    y_global = P.gather(y, root=0)                 # None off the root

Autodiff adapters: :mod:`meshplan.tensor.torch` and :mod:`meshplan.tensor.jax`.  Importing this package
imports mpi4py (the layers run on MPI).
"""

from __future__ import annotations

from meshplan.exec.tensor.layers import (AvgPool1d, AvgPool2d, AvgPool3d, Conv1d, Conv2d, Conv3d, Linear, MaxPool1d,
                                         MaxPool2d, MaxPool3d)
from meshplan.exec.tensor.partition import Partition
from meshplan.exec.tensor.primitives import (AllGather, AllSumReduce, Broadcast, HaloExchange, ReduceScatter,
                                             Repartition, SumReduce)
from meshplan.models.tensor.halo import Window, halo_geometry
from meshplan.models.tensor.partition import CartesianPartition

#: the public API (built from the objects: the primitive classes carry the paper's collective names)
__all__ = [obj.__name__ for obj in (
    Partition, CartesianPartition, Window, halo_geometry, Broadcast, SumReduce, AllSumReduce, Repartition, HaloExchange,
    AllGather, ReduceScatter, Conv1d, Conv2d, Conv3d, MaxPool1d, MaxPool2d, MaxPool3d, AvgPool1d, AvgPool2d,
    AvgPool3d, Linear)]
