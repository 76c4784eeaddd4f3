"""icml26-repro method packages: `methods.core` (shared) and one package per paper."""
