"""ASAG (ICML 2026): attention-state adaptive generation — a training-free early-stopping
controller for reasoning models (answer-confidence probe from DEER + attention-entropy change).

`data.py` builds the synthetic over-thinking traces and the word-level vocabulary,
`signals.py` holds attention entropy, the trap test and the DEER/ASAG decision rules (pure
functions), `decode.py` the greedy KV-cache decoding loop with the controller, `analysis.py`
the table, claim metrics and figure.
"""
