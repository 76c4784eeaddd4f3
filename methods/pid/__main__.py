"""CLI of the PID study (decision-level partial information decomposition): one sub-command
per DAG step.

    python -m methods.pid <step> --config '<json>' [files...]

`--config` is the step's section of `config/scales/<scale>.yaml` (as JSON).
"""
from __future__ import annotations

import functools
import json
import sys
import time
from pathlib import Path

from methods.core import cli
from methods.core.config import from_dict, from_json
from methods.core.results import InputError, atomic_path, read_json, write_metrics

from .config import Hub


def _save_npz(path, tree: dict):
    import numpy as np

    flat = {f"{a}/{b}": v for a, d in tree.items() for b, v in d.items()}
    with atomic_path(path) as tmp:
        with open(tmp, "wb") as f:
            np.savez_compressed(f, **flat)


def _load_npz(path) -> dict:
    from methods.core.safeload import load_npz

    out: dict = {}
    for k, v in load_npz(path).items():
        if "/" not in k:
            raise InputError(f"npz file {path}: array {k!r} is not named '<group>/<name>'")
        a, b = k.split("/", 1)
        out.setdefault(a, {})[b] = v
    return out


def _data(a):
    from .synth import DataConfig, build

    cfg = from_json(DataConfig, a.config, "data")
    if cfg.hub.get("vl_models"):
        return _data_hub(a, cfg)
    d = build(cfg)
    _save_npz(a.out, d)
    print(f"data: { {k: len(v['y']) for k, v in d.items()} }", file=sys.stderr)


def _hub_cfg(cfg) -> Hub:
    return from_dict(Hub, cfg.hub if not isinstance(cfg, dict) else cfg["hub"], "hub")


def _data_hub(a, cfg):
    """Paper scale: every benchmark's items (profile / train / test) from the hub through `datasets`."""
    from .hub import load_benchmark, pack

    hub = _hub_cfg(cfg)
    if not hub.benchmarks:
        raise InputError("data: hub.vl_models is set but hub.benchmarks is empty")
    names = [b.name for b in hub.benchmarks]
    if len(set(names)) != len(names):
        raise InputError(f"data: hub.benchmarks names a benchmark twice ({names})")
    tree = {}
    for spec in hub.benchmarks:
        parts = load_benchmark(spec, cfg.n_profile, cfg.n_train, cfg.n_test, cfg.seed)
        for part, items in parts.items():
            if not items:
                raise InputError(f"data: benchmark {spec.name!r} has no {part} items")
            tree[f"{spec.name}:{part}"] = pack(items)
    _save_npz(a.out, tree)
    print(f"data: { {k: len(v['y']) for k, v in tree.items()} }", file=sys.stderr)


def _items(data: dict, bench: str, part: str) -> list:
    from .hub import unpack

    key = f"{bench}:{part}"
    if key not in data:
        raise InputError(f"data file has no {part} items of benchmark {bench!r} (has {sorted(data)})")
    return unpack(data[key])


def _decide_hub(a, full: dict):
    """Paper scale: each hub VL model's decisions on each benchmark's test items under calibrated
    masking (text span, image), BATCH features, accuracy with vision masked."""
    from .config import Data
    from .hub import VLModel, decisions, profile_stats

    hub, dc = _hub_cfg(full), from_dict(Data, full.get("data"), "data")
    data = _load_npz(a.data)
    dec, rows = {}, []
    for i, model_id in enumerate(hub.vl_models):
        vm = VLModel(model_id)
        for spec in hub.benchmarks:
            stats = profile_stats(vm, _items(data, spec.name, "profile"))
            d = decisions(vm, stats, _items(data, spec.name, "test"), dc.seed)
            name = f"m{i}__{spec.name}"
            dec[name] = d
            acc = float((d["p_full"].argmax(1) == d["y"]).mean())
            acc_nv = float((d["p_2"].argmax(1) == d["y"]).mean())
            rows.append({"config": name, "mix": f"m{i}", "checkpoint": spec.name, "model": model_id,
                         "benchmark": spec.name, "n": int(len(d["y"])), "acc": acc, "acc_no_vision": acc_nv,
                         "delta_vision": acc - acc_nv,
                         "acc_no_text": float((d["p_1"].argmax(1) == d["y"]).mean())})
            print(f"decide: {model_id} {spec.name}: acc {acc:.3f}, no vision {acc_nv:.3f}", file=sys.stderr)
        del vm
    _save_npz(a.out, dec)
    write_metrics(a.interventions, {"configs": rows}, full)


