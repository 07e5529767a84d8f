"""Distributed array types and collectives for redistribution (Rink et al., "Memory-efficient
array redistribution through portable collective communication").

Modules: ``mesh`` (meshes), ``types`` (types, parser, meta-functions, WF rules),
``offsets`` (base offset maps), ``decompose`` (prime sub-axes), ``collectives``
(typing rules), ``lowlevel`` (device assignments, replay checker), ``weak`` (weak
types), ``cost`` (cost model, height), ``serialize`` (JSON steps), ``sample``
(random problems).  See docs/redistribute.md.
"""

from meshplan.models.redistribution.mesh import Mesh, parse_mesh
from meshplan.models.redistribution.types import Dim, DistType, check_well_formed, parse_type

__all__ = ["Mesh", "parse_mesh", "Dim", "DistType", "parse_type", "check_well_formed"]
