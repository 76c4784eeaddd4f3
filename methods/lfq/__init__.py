"""LFQ: Logit-aware Final-block Quantization on top of block-wise PTQ (arXiv 2605.29756).

Baselines (RTN, GPTQ, OmniQuant-LWC) in `ptq`, the final-block objectives (MSE, logit MSE,
LFQ's soft cross-entropy) in `final_block`, the quantizer in `quantizer`; see README.md.
"""
