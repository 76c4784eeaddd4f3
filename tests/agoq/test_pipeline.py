"""The closed-form 1F1B stage-memory model (pipeline-stage policy, claim A5)."""
from methods.agoq.pipeline import stage_aware_bits, stage_memory, table

SHARES = {"norm": 0.2, "attn_in": 0.044, "attn_core": 0.18, "o_in": 0.044, "mlp_in": 0.044,
          "mlp_inner": 0.357, "down_in": 0.12, "head": 0.011}


def test_uniform_bits_give_p_minus_i():
    assert stage_memory(4, [16.0] * 4) == [4.0, 3.0, 2.0, 1.0]
    rows = {(r["p"], r["scheme"]): r for r in table(SHARES)}
    assert rows[(4, "uniform4")]["max_over_min"] == 4.0
    assert abs(rows[(8, "uniform16")]["max_over_min"] - 8.0) < 1e-12


def test_stage_aware_balances_p4():
    bits = stage_aware_bits(4, SHARES)
    assert bits == sorted(bits)  # earlier stages get fewer bits
    mem = stage_memory(4, bits)
    assert max(mem) / min(mem) <= 1.5
    assert min(bits) >= 2.25 and max(bits) <= 8.25  # {2,4,8} + 0.25 bit of scale/zero per element
