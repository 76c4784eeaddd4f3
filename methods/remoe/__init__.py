"""ReMoE (arXiv 2605.27081): router-only fine-tuning for token-wise expert reuse in offloaded
MoE inference. Not thu-ml/ReMoE (ReLU routing, ICLR 2025)."""
