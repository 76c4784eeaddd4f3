"""Weight Decay Improves Language Model Plasticity (arXiv 2602.11137): a λ sweep of AdamW
pretraining, SFT on downstream tasks, lm-eval evaluation, and mechanistic probes.

Public API (importable without Snakemake): `world.build`, `pretrain.pretrain`,
`finetune.finetune`, `downstream.evaluate_base`, `probes.run_probes`,
`analysis.table` / `analysis.claim_metrics`. Modules are imported lazily by the CLI so a step
only loads what it needs.
"""