def _train_cfg(a):
    from .run import TrainConfig

    cfg = from_json(TrainConfig, a.config, "train")
    return cfg


def _train(a):
    import torch

    cli.set_threads(a.threads)
    cfg = _train_cfg(a)
    if a.mix != "omni" and a.mix not in cfg.mixes:
        raise InputError(f"train: unknown mix '{a.mix}' (train.mixes: {', '.join(cfg.mixes)})")
    if a.seed not in cfg.seeds:
        raise InputError(f"train: seed {a.seed} is not one of train.seeds {cfg.seeds}")
    from .run import train_mix

    states = train_mix(cfg, _load_npz(a.data), a.mix, a.seed)
    with atomic_path(a.out) as tmp:
        torch.save(states, tmp)


def _decide(a):
    import numpy as np

    from methods.core.safeload import load_pt

    from .run import decisions, load

    cli.set_threads(a.threads)
    full = json.loads(a.config)
    if "hub" in full:
        return _decide_hub(a, full)
    cfg = _train_cfg(a)
    data = _load_npz(a.data)
    dec, rows = {}, []
    for path in a.models:
        mix = Path(path).stem
        omni = mix == "omni"
        states = load_pt(path, keys=())   # {checkpoint: state_dict}
        for ck, st in states.items():
            d = decisions(cfg, load(cfg, st, omni), data["av_profile" if omni else "profile"],
                          data["av_test" if omni else "test"], omni)
            name = f"{mix}_{ck}"
            dec[name] = {k: d[k] for k in ("p_full", "p_1", "p_2")}
            rows.append({"config": name, "mix": mix, "checkpoint": ck,
                         **{k: v for k, v in d.items() if not isinstance(v, np.ndarray)}})
    _save_npz(a.out, dec)
    write_metrics(a.interventions, {"configs": rows}, json.loads(a.config))


def _pid(a):
    from .run import PIDConfig, pid_of

    cli.set_threads(a.threads)
    pc = from_json(PIDConfig, a.config, "pid")
    data, dec = _load_npz(a.data), _load_npz(a.decisions)
    t0 = time.perf_counter()
    if any("f_1" in d for d in dec.values()):   # paper scale: hub models × benchmarks, BATCH on their features
        from .run import pid_of_features

        out = {name: pid_of_features(pc, d) for name, d in sorted(dec.items())}
        write_metrics(a.out, {"pid": out}, json.loads(a.config), pc.seed, time.perf_counter() - t0)
        return
    missing = sorted(set(pc.family_configs) - set(dec))
    if missing:
        raise InputError(f"pid: family_configs names unknown configuration '{missing[0]}'")
    out = {name: pid_of(pc, d, data["av_test" if name.startswith("omni") else "test"], name.startswith("omni"),
                        name in pc.family_configs)
           for name, d in sorted(dec.items())}
    write_metrics(a.out, {"pid": out}, json.loads(a.config), pc.seed, time.perf_counter() - t0)


