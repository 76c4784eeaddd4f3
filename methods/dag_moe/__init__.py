"""DAG-MoE (ICML 2026, arXiv 2606.01062): structural aggregation of the top-K selected experts.

The router and experts are the plain top-K MoE of `methods.core.moe`; `aggregate` adds a
per-token structure generator that builds a DAG over the K selected experts (strictly upper-
triangular in router-rank order, so acyclic by construction) and runs the experts in K
sequential rounds, each expert reading its predecessors' outputs. `aggregation="sum"` is the
plain weighted-sum MoE. The generator equations are our INFERRED reference design (see
`aggregate.py`), fitting the abstract; the paper's exact equations were not retrievable.
"""
