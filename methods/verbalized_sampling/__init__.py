"""Verbalized Sampling (arXiv 2510.01171): typicality bias, sharpening, VS prompts, metrics."""