def _reweight(a):
    import numpy as np
    import torch

    from methods.core.safeload import load_pt

    from .run import PIDConfig, ReweightConfig, TrainConfig, finetune, pid_scores, weights_from

    cli.set_threads(a.threads)
    full = json.loads(a.config)
    cfg = from_dict(TrainConfig, full.get("train"), "train")
    pc = from_dict(PIDConfig, full.get("pid"), "pid")
    rc = from_dict(ReweightConfig, full.get("reweight"), "reweight")
    if "hub" in full:
        return _reweight_hub(a, full, pc, rc)
    mix, _, ck = rc.base.rpartition("_")
    path = next((p for p in a.models if Path(p).stem == mix), None)
    if path is None:
        raise InputError(f"reweight: base '{rc.base}' names no trained mix")
    states = load_pt(path, keys=())
    if ck not in states:
        raise InputError(f"reweight: base '{rc.base}': no checkpoint '{ck}'")
    data = _load_npz(a.data)
    items = {k: v[: rc.n_ft] for k, v in data["train"].items()}
    from .run import load

    base = load(cfg, states[ck], omni=False, source=f"{path} [{ck!r}]")
    sc = pid_scores(pc, base, data["profile"], items)
    w_pid = weights_from(sc, rc)
    test = data["test"]
    syn = test["fam"] == 3
    with torch.no_grad():
        base_syn_acc = float((base(test).argmax(1).numpy() == test["y"])[syn].mean())
    res = {"uniform": [], "pid": [], "random": []}
    for seed in rc.seeds:
        rng = np.random.default_rng(1000 + seed)
        for kind, w in (("uniform", np.ones(len(w_pid))), ("pid", w_pid), ("random", rng.permutation(w_pid))):
            m = finetune(cfg, rc, states[ck], items, w, seed, data["profile"])
            with torch.no_grad():
                pred = m(test).argmax(1).numpy()
            res[kind].append({"seed": seed, "syn_acc": float((pred == test["y"])[syn].mean()),
                              "acc": float((pred == test["y"]).mean())})
    gap_items = np.argsort(-sc["gap"])[: rc.top_k]
    fam = items["fam"][gap_items]
    write_metrics(a.out, {"runs": res, "gap_family_counts": {f: int((fam == k).sum()) for k, f in
                                                             enumerate(("RED", "U_TXT", "U_VIS", "SYN"))},
                          "n_shortcut": int((w_pid == rc.shortcut_weight).sum()), "base_syn_acc": base_syn_acc}, full)


def _reweight_hub(a, full, pc, rc):
    """Paper scale: per-sample PID scores of the LoRA base's decisions on the benchmarks' train
    items, then LoRA fine-tuning with uniform / PID / random (a permutation of the PID) weights,
    test accuracy per benchmark."""
    import numpy as np

    from .config import Data
    from .hub import VLModel, accuracy, decisions, lora_finetune, profile_stats
    from .run import scores_from, weights_from

    hub, dc = _hub_cfg(full), from_dict(Data, full.get("data"), "data")
    if not hub.lora_base:
        raise InputError("reweight: hub.vl_models is set but hub.lora_base is not")
    data = _load_npz(a.data)
    items, sc, bench_of = [], {}, []
    base = VLModel(hub.lora_base)
    base_acc = {}
    for spec in hub.benchmarks:
        its = _items(data, spec.name, "train")
        d = decisions(base, profile_stats(base, _items(data, spec.name, "profile")), its, dc.seed)
        s = scores_from(pc, d["f_1"], d["f_2"], d["p_1"], d["p_2"], d["p_full"])
        for k, v in s.items():
            sc[k] = np.concatenate([sc.get(k, np.zeros(0)), v])
        items += its
        bench_of += [spec.name] * len(its)
        base_acc[spec.name] = accuracy(base, _items(data, spec.name, "test"))
    del base
    if rc.n_ft < len(items):
        keep = np.sort(np.random.default_rng(dc.seed).choice(len(items), size=rc.n_ft, replace=False))
        items, bench_of = [items[i] for i in keep], [bench_of[i] for i in keep]
        sc = {k: v[keep] for k, v in sc.items()}
    w_pid = weights_from(sc, rc)
    res = {"uniform": [], "pid": [], "random": []}
    tests = {spec.name: _items(data, spec.name, "test") for spec in hub.benchmarks}
    for seed in rc.seeds:
        rng = np.random.default_rng(1000 + seed)
        for kind, w in (("uniform", np.ones(len(w_pid))), ("pid", w_pid), ("random", rng.permutation(w_pid))):
            vm = lora_finetune(hub.lora_base, items, w, rc, seed)
            accs = {b: accuracy(vm, t) for b, t in tests.items()}
            res[kind].append({"seed": seed, "syn_acc": float(np.mean(list(accs.values()))), "acc": accs})
            print(f"reweight: seed {seed} {kind}: {accs}", file=sys.stderr)
    gap_items = np.argsort(-sc["gap"])[: rc.top_k]
    write_metrics(a.out, {"runs": res, "gap_family_counts": {b: int(sum(bench_of[i] == b for i in gap_items))
                                                             for b in tests},
                          "n_gap": int((w_pid == rc.gap_weight).sum()),
                          "n_shortcut": int((w_pid == rc.shortcut_weight).sum()),
                          "base_syn_acc": float(np.mean(list(base_acc.values()))), "base_acc": base_acc,
                          "lora_base": hub.lora_base}, full)


