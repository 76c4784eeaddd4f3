"""CLI of the Verbalized Sampling study: one sub-command per DAG step.

    python -m methods.verbalized_sampling <step> --config '<json>' [files...]

`--config` is the step's section of `config/scales/<scale>.yaml`.
"""
from __future__ import annotations

import dataclasses
import functools
import json
import sys
import time
from pathlib import Path

from methods.core import cli
from methods.core.config import from_dict, from_json
from methods.core.results import InputError, read_json, read_jsonl, write_json, write_jsonl, write_metrics

from . import config as C


def _world_cfg(a):
    return from_json(C.WorldConfig, a.config, "world")


def _synth(a):
    from .world import build_world, preferences

    cfg = _world_cfg(a)
    world = build_world(cfg)
    world["alpha"] = cfg.alpha
    out = Path(a.out)
    write_json(out / "world.json", world)
    write_jsonl(out / "prefs.jsonl", preferences(world, cfg))


def _theory(a):
    from .typicality import fit_alpha, sharpen_table

    cfg = from_json(C.TheoryConfig, a.config, "theory")
    d = Path(a.data)
    world, prefs = read_json(d / "world.json"), read_jsonl(d / "prefs.jsonl")
    t0 = time.perf_counter()
    res = {"alpha": fit_alpha(prefs, world), "sharpen": sharpen_table(world, world["alpha"], cfg.betas)}
    write_metrics(a.out, res, json.loads(a.config), None, time.perf_counter() - t0)


def _pretrain(a):
    from methods.core.models import save_model

    from .lm import pretrain

    cli.set_threads(a.threads)
    cfg = from_json(C.PretrainConfig, a.config, "pretrain")
    world = read_json(Path(a.data) / "world.json")
    model, tok, rows = pretrain(world, cfg, log_path=Path(a.out + ".log.jsonl"))
    save_model(model, tok, a.out)


def _dpo(a):
    from methods.core.models import load_model, save_model

    from .lm import dpo

    cli.set_threads(a.threads)
    cfg = from_json(C.DPOConfig, a.config, "dpo")
    d = Path(a.data)
    world, prefs = read_json(d / "world.json"), read_jsonl(d / "prefs.jsonl")
    model, tok = load_model(a.base, training=True)
    model, _ = dpo(model, tok, world, prefs, cfg, log_path=Path(a.out + ".log.jsonl"))
    save_model(model, tok, a.out)


def _sample(a):
    from .lm import pool_logprobs, sample_methods, tiny_backend

    cli.set_threads(a.threads)
    raw = json.loads(a.config)
    # the workflow passes `generator` = this model's entry of the scale file's sample.generators
    generator = raw.pop("generator", None)
    gen = None if generator is None else from_dict(C.VsGenerator, generator, "sample.generator")
    cfg = from_dict(C.SampleConfig, raw, "sample")
    world = read_json(Path(a.data) / "world.json")
    t0 = time.perf_counter()
    if gen is not None and gen.backend:  # paper scale: a real LLM (HTTP / hub id)
        from methods.core.llm import make_llm

        llm, lp = make_llm({k: v for k, v in dataclasses.asdict(gen).items() if v is not None and k != "serve"}), None
    else:
        from methods.core.models import load_model

        if not a.model:
            raise InputError("sample: --model (the tiny LM directory) is required when sample.generator has no backend")
        model, tok = load_model(a.model)
        llm = tiny_backend(model, tok)
        lp = pool_logprobs(llm, world)
    rows = sample_methods(llm, world, cfg)
    served = None
    if gen is not None and gen.backend:  # the real model that answered and the sampling (no API key)
        from methods.core.llm import llm_provenance

        served = llm_provenance(llm, {k: getattr(cfg, k) for k in ("temperature", "top_p", "max_new_tokens", "n", "seed")})
    write_metrics(a.out, {"samples": rows, "pool_logprobs": lp}, json.loads(a.config), cfg.seed,
                  time.perf_counter() - t0, llm=served)


def _analyze(a):
    import numpy as np

    from .analysis import claim_metrics, figure, metric_rows, retention_gain_interval, sim_threshold_sweep
    from .lm import fitted_gamma

    cfg = from_json(C.AnalysisConfig, a.config, "analysis")
    world = read_json(Path(a.data) / "world.json")
    theory = read_json(a.theory)
    theory["dpo_beta"] = a.dpo_beta
    base, aligned = read_json(a.base), read_json(a.aligned)
    embedder = None
    if cfg.embed:
        from methods.core.llm import Embedder

        embedder = Embedder()
    embs: dict = {}
    rows = metric_rows({"base": base["samples"], "aligned": aligned["samples"]}, world, embedder, embs)
    have_lp = bool(base.get("pool_logprobs") and aligned.get("pool_logprobs"))
    gamma = fitted_gamma(aligned["pool_logprobs"], base["pool_logprobs"], world) if have_lp else float("nan")
    # guard of C3a: the base LM's slope on log pi_ref (it must have learned the reference distribution)
    log_ref = {t: np.log(np.asarray(world["p_ref"][t])).tolist() for t in world["topics"]}
    base_slope = fitted_gamma(base["pool_logprobs"], log_ref, world) if have_lp else float("nan")
    sweep = sim_threshold_sweep(world, cfg)
    c4_iv = retention_gain_interval(embs, world["topics"], cfg.bootstrap, cfg.seed) if embs else None
    metrics = claim_metrics(theory, rows, gamma, sweep, world["alpha"], cfg, base_slope, c4_iv)
    write_metrics(a.table, {"rows": rows, "sweep": sweep}, json.loads(a.config))
    write_metrics(a.summary, metrics, json.loads(a.config))
    figure(theory, rows, sweep, a.figure,
           "Verbalized Sampling, tiny scale. Left: tabular DPO on preferences with planted typicality "
           "weight α: log π_aligned is linear in log π_ref with slope γ = 1+α/β (C1). Middle: MiniLM "
           "semantic diversity of the tiny LM's samples per prompting method, base vs DPO-aligned "
           "(C3/C4). Right: Coverage-N of a simulated VS model (SimBackend) as the verbalized "
           "probability threshold p is lowered (C5).")


def build_parser():
    p, sub = cli.subcommands("verbalized_sampling", __doc__.splitlines()[0])
    step = functools.partial(cli.config_step, sub)
    s = step("synth", _synth, "synthetic world + preference pairs with planted alpha", "out")
    s.set_defaults(writes_data="out")  # a data directory: cli writes its MANIFEST.json
    step("theory", _theory, "alpha estimator and tabular sharpening", "data", "out")
    step("pretrain", _pretrain, "pre-train the tiny base LM", "data", "out", threads=True)
    s = step("dpo", _dpo, "DPO-align the base LM", "data", "base", "out", threads=True)
    s = step("sample", _sample, "sample every method through the backend layer", "data", "out", threads=True)
    s.add_argument("--model", help="the DAG's tiny LM directory (required when the generator has no backend)")
    s = step("analyze", _analyze, "metrics, C5 simulation, claim metrics, figure", "data",
             "theory", "base", "aligned", "table", "summary", "figure")
    s.add_argument("--dpo-beta", type=float, required=True)
    return p


if __name__ == "__main__":
    sys.exit(cli.main(build_parser()))
