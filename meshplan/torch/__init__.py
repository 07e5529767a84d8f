"""meshplan's plans inside PyTorch (docs/frameworks.md): ``redistribute(x, placements)`` moves a DTensor with
meshplan's memory-bounded redistribution program, ``plan(x, placements)`` shows that program without moving
data, ``all_reduce(tensor, program)`` runs a synthesized hierarchical reduction with torch collectives, and
``CollectiveCounter`` counts the bytes torch's collectives send.  Needs the ``[torch]`` extra."""

from meshplan.torch.count import CollectiveCounter
from meshplan.torch.reduce import all_reduce
from meshplan.torch.redistribute import plan, redistribute

__all__ = ["redistribute", "plan", "all_reduce", "CollectiveCounter"]
