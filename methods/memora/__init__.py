"""Memora (arXiv 2602.03315): harmonic memory with primary abstractions and cue anchors."""
