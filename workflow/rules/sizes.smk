# GPU job sizing shared by the papers' sizers. Each torch step's sizer, `<rule>_job(wc)` → the R.Job
# (methods/core/resources.py) of the step at a GPU scale, from its configured model and the workload
# of the scale's section (steps x batch x seq for training, items x tokens for evaluation;
# R.PROMPT_TOKENS / R.SEQ_TOKENS where the config gives no length), or None where the job needs no
# GPU (a pointer to a hub id, an HTTP client), lives with its paper in
# workflow/rules/helpers/<slug>.smk. Rules use them through `sized` and `runtime_of` (common.smk).
# Included after common.smk and before every rules file.


def own_or_hub(hub_id, model, vocab=R.CHAR_VOCAB):
    """A step's model: the hub model where the config names one, else its own `model:` shape."""
    return hub_spec(hub_id) if hub_id else R.spec_from_config(model, vocab)


def train_tokens(train, seq):
    """Tokens a `train:` section (steps x batch_size sequences) trains on at sequence length seq."""
    return train["steps"] * train["batch_size"] * seq


def tiny_train_job(m, label):
    """A model trained here from its own `model:` and `train:` sections (smoke/tiny pool members,
    the verifier, SCOPE's extra members)."""
    seq = m["model"]["max_seq_len"]
    return R.train_job(
        R.spec_from_config(m["model"], R.CHAR_VOCAB),
        tokens=train_tokens(m["train"], seq),
        seq=seq,
        batch=m["train"]["batch_size"],
        label=label,
    )
