"""SiameseNorm (ICML 2026): two residual streams, a Pre-Norm-like `y` that is never normalised
and a Post-Norm-like `x` re-normalised before every sub-layer, sharing one set of block weights.

`model.py` holds a tiny Llama-style decoder (RMSNorm, RoPE, SwiGLU, tied embeddings) whose
`norm_scheme` selects Pre-Norm, Post-Norm, or SiameseNorm's variants "post_pre" (A) and
"hybrid_pre" (B). Importing this package registers the architecture with the transformers Auto
classes, so `AutoModelForCausalLM.from_pretrained(dir)` and lm-eval's `hf` model load a saved
directory without `trust_remote_code`.
"""
from .model import NORM_SCHEMES, SiameseNormConfig, SiameseNormForCausalLM, build_siamese_model, expected_num_params  # noqa: F401
