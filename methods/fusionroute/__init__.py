"""FusionRoute (ICML 2026): a small router LM picks one domain expert per decoding step and adds
its own log-probs to the expert's (complementary logits); trained by SFT (LM loss + mixture
routing loss on expert-disagreement tokens) then complemented DPO. See README.md."""
