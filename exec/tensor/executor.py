"""A halo exchange inside the caller's MPI program: ``halo = plan.bind(comm); x_ext = halo.forward(x)``
(DistDL paper, section 3.2.5).

:class:`HaloExecutor` is what :meth:`meshplan.api.tensor.HaloPlan.bind` returns: the
:class:`~meshplan.exec.tensor.primitives.HaloExchange` primitive of the plan's window on a
:class:`~meshplan.exec.tensor.partition.Partition` of the caller's communicator (grid index ``i`` on rank
``i``), with the executor protocol of :class:`~meshplan.exec.runtime.executor.Executor`: its own
sub-communicators and staging memory, byte counter, ``close()`` / ``with``.  ``forward`` turns this rank's
owned block into the extended block the window reads (halo from the neighbours, padding filled);
``adjoint`` adds the halo's values back into their owners, so the pair passes the dot-product test.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from meshplan.exec.runtime.executor import Executor
from meshplan.exec.tensor.partition import Partition
from meshplan.exec.tensor.primitives import HaloExchange
from meshplan.models.core.dtypes import as_dtype
from meshplan.models.core.errors import ModelError

__all__ = ["HaloExecutor"]


class HaloExecutor(Executor):
    """The halo exchange of a :class:`~meshplan.models.tensor.problem.HaloProblem` on ``comm``."""

    def __init__(self, problem: Any, comm: Any, *, pad_value: float = 0.0) -> None:
        super().__init__(comm, {"partition": problem.partition, "shape": problem.shape, "window": problem.window,
                                "dtype": problem.dtype, "pad_value": pad_value})
        need = problem.partition.size
        if need > self.size:
            raise ModelError(f"the partition {problem.partition.shape} needs {need} ranks but comm has {self.size}",
                             param="comm")
        self.problem = problem
        self.partition = Partition(problem.partition.shape, comm=self.counted, comms=self.comms)
        self._plain = Partition(problem.partition.shape, comm=self.comm, comms=self.comms)  # distribute/collect
        w = problem.window
        self.exchange = HaloExchange(self.partition, problem.shape, w.kernel, w.stride, w.padding, w.dilation,
                                     pad_value=pad_value, dtype=np.dtype(as_dtype(problem.dtype).numpy_runnable))

    @property
    def in_shape(self) -> tuple[int, ...] | None:
        """This rank's owned block (None off the partition)."""
        return self.exchange.in_shape

    @property
    def out_shape(self) -> tuple[int, ...] | None:
        """This rank's extended block: what the window reads to produce its output block."""
        return self.exchange.out_shape

    def forward(self, x: Any, out: np.ndarray | None = None) -> np.ndarray | None:
        """Owned block → extended block (halo received, padding filled); None off the partition."""
        if self._closed:
            self._require_open()
        return self.exchange.forward(x, out)

    def adjoint(self, y: Any, out: np.ndarray | None = None) -> np.ndarray | None:
        """Extended block → owned block with every halo value added back into its owner."""
        if self._closed:
            self._require_open()
        return self.exchange.adjoint(y, out)

    __call__ = forward

    def distribute(self, x_global: Any, root: int = 0) -> np.ndarray | None:
        """This rank's owned block of ``x_global`` (given on ``root``, None elsewhere)."""
        self._require_open()
        return self._plain.scatter(x_global, root=root)

    def collect(self, y: Any, root: int = 0) -> np.ndarray | None:
        """The global tensor on ``root`` from every rank's owned block (None elsewhere)."""
        self._require_open()
        return self._plain.gather(y, root=root)

    def _release(self) -> None:
        self.exchange.close()
