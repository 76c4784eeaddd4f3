"""AGoQ (arXiv 2605.00539): layer-aware saved-activation quantization (LAAQ, `laaq.py`) and 8-bit
gradient storage + all-reduce (QuanGrad, `quangrad.py`), quantizers in `quant.py`. See README.md.
Nothing is imported here, so `python -m methods.agoq --help` stays instant."""
