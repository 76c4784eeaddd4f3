import pytest

from methods.pse.sim import SimAgent, SimParams

CARD = dict(susceptibility={"factual": 0.6, "preference": 0.9, "persona": 0.8, "instruction": 0.85},
            trigger_gain=0.5, p_carry=0.7, hazard={"factual": 0.3}, q=0.25, catch=0.6)


@pytest.fixture
def card_params():
    return {**CARD, "hazard": dict(CARD["hazard"]), "susceptibility": dict(CARD["susceptibility"])}


@pytest.fixture
def sim(card_params):
    return SimAgent(SimParams(**card_params))
