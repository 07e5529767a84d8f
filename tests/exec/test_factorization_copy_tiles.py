"""The tiled copy that fills Cholesky's column-major working tile equals numpy's copy in every layout."""

import numpy as np
import pytest

from meshplan.exec.factorization.common import copy_tiles


@pytest.mark.parametrize("shape", [(0, 3), (5, 7), (64, 64), (130, 65), (257, 129)])
@pytest.mark.parametrize("order", ["C", "F"])
def test_copy_tiles_equals_copyto(shape, order):
    rng = np.random.default_rng(sum(shape))
    base = rng.standard_normal((shape[0], 2 * shape[1]))
    for src in (base[:, : shape[1]].copy(), np.asfortranarray(base[:, : shape[1]]), base[:, ::2],
                base[:, : shape[1]].astype(np.float32)):
        dst = np.full(shape, np.nan, order=order)
        copy_tiles(dst, src, block=32)
        assert np.array_equal(dst, src.astype(np.float64))
