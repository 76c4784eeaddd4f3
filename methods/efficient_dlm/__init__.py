"""Efficient-DLM: AR → block-diffusion LM conversion (arXiv 2512.14067)."""
