"""DIBJudge (ICML 2026; arXiv 2603.10351): a judge with a compressed robust channel (Gaussian VIB
or EMA vector quantiser), a bias channel trained on translationese proxy tasks, and a
cross-correlation penalty between the two. Tiny scale: synthetic languages (`synth_lang`), the
judge as a pairwise reward model (`model`), training/eval/probe (`run`), summary (`analysis`)."""
