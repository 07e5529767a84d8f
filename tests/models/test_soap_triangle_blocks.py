"""The projective planes behind the triangle-block counter-schedules (Beaumont, Eyraud-Dubois, Langou and
Vérité, SPAA 2022, section 4): checked by their defining property, not by a stored table."""

from __future__ import annotations

import itertools

import pytest

from meshplan.models.core.errors import ModelError
from meshplan.models.soap.triangle_blocks import projective_plane


@pytest.mark.parametrize("q", [2, 3, 5, 7])
def test_every_two_points_lie_on_exactly_one_line(q):
    lines = projective_plane(q)
    P = q * q + q + 1
    assert len(lines) == P and all(len(line) == q + 1 for line in lines)
    count = {pair: 0 for pair in itertools.combinations(range(P), 2)}
    for line in lines:
        for pair in itertools.combinations(line, 2):
            count[pair] += 1
    assert set(count.values()) == {1}
    assert sorted(p for line in lines for p in line) == sorted(list(range(P)) * (q + 1))


@pytest.mark.parametrize("q", [0, 1, 4, 9])
def test_an_order_that_is_no_prime_is_refused(q):
    with pytest.raises(ModelError, match="prime"):
        projective_plane(q)
