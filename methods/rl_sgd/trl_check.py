"""Cross-check of our GRPO update against trl's GRPOTrainer (trl 1.16).

One tiny HF LlamaForCausalLM; trl runs ONE training step (on-policy, β = 0, optim "sgd",
constant lr, no grad clipping, loss_type "dapo" = token-level normalisation, std-scaled group
advantages). A reward function records the completions trl sampled. Our loop then takes
the same starting weights, the same prompts and those completions, computes
`core.rl.group_advantages` + `grpo.loss_of` (loss_norm "token", no zero-variance skipping, as trl)
and one torch SGD step. The two weight updates are compared. The reward is a synthetic
verifiable one (first completion character is one of 0-4) so that a random model gets
mixed rewards within a group.
"""
from __future__ import annotations

import tempfile

from . import task
from .config import GRPOConfig as OurGRPOConfig, TrlCheckConfig


def _reward(completions, **kw):
    return [1.0 if c[:1] in "01234" and c[:1] != "" else 0.0 for c in completions]


def compare(cfg: TrlCheckConfig) -> dict:
    import copy
    import os

    import torch
    from datasets import Dataset
    from transformers import LlamaConfig, LlamaForCausalLM
    from trl import GRPOConfig, GRPOTrainer

    from methods.core import rl
    from methods.core.tokenizer import train_tokenizer

    from . import grpo, optim

    os.environ.setdefault("WANDB_DISABLED", "true")
    tok = train_tokenizer([task.VOCAB], "char")
    torch.manual_seed(cfg.seed)
    model = LlamaForCausalLM(LlamaConfig(
        vocab_size=len(tok), hidden_size=cfg.width, intermediate_size=2 * cfg.width,
        num_hidden_layers=cfg.n_layers, num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=32,
        pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id, bos_token_id=tok.eos_token_id))
    before = copy.deepcopy(model)
    init_weights = {k: v.detach().clone() for k, v in model.state_dict().items()}
    pairs = [(12 + 7 * i, 30 + 3 * i) for i in range(cfg.n_prompts)]
    ds = Dataset.from_list([{"prompt": task.add_prompt(a, b)} for a, b in pairs])
    seen = {}

    def reward(prompts, completions, completion_ids, **kw):
        seen.setdefault("prompts", list(prompts))
        seen.setdefault("completion_ids", [list(c) for c in completion_ids])
        seen.setdefault("completions", list(completions))
        return _reward(completions)

    with tempfile.TemporaryDirectory() as tmp:
        args = GRPOConfig(output_dir=tmp, use_cpu=True, bf16=False, fp16=False, optim="sgd", learning_rate=cfg.lr,
                          lr_scheduler_type="constant", warmup_steps=0, max_grad_norm=0.0, weight_decay=0.0,
                          num_generations=cfg.group_size, per_device_train_batch_size=cfg.group_size * cfg.n_prompts,
                          max_completion_length=cfg.max_new, beta=0.0, loss_type="dapo", scale_rewards="group",
                          max_steps=1, report_to="none", logging_steps=1, save_strategy="no", seed=cfg.seed,
                          temperature=1.0, shuffle_dataset=False, disable_tqdm=True)
        trainer = GRPOTrainer(model=model, reward_funcs=reward, args=args, train_dataset=ds, processing_class=tok)
        trainer.train()
    trl_after = {k: v.detach().clone() for k, v in trainer.model.state_dict().items()}
    # our loop on the same weights, prompts and completions
    ours = before
    # our loss as trl computes it: token normalisation, no zero-variance skipping, β = 0 (steps,
    # n_prompts, temperature, max_new, log_every and the optimizer keys are unused here)
    gcfg = OurGRPOConfig(steps=40, n_prompts=16, group_size=cfg.group_size, temperature=1.0, max_new=4, adv_eps=1e-4,
                         skip_zero_var=False, loss_norm="token", clip_lo=0.2, clip_hi=0.2, beta=0.0,
                         betas=[0.9, 0.999], weight_decay=0.01, momentum=0.9, log_every=10)
    prompt_ids = torch.tensor([tok(p, add_special_tokens=False)["input_ids"] for p in seen["prompts"]])
    comps = seen["completion_ids"]
    T = max(map(len, comps))
    comp = torch.tensor([c + [tok.pad_token_id] * (T - len(c)) for c in comps])
    mask = torch.tensor([[1.0] * len(c) + [0.0] * (T - len(c)) for c in comps])
    rewards = torch.tensor(_reward(seen["completions"]))
    adv = rl.group_advantages(rewards, cfg.group_size, gcfg.adv_eps)
    ours.train()
    # trl runs the policy in train mode with no dropout; same here
    logp = rl.completion_logprobs(ours, prompt_ids, comp)
    loss = grpo.loss_of(logp, logp.detach(), adv, mask, gcfg)
    opt = optim.make("sgd", ours.parameters(), cfg.lr)
    opt.zero_grad()
    loss.backward()
    opt.step()
    d_ours = {k: v - init_weights[k] for k, v in ours.state_dict().items()}
    d_trl = {k: trl_after[k] - init_weights[k] for k in d_ours}
    diff = sum(float((d_ours[k] - d_trl[k]).pow(2).sum()) for k in d_ours) ** 0.5
    norm = sum(float(d_trl[k].pow(2).sum()) for k in d_ours) ** 0.5
    rel = diff / norm if norm > 0 else float("nan")
    return {"update_rel_diff": rel, "update_norm_trl": norm, "update_norm_ours":
            sum(float(v.pow(2).sum()) for v in d_ours.values()) ** 0.5, "our_loss": float(loss.item()),
            "rewards": rewards.tolist(), "completions": seen["completions"], "tol": cfg.tol,
            "match": bool(norm > 0 and rel <= cfg.tol)}
