"""SCOPE (arXiv 2601.22323): anchor-conditioned outcome estimator + alpha-controlled routing."""
