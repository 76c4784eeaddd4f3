"""The DAG-MoE language model: a Llama decoder whose FFN in every layer is an `AggregatedMoE`.

Everything but the FFN is transformers' Llama (RMSNorm, RoPE, attention, tied embeddings),
so a checkpoint is a `save_pretrained` directory that `AutoModelForCausalLM.from_pretrained`
loads once this module is imported (registered with the Auto classes, no remote code).

Tiny architectures (d = 64, L = 2; our choice): moe_sum N=8/K=2/d_ff=128; moe_fine N=16/K=4/d_ff=64;
dag_moe and dag_moe_K4 are the same two with aggregation "dag". Each layer's wrapper keeps
its last `MoEOutput` (routing, edges, aux loss) so the loss and the probes can read it.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from transformers import LlamaConfig, LlamaForCausalLM, LlamaModel, LlamaPreTrainedModel, initialization as init
from transformers.modeling_outputs import MoeCausalLMOutputWithPast

from methods.core.models import ModelConfig, register_arch
from methods.core.moe import SwiGLUExperts
from methods.core.results import InputError
from methods.dag_moe.config import ArchConfig, MoEConfig

from .aggregate import AGGREGATIONS, AggregatedMoE, generator_params, n_edges


class DagMoEConfig(LlamaConfig):
    """LlamaConfig plus the MoE FFN. `intermediate_size` is unused (each layer's FFN is MoE)."""
    model_type = "icml26_dag_moe"

    def __init__(self, n_experts: int = 8, moe_k: int = 2, expert_d_ff: int = 128,
                 aggregation: str = "sum", edge_bias_init: float = 0.0,
                 edge_weight_init_std: float = 0.0, edge_mode: str = "soft",
                 dispatch: str = "sorted", router_renormalize: bool = True,
                 aux_loss_coef: float = 1e-2, **kw):
        if aggregation not in AGGREGATIONS:
            raise InputError(f"config key 'aggregation': {aggregation!r} not in {AGGREGATIONS}")
        self.n_experts, self.moe_k, self.expert_d_ff = n_experts, moe_k, expert_d_ff
        self.aggregation, self.edge_bias_init = aggregation, edge_bias_init
        self.edge_weight_init_std, self.edge_mode = edge_weight_init_std, edge_mode
        self.dispatch, self.router_renormalize = dispatch, router_renormalize
        self.aux_loss_coef = aux_loss_coef
        super().__init__(**kw)


class MoEFFN(nn.Module):
    """Drop-in for `LlamaMLP`: returns the MoE output tensor and keeps the full `MoEOutput`."""

    def __init__(self, c: DagMoEConfig):
        super().__init__()
        self.block = AggregatedMoE(c.hidden_size, c.n_experts, c.moe_k, c.expert_d_ff,
                                   c.aggregation, c.edge_bias_init, c.edge_weight_init_std,
                                   c.edge_mode, dispatch=c.dispatch,
                                   renormalize=c.router_renormalize)
        self.block.moe.router.proj._dag_moe_role = "router"  # see _MoEInit
        if self.block.generator is not None:
            self.block.generator.proj._dag_moe_role = "generator"
        self.mask: torch.Tensor | None = None  # (B·S,) padding mask for the aux loss, set per call
        self.last = None                       # MoEOutput of the last forward

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        mask = self.mask if self.mask is not None and self.mask.numel() == x.shape[:-1].numel() else None
        self.last = self.block(x, mask)
        return self.last.y


class _MoEInit:
    """`_init_weights` for the MoE parts. transformers initialises every PreTrainedModel
    sub-model with its own `_init_weights`, so both the inner model and the LM head class use
    this. For custom code it skips modules without direct parameters, so the router's and the
    generator's nn.Linear carry a `_dag_moe_role` tag (set in MoEFFN) that picks their init,
    applied after the generic nn.Linear one; the experts keep methods.core.moe's fan-in init."""

    def _init_weights(self, module):
        super()._init_weights(module)
        c = self.config
        role = getattr(module, "_dag_moe_role", None)
        if isinstance(module, SwiGLUExperts):
            init.normal_(module.w_gate, std=module.d ** -0.5)
            init.normal_(module.w_up, std=module.d ** -0.5)
            init.normal_(module.w_down, std=module.d_ff ** -0.5)
        elif role == "router":
            init.normal_(module.weight, std=module.in_features ** -0.5)
        elif role == "generator":
            if c.edge_weight_init_std > 0:
                init.normal_(module.weight, std=c.edge_weight_init_std)
            else:
                init.zeros_(module.weight)
            init.constant_(module.bias, c.edge_bias_init)


class DagMoEModel(_MoEInit, LlamaModel):
    config_class = DagMoEConfig

    def __init__(self, config: DagMoEConfig):
        super().__init__(config)
        for layer in self.layers:  # the MoE replaces Llama's dense SwiGLU
            layer.mlp = MoEFFN(config)
        self.post_init()  # initialises only the new modules (the others are marked done)


class DagMoEForCausalLM(_MoEInit, LlamaForCausalLM):
    config_class = DagMoEConfig

    def __init__(self, config: DagMoEConfig):
        LlamaPreTrainedModel.__init__(self, config)  # LlamaForCausalLM's body, with our inner model
        self.model = DagMoEModel(config)
        self.vocab_size = config.vocab_size
        self.lm_head = nn.Linear(config.hidden_size, config.vocab_size, bias=False)
        self.post_init()

    def moe_layers(self) -> list[MoEFFN]:
        return [layer.mlp for layer in self.model.layers]

    def forward(self, input_ids=None, attention_mask=None, labels=None, **kw):
        mask = None if attention_mask is None else attention_mask.reshape(-1)
        for m in self.moe_layers():
            m.mask = mask
        out = super().forward(input_ids=input_ids, attention_mask=attention_mask, labels=labels, **kw)
        lasts = [m.last for m in self.moe_layers()]
        # inferred: the usual Switch/GShard balancing loss per layer, averaged over layers
        aux = torch.stack([o.aux_loss for o in lasts]).mean()
        loss = out.loss
        if loss is not None:  # transformers' own (unshifted-labels) path: add the aux term too
            loss = loss + self.config.aux_loss_coef * aux
        return MoeCausalLMOutputWithPast(loss=loss, aux_loss=aux, logits=out.logits,
                                         cache=out.cache, hidden_states=out.hidden_states,
                                         attentions=out.attentions,
                                         router_logits=tuple(o.router_logits for o in lasts))

    def routing(self) -> list[dict]:
        """Per layer, from the last forward: top-k expert ids (T, K) and edges (T, K, K) or None."""
        return [{"topk_idx": m.last.topk_idx,
                 "edges": None if m.last.extras is None else m.last.extras["edges"]}
                for m in self.moe_layers()]


register_arch(DagMoEConfig, DagMoEForCausalLM)


# ------------------------------------------------------------------ building blocks ----
def dag_moe_config(m: ModelConfig, arch: ArchConfig, moe: MoEConfig, vocab_size: int,
                   pad_id: int | None = None, eos_id: int | None = None) -> DagMoEConfig:
    if m.d_model % m.n_heads:
        raise InputError(f"d_model {m.d_model} is not divisible by n_heads {m.n_heads}")
    if not 1 <= arch.k <= arch.n_experts:
        raise InputError(f"arch: need 1 <= k={arch.k} <= n_experts={arch.n_experts}")
    if arch.aggregation not in AGGREGATIONS:
        raise InputError(f"arch: aggregation {arch.aggregation!r} not in {AGGREGATIONS}")
    return DagMoEConfig(
        n_experts=arch.n_experts, moe_k=arch.k, expert_d_ff=arch.d_ff,
        aggregation=arch.aggregation, edge_bias_init=moe.edge_bias_init,
        edge_weight_init_std=moe.edge_weight_init_std, edge_mode=moe.edge_mode,
        dispatch=moe.dispatch, router_renormalize=moe.router_renormalize,
        aux_loss_coef=moe.aux_loss_coef,
        vocab_size=vocab_size, hidden_size=m.d_model, intermediate_size=arch.d_ff,
        num_hidden_layers=m.n_layers, num_attention_heads=m.n_heads,
        num_key_value_heads=m.n_kv_heads or m.n_heads, max_position_embeddings=m.max_seq_len,
        rms_norm_eps=m.norm_eps, rope_parameters={"rope_type": "default", "rope_theta": m.rope_theta},
        tie_word_embeddings=m.tie_embeddings, initializer_range=m.init_std,
        attention_bias=False, mlp_bias=False, use_cache=True,
        pad_token_id=pad_id, eos_token_id=eos_id, bos_token_id=eos_id)


def build(cfg: DagMoEConfig, seed: int) -> DagMoEForCausalLM:
    """A freshly initialised model; the init depends on `seed` only."""
    torch.manual_seed(seed)
    model = DagMoEForCausalLM(cfg)
    model.config._attn_implementation = "sdpa"
    return model


def moe_loss(model: DagMoEForCausalLM, batch: dict) -> torch.Tensor:
    """Training objective (train's `loss_fn`): next-token CE on pre-shifted labels (-100 ignored)
    + α · mean-over-layers load-balancing loss."""
    out = model(input_ids=batch["input_ids"], attention_mask=batch.get("attention_mask"))
    ce = F.cross_entropy(out.logits.float().flatten(0, 1), batch["labels"].flatten(), ignore_index=-100)
    return ce + model.config.aux_loss_coef * out.aux_loss


# ---------------------------------------------------------------- closed forms (D3) ----
def param_counts(c: DagMoEConfig) -> dict:
    """Closed-form parameter counts. Active = what one token uses: K of the N experts."""
    d, L, V = c.hidden_size, c.num_hidden_layers, c.vocab_size
    hd = d // c.num_attention_heads
    attn = d * c.num_attention_heads * hd * 2 + d * c.num_key_value_heads * hd * 2  # q,o + k,v
    router = c.n_experts * d
    expert = 3 * d * c.expert_d_ff
    gen = generator_params(d, c.moe_k) if c.aggregation == "dag" else 0
    norms = 2 * d * L + d
    emb = V * d * (1 if c.tie_word_embeddings else 2)
    shared = emb + norms + L * (attn + router + gen)
    return {"total": shared + L * c.n_experts * expert, "active": shared + L * c.moe_k * expert,
            "generator": L * gen, "experts_total": L * c.n_experts * expert}


def flops_per_token(c: DagMoEConfig, seq_len: int) -> dict:
    """Forward FLOPs per token (2 per multiply-add; Kaplan-style counting of matmuls, with
    attention scores at full `seq_len` as torch's FlopCounterMode counts sdpa).

    `moe_matmul` is what FlopCounterMode sees in one MoE layer (router, K experts, and for
    "dag" the generator projection and the message contraction in_k = x + Σ_j A_jk o_j);
    `dag_elementwise` adds the generator's sigmoid and the message additions, which are not
    matmuls. `moe_layer` = both; `model` = the whole forward.
    """
    d, K, E, ff = c.hidden_size, c.moe_k, c.n_experts, c.expert_d_ff
    hd = d // c.num_attention_heads
    router = 2 * d * E
    experts = K * 2 * 3 * d * ff
    dag = c.aggregation == "dag"
    gen = 2 * d * n_edges(K) if dag else 0
    messages = 2 * d * n_edges(K) if dag else 0          # Σ_k 2·d·(k−1): the einsum
    elementwise = (n_edges(K) + (K - 1) * d) if dag else 0  # sigmoids + "x +" per round
    moe_matmul = router + experts + gen + messages
    proj = 2 * d * (2 * c.num_attention_heads * hd + 2 * c.num_key_value_heads * hd)
    scores = 2 * 2 * seq_len * c.num_attention_heads * hd  # QKᵀ and AV
    head = 2 * d * c.vocab_size
    layer = proj + scores + moe_matmul + elementwise
    return {"moe_matmul": moe_matmul, "dag_elementwise": elementwise,
            "moe_layer": moe_matmul + elementwise,
            "model": c.num_hidden_layers * layer + head}


__all__ = ["DagMoEConfig", "DagMoEForCausalLM", "MoEFFN", "ArchConfig", "MoEConfig",
           "dag_moe_config", "build", "moe_loss", "param_counts", "flops_per_token"]
