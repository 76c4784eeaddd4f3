"""methods.core.config: the dataclass declarations are the validation. Checked against an
independent implementation: the `jsonschema` library run on the schema `json_schema` generates."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Literal

import jsonschema
import pytest

from methods.core.config import (
    Check,
    NonNeg,
    PosInt,
    Positive,
    Prob,
    check_scale,
    from_dict,
    json_schema,
    section_class,
)
from methods.core.results import InputError


@dataclass
class Inner:
    steps: PosInt
    tag: str | None = None


@dataclass
class Section:
    width: PosInt
    lr: Positive
    p: Prob
    kind: Literal["pre", "post"]
    decays: Annotated[list[NonNeg], Check(min_items=2, unique_items=True)]
    arms: Annotated[dict[Annotated[str, Check(pattern=r"^[a-z_]+$")], Inner], Check(min_properties=1)]
    betas: tuple[Annotated[float, Check(minimum=0, exclusive_maximum=1)], Annotated[float, Check(minimum=0, exclusive_maximum=1)]]
    inner: Inner | None
    name: Annotated[str, Check(not_in=("base",))] = "x"
    extra: list[int] = field(default_factory=list)


GOOD = {"width": 8, "lr": 0.1, "p": 0.5, "kind": "pre", "decays": [0, 0.1], "arms": {"a_b": {"steps": 3}},
        "betas": [0.9, 0.95], "inner": None}

BAD = {  # mutation → the dotted key the error must name
    "width=0": ({"width": 0}, "width"),
    "width=true": ({"width": True}, "width"),
    "width=1.5": ({"width": 1.5}, "width"),
    "lr=0": ({"lr": 0}, "lr"),
    "p=1.5": ({"p": 1.5}, "p"),
    "kind": ({"kind": "mid"}, "kind"),
    "decays short": ({"decays": [0.1]}, "decays"),
    "decays repeat": ({"decays": [0.1, 0.1]}, "decays"),
    "decays negative": ({"decays": [0.1, -1]}, "decays[1]"),
    "arms empty": ({"arms": {}}, "arms"),
    "arms key": ({"arms": {"Bad": {"steps": 1}}}, "arms.Bad"),
    "arms nested": ({"arms": {"a": {"steps": 0}}}, "arms.a.steps"),
    "arms unknown": ({"arms": {"a": {"steps": 1, "stepz": 2}}}, "arms.a.stepz"),
    "betas len": ({"betas": [0.9]}, "betas"),
    "betas bound": ({"betas": [0.9, 1.0]}, "betas[1]"),
    "inner typed": ({"inner": {"steps": "3"}}, "inner.steps"),
    "inner list": ({"inner": [1]}, "inner"),
    "name refused": ({"name": "base"}, "name"),
    "extra type": ({"extra": ["a"]}, "extra[0]"),
}


def test_valid_section_round_trips():
    s = from_dict(Section, GOOD, "sec")
    assert s.width == 8 and s.decays == [0.0, 0.1] and s.betas == (0.9, 0.95)
    assert s.arms["a_b"] == Inner(steps=3) and s.name == "x" and s.extra == []
    jsonschema.Draft202012Validator(json_schema(Section)).validate(GOOD)


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_value_names_its_key_and_jsonschema_agrees(case):
    change, key = BAD[case]
    data = {**GOOD, **change}
    with pytest.raises(InputError) as e:
        from_dict(Section, data, "sec")
    msg = str(e.value)
    assert "\n" not in msg and f"'sec.{key}'" in msg, msg
    assert not jsonschema.Draft202012Validator(json_schema(Section)).is_valid(data), case


@pytest.mark.parametrize("missing", ["width", "kind", "inner"])
def test_missing_required_key(missing):
    data = {k: v for k, v in GOOD.items() if k != missing}
    with pytest.raises(InputError, match=f"missing config key 'sec.{missing}'"):
        from_dict(Section, data, "sec")
    assert not jsonschema.Draft202012Validator(json_schema(Section)).is_valid(data)


def test_unknown_key_lists_the_allowed_ones():
    with pytest.raises(InputError, match=r"unknown config key 'sec.widht' \(allowed: .*width"):
        from_dict(Section, {**GOOD, "widht": 3}, "sec")


def _write(tmp_path, name, body):
    path = tmp_path / "methods" / name / "config.py"
    path.parent.mkdir(parents=True)
    path.write_text(body)


def test_check_scale_loads_sections_by_path_and_names_file_and_key(tmp_path):
    _write(tmp_path, "toy_a", "from dataclasses import dataclass\nfrom methods.core.config import PosInt\n\n"
                              "@dataclass\nclass Config:\n    n: PosInt\n")
    (tmp_path / "methods" / "core" / "model_pool").mkdir(parents=True)
    (tmp_path / "methods" / "core" / "model_pool" / "config.py").write_text(
        "from dataclasses import dataclass\n\n@dataclass\nclass Config:\n    members: list[str]\n")
    data = {"runtime": {"device": "cpu", "dtype": "fp32", "master_fp32": True, "compile": False, "seed": 0,
                        "distributed": "ddp"},
            "model_pool": {"members": ["s"]}, "toy_a": {"n": 2}}
    out = check_scale(data, ["toy_a"], "x.yaml", root=tmp_path)
    assert out["toy_a"].n == 2 and out["model_pool"].members == ["s"] and out["runtime"].device == "cpu"
    cases = [({**data, "toy_a": {"n": 0}}, "invalid config in x.yaml: config key 'toy_a.n'"),
             ({**data, "toy_b": {}}, "invalid config in x.yaml: unknown section 'toy_b'"),
             ({k: v for k, v in data.items() if k != "toy_a"}, "invalid config in x.yaml: missing section 'toy_a'"),
             ({**data, "runtime": {**data["runtime"], "dtype": "fp8"}}, "invalid config in x.yaml: config key 'runtime.dtype'")]
    for bad, msg in cases:
        with pytest.raises(InputError) as e:
            check_scale(bad, ["toy_a"], "x.yaml", root=tmp_path)
        assert str(e.value).startswith(msg), str(e.value)
    with pytest.raises(InputError, match="no config declared for section 'toy_c'"):
        section_class("toy_c", root=tmp_path)


def test_the_scale_files_validate_and_the_generated_schema_agrees():
    """Every committed scale file passes `check_scale` (what the workflow runs at parse time)
    and the JSON schema `python -m methods.core schema` generates; a wrong leaf is refused by
    both, naming the dotted key."""
    import copy
    from pathlib import Path

    import yaml

    from methods.core.config import scale_schema
    from methods.core.registry import papers

    root = Path(__file__).resolve().parents[2]
    registered = papers(root)
    schema = jsonschema.Draft202012Validator(scale_schema(registered, root))
    for scale in ("smoke", "tiny", "paper"):
        data = yaml.safe_load((root / "config" / "scales" / f"{scale}.yaml").read_text())
        sections = check_scale(data, registered, scale, root=root)
        optional = {"looks"} & set(data)
        assert set(sections) == {"runtime", "model_pool", *registered, *optional}
        schema.validate(data)
        bad = copy.deepcopy(data)
        bad["lfq"]["base"]["model"]["n_layers"] = 0
        with pytest.raises(InputError, match=r"config key 'lfq\.base\.model\.n_layers'"):
            check_scale(bad, registered, scale, root=root)
        assert not schema.is_valid(bad)
    tiny = yaml.safe_load((root / "config" / "scales" / "tiny.yaml").read_text())
    for looks, message in (({"nopaper": [3]}, r"'looks\.nopaper' is not a registered paper"),
                           ({"rabitqcache": [5, 3]}, r"'looks\.rabitqcache'"),
                           ({"rabitqcache": [3, 99]}, r"caps at 99 seeds")):
        bad = copy.deepcopy(tiny)
        bad["looks"] = looks
        with pytest.raises(InputError, match=message):
            check_scale(bad, registered, "tiny", root=root)