def _seed_of(path) -> str:
    """The training seed a per-seed file is named by (`.../s<seed>.json`), else its stem."""
    stem = Path(path).stem
    return stem[1:] if stem[:1] == "s" and stem[1:].isdigit() else stem


def _aggregate(a):
    from .analysis import AnalysisConfig, summarize

    cfg = from_json(AnalysisConfig, a.config, "analysis")
    if len(a.pid) != len(a.interventions):
        raise InputError(f"aggregate: {len(a.pid)} --pid files but {len(a.interventions)} --interventions files "
                         "(one of each per training seed)")
    pids = [read_json(p)["pid"] for p in a.pid]
    inters = [read_json(p)["configs"] for p in a.interventions]
    if any("benchmark" in r for r in inters[0]):   # paper scale: (hub model × benchmark) configurations
        from .analysis import summarize_hub

        return summarize_hub(cfg, pids[0], inters[0], read_json(a.reweight), a.summary, a.table, a.fig_profiles,
                             a.fig_synergy)
    summarize(cfg, pids, inters, read_json(a.reweight), a.summary, a.table, a.fig_profiles, a.fig_synergy,
              seeds=[_seed_of(p) for p in a.pid])


def build_parser():
    p, sub = cli.subcommands("pid", __doc__.splitlines()[0])
    step = functools.partial(cli.config_step, sub)
    s = step("data", _data, "generate the bimodal and tri-modal items", "out")
    s.set_defaults(writes_data="out")  # one file: cli writes its sidecar <file>.manifest.json
    s = step("train", _train, "train one fusion model under one mixture weighting", "data", "out", threads=True)
    s.add_argument("--mix", required=True)
    s.add_argument("--seed", type=int, required=True, help="the training seed (one of train.seeds)")
    s = step("decide", _decide, "model decisions under calibrated masking, vision-masking intervention",
             "data", "out", "interventions", threads=True)
    s.add_argument("--models", nargs="+", default=[])
    step("pid", _pid, "BATCH PID of every configuration's decisions", "data", "decisions", "out", threads=True)
    s = step("reweight", _reweight, "PID-guided reweighted fine-tuning vs uniform and random", "data", "out",
             threads=True)
    s.add_argument("--models", nargs="+", default=[])
    s = step("aggregate", _aggregate, "summary metrics, table and figures", "reweight",
             "summary", "table", "fig_profiles", "fig_synergy")
    # one PID and one interventions file per training seed (the first: C1's profile, C3's omni model)
    s.add_argument("--pid", nargs="+", required=True)
    s.add_argument("--interventions", nargs="+", required=True)
    return p


if __name__ == "__main__":
    sys.exit(cli.main(build_parser()))
