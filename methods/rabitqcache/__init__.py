"""RaBitQCache (ICML 2026, arXiv 2606.31519): RaBitQ 1-bit key codes + INT4 query as an unbiased
proxy of attention logits, adaptive Top-p token selection and sparse attention over the
selected full-precision KV (`rabitq.py`, `selection.py`, `attention.py`; kernel in
`kernels/rabitq.py`). See README.md. Nothing is imported here, so `--help` stays instant."""
