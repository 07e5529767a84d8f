"""Systems: the three input forms, presets, numbering, and errors."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings, strategies as st

from meshplan.models.core.errors import ModelError, ParseError
from meshplan.models.core.presets import PRESETS, preset
from meshplan.models.core.system import Interconnect, Level, System
from meshplan.models.core.units import parse_bandwidth
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "systems"


def test_presets_have_the_papers_bandwidths():
    a = preset("a100-4x16")
    assert a.sizes == (4, 16) and a.num_devices == 64
    assert a.levels[0].links[0].kind == "nic" and a.levels[0].links[0].bandwidth == 8e9
    assert a.levels[1].links[0].kind == "switch" and a.levels[1].links[0].bandwidth == 270e9
    v = preset("v100-2x8")
    assert v.sizes == (2, 8)
    kinds = {ln.name: ln for ln in v.levels[0].links}
    assert kinds["nic"].bandwidth == 8e9 and kinds["pcie"].bandwidth == 32e9 and kinds["pcie"].share == 4
    assert v.levels[1].links[0].kind == "ring" and v.levels[1].links[0].bandwidth == 135e9
    assert set(PRESETS) == {"a100-2x16", "a100-4x16", "v100-2x8", "v100-4x8"}


def test_short_form_and_overrides():
    s = System.parse("node=4,gpu=8")
    assert s.sizes == (4, 8) and s.names == ("node", "gpu")
    t = System.parse("node=2:nic:100Gb/s,gpu=4:ring:135GB/s")
    assert t.levels[0].links[0].bandwidth == pytest.approx(12.5e9)
    assert t.levels[1].links[0].kind == "ring"


def test_files_json_and_toml(tmp_path):
    s = System.parse(str(EXAMPLES / "figure2.toml"))
    assert s.sizes == (1, 2, 2, 4) and s.name == "figure2"
    d = System.parse(str(EXAMPLES / "dgx-like.json"))
    assert d.num_devices == 32
    p = tmp_path / "a.json"
    p.write_text(json.dumps(preset("v100-4x8").to_dict()))
    assert System.load(p) == preset("v100-4x8")


@pytest.mark.parametrize("text", ["", "node", "node=0,gpu=2", "node=2,node=2", "node=x", "gpu=2:warp:1GB/s",
                                  "root=2", "nosuch-preset"])
def test_bad_short_forms(text):
    with pytest.raises(ModelError):
        System.parse(text)


@pytest.mark.parametrize("content,suffix", [
    ("{", ".json"), ("{}", ".json"), ('{"levels": []}', ".json"),
    ('{"levels": [{"name": "a"}]}', ".json"),
    ('{"levels": [{"name": "a", "size": 2, "links": [{"kind": "nic"}]}]}', ".json"),
    ('{"levels": [{"name": "a", "size": 2, "links": [{"kind": "nic", "bandwidth": -1}]}]}', ".json"),
    ('{"levels": [{"name": "a", "size": 2, "speed": 1}]}', ".json"),
    ("levels = [", ".toml"),
])
def test_malformed_files(tmp_path, content, suffix):
    p = tmp_path / f"sys{suffix}"
    p.write_text(content)
    with pytest.raises(ModelError):
        System.load(p)


def test_parse_error_has_line_and_column(tmp_path):
    p = tmp_path / "bad.json"
    p.write_text('{\n  "levels": [,]\n}')
    with pytest.raises(ParseError) as e:
        System.load(p)
    assert e.value.line == 2 and e.value.column is not None


def test_bandwidth_units():
    assert parse_bandwidth("8GB/s") == 8e9
    assert parse_bandwidth("100Gb/s") == 12.5e9
    assert parse_bandwidth(3) == 3.0
    with pytest.raises(ModelError):
        parse_bandwidth("fast")


def test_share_larger_than_unit_is_rejected():
    with pytest.raises(ModelError):
        System((Level("node", 2, (Interconnect("nic", 1e9, share=8),)), Level("gpu", 4)))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(1, 4), min_size=1, max_size=4))
def test_device_numbering_is_row_major(sizes):
    s = System.from_short(",".join(f"l{i}={x}" for i, x in enumerate(sizes)))
    seen = []
    for d in range(s.num_devices):
        c = s.coords(d)
        assert s.device(c) == d
        seen.append(c)
    assert seen == sorted(seen)  # last level varies fastest
    assert s.to_dict() == System.from_dict(s.to_dict()).to_dict()
