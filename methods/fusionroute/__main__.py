"""CLI of FusionRoute: one sub-command per DAG step.

    python -m methods.fusionroute <step> --config '<json>' [files...]

`--config` is the step's section of `config/scales/<scale>.yaml` (with the `hub` section beside
it under the key `hub`).
"""
from __future__ import annotations

import functools
import json
import sys

from methods.core import cli
from methods.core.config import from_json
from methods.core.results import InputError, write_json, write_metrics, write_text


def _split(a):
    from .config import Hub

    d = json.loads(a.config)
    if not isinstance(d, dict) or "hub" not in d:
        raise InputError("missing config key 'hub' (the fusionroute.hub section, passed beside the step's)")
    hub = from_json(Hub, json.dumps(d.pop("hub")), "hub")
    return json.dumps(d), hub


def _data(a):
    from .config import DataConfig, is_paper
    from .data import build, build_hub

    if "hub" in json.loads(a.config):   # paper scale: the rule passes the hub section beside the data's
        cfg, hub = _split(a)
        if is_paper(hub, "data"):
            print(f"data: {build_hub(from_json(DataConfig, cfg, 'data'), hub, a.out)}", file=sys.stderr)
            return
        a.config = cfg
    print(f"data: {build(from_json(DataConfig, a.config, 'data'), a.out)}", file=sys.stderr)


def _expert(a):
    from .config import ExpertConfig
    from .experts import train_expert

    cli.set_threads(a.threads)
    cfg, hub = _split(a)
    info = train_expert(from_json(ExpertConfig, cfg, "expert"), a.domain, a.seed, a.data, a.out, hub)
    print(f"expert {a.domain}: final loss {info.get('final_loss')}", file=sys.stderr)


def _sft(a):
    from .config import RouterConfig
    from .router import sft_router

    cli.set_threads(a.threads)
    cfg, hub = _split(a)
    info = sft_router(from_json(RouterConfig, cfg, "router"), a.seed, a.data, a.experts, a.out, hub)
    print(f"router sft: lm {info['final_lm_loss']:.4f} route {info['final_route_loss']:.4f}", file=sys.stderr)


def _cdpo(a):
    from .cdpo import cdpo
    from .config import CDPOConfig, EvalConfig

    cli.set_threads(a.threads)
    cfg, hub = _split(a)
    d = json.loads(cfg)
    ev = from_json(EvalConfig, json.dumps(d.pop("eval", None)), "eval")   # missing: a one-line error
    info = cdpo(from_json(CDPOConfig, json.dumps(d), "cdpo"), ev, a.data, a.experts, a.router,
                a.out, a.prefs, hub)
    print(f"cdpo: frac rejected = model output {info['frac_rejected_model_output']:.2f}", file=sys.stderr)


def _evaluate(a):
    import time

    from .config import EvalConfig
    from .evaluate import evaluate

    cli.set_threads(a.threads)
    cfg, hub = _split(a)
    t0 = time.perf_counter()
    res = evaluate(from_json(EvalConfig, cfg, "eval"), a.data, a.experts, a.sft, a.cdpo, a.out, hub)
    write_metrics(a.out, res, json.loads(a.config), None, time.perf_counter() - t0)


def _aggregate(a):
    from methods.core.results import read_json

    from .report import claim_metrics, plot, table

    d = json.loads(a.config)
    if not isinstance(d, dict) or not isinstance(d.get("seeds"), list):
        raise InputError("aggregate: config must be {\"seeds\": [...]} (fusionroute.seeds)")
    evals = [read_json(p) for p in a.evals]
    write_json(a.summary, claim_metrics(evals, d["seeds"]))
    write_text(a.table, table(evals, d["seeds"]))
    plot(evals, a.figure)


def build_parser():
    p, sub = cli.subcommands("fusionroute", __doc__.splitlines()[0])
    step = functools.partial(cli.config_step, sub)
    s = step("data", _data, "generate add/rev/brk/comp data and the char tokenizer", "out")
    s.set_defaults(writes_data="out")  # a data directory: cli writes its MANIFEST.json
    s = step("expert", _expert, "train one domain expert", "data", "out", "domain", threads=True)
    s.add_argument("--seed", type=int, required=True)
    s = step("sft", _sft, "router SFT: LM loss + routing loss on informative positions", "data", "out", threads=True)
    s.add_argument("--experts", nargs="+", required=True)
    s.add_argument("--seed", type=int, required=True)
    s = step("cdpo", _cdpo, "preference pairs from SFT-FusionRoute, then complemented DPO",
             "data", "router", "out", "prefs", threads=True)
    s.add_argument("--experts", nargs="+", required=True)
    s = step("evaluate", _evaluate, "exact match of every system on every test prompt, costs (one replicate)",
             "data", "sft", "cdpo", "out", threads=True)
    s.add_argument("--experts", nargs="+", required=True)
    s = step("aggregate", _aggregate, "claim metrics over the replicates (per-seed values, unit seed), table, figure",
             "summary", "table", "figure")
    s.add_argument("--evals", nargs="+", required=True)
    return p


if __name__ == "__main__":
    sys.exit(cli.main(build_parser()))
