# Shared helpers and steps. Every output path has the scale as a wildcard, so one DAG can
# hold several scales; hyper-parameters come from config/scales/<scale>.yaml via `hp`.
import json

RESULTS = config["results_dir"]
REPORTS = config["reports_dir"]
PAPERS = config["papers"]
# Modules every CLI step imports (argument parsing, typed config, result writing).
CORE_BASE = ("core/cli", "core/config", "core/results")
FIGURES = {}  # paper → (scale → its figure paths); filled by each paper's .smk


wildcard_constraints:
    scale="smoke|tiny|paper",
    seed=r"\d+",


def hp(scale, paper, *keys):
    """A paper's hyper-parameters at a scale, optionally a nested section."""
    node = SCALES[scale][paper]
    for k in keys:
        node = node[k]
    return node


def as_json(obj):
    """A config section as the JSON string a step's `--config` takes (and a param compares)."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"))


def code(paper, *modules):
    """The source files a step imports, as inputs, so editing one reruns that step and what
    depends on it (Snakemake does not track imports). `modules` are paths under methods/
    without `.py`: a paper's own (e.g. "pretrain") or shared ones ("core/train")."""
    files = {f"methods/{m}.py" if "/" in m else f"methods/{paper}/{m}.py" for m in modules}
    files |= {f"methods/{m}.py" for m in CORE_BASE}
    if paper:
        files |= {f"methods/{paper}/__init__.py", f"methods/{paper}/__main__.py"}
    return sorted(files)


def fmt(x):
    """A number as it appears in paths: 0.0 → 0, 0.1 → 0.1, 0.001 → 0.001."""
    return f"{x:g}"


# Per-step resources by scale (operations, not science: they never change a number).
# runtime in minutes; paper-scale GPU jobs ask for one GPU each.
RESOURCES = {
    "smoke": {"mem_mb": 2000, "runtime": 10, "gpu": 0},
    "tiny": {"mem_mb": 3000, "runtime": 30, "gpu": 0},
    "paper": {"mem_mb": 64000, "runtime": 2880, "gpu": 1},
}


def res(key, cpu_only=False):
    if key == "gpu" and cpu_only:
        return lambda wc: 0
    return lambda wc: RESOURCES[wc.scale][key]


rule claims:
    """A paper's claims.yaml evaluated on its summary metrics: verdict per claim."""
    input:
        spec="methods/{paper}/claims.yaml",
        metrics=f"{RESULTS}/{{scale}}/{{paper}}/summary.json",
        code=code(None, "core/claims", "core/__main__"),
    output:
        f"{RESULTS}/{{scale}}/{{paper}}/claims.json",
    log:
        f"{RESULTS}/{{scale}}/{{paper}}/logs/claims.log",
    benchmark:
        f"{RESULTS}/{{scale}}/{{paper}}/benchmarks/claims.tsv"
    params:
        scale=lambda wc: wc.scale,
    threads: 1
    resources:
        mem_mb=1000,
        runtime=5,
    shell:
        "python -m methods.core claims --claims {input.spec} --metrics {input.metrics} "
        "--scale {params.scale} --out {output} > {log} 2>&1"
