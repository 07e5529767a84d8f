"""Base offset maps (paper §4.1, Fig. 7a), vectorised with numpy.

``D⟦c{x, x̄}n⟧(ī) = c·i_x + D⟦(c·k){x̄}n⟧(ī)`` and ``D⟦c⟧ = 0``: the axes of a
dimension are a mixed-radix number, the first (minor-most) axis least
significant.  ``T⟦τ⟧`` applies ``D`` to every dimension.  Device maps (§6) are
represented by their inverse ``φ⁻¹``: an integer array ``coords[d, a]`` giving the
mesh coordinate along axis ``a`` of physical device ``d``.
"""

from __future__ import annotations

import numpy as np

from meshplan.models.redistribution.mesh import Mesh
from meshplan.models.redistribution.types import Dim, DistType

__all__ = ["axes_tile_index", "dim_tile_index", "dim_offsets", "base_offsets"]


def axes_tile_index(mesh: Mesh, axes, coords: np.ndarray) -> np.ndarray:
    """Every device's mixed-radix number over ``axes``: ``Σ_t i_{x_t}·Π_{s<t} k_s`` (minor axis first)."""
    v = np.zeros(coords.shape[0], dtype=np.int64)
    weight = 1
    for a in axes:
        v += coords[:, mesh.index(a)] * weight
        weight *= mesh.size(a)
    return v


def dim_tile_index(mesh: Mesh, dim: Dim, coords: np.ndarray) -> np.ndarray:
    """Tile number along ``dim`` of every device (:func:`axes_tile_index` over its axes)."""
    return axes_tile_index(mesh, dim.axes, coords)


def dim_offsets(mesh: Mesh, dim: Dim, coords: np.ndarray | None = None) -> np.ndarray:
    """``D⟦dim⟧`` at every device (Fig. 7a)."""
    coords = mesh.coords() if coords is None else coords
    return dim.local * dim_tile_index(mesh, dim, coords)


def base_offsets(mesh: Mesh, t: DistType, coords: np.ndarray | None = None) -> np.ndarray:
    """``T⟦t⟧ ∘ φ⁻¹`` as an array ``[device, dimension] -> base offset`` (Fig. 7a)."""
    coords = mesh.coords() if coords is None else coords
    if not t.dims:
        return np.zeros((coords.shape[0], 0), dtype=np.int64)
    return np.stack([dim_offsets(mesh, d, coords) for d in t.dims], axis=1)
