# The served models' helpers (their rule, workflow/rules/serving.smk, includes this file first;
# the papers whose make_llm specs say `serve: <name>` use them): a paper's `serving:` entries,
# the address file of each, the specs a step gets, and the GPU job size of a server. Functions
# only: Snakemake's linter keeps them out of rules files.
from methods.core import serving as SERVING

SERVE_KV_HEADROOM = 1.3  # weights plus room for vLLM's KV cache (it takes 90% of the GPU's memory anyway)


def serving_entries(scale, paper):
    """A paper's `serving:` sub-section, checked and with defaults ({} where it has none)."""
    try:
        return SERVING.check_serving(SCALES[scale][paper].get("serving"), f"{paper}.serving")
    except InputError as e:
        raise WorkflowError(f"invalid config in {config['scales_dir']}/{scale}.yaml: {e}")


def serving_address(scale, paper, name, instance=None):
    """The address file a served model publishes (a Snakemake service() output). The consumers of
    one server run at once in one job group, so they must not depend on each other: a paper whose
    chained steps (build, then retrieve) use the same model gives each stage its own `instance`
    (`<name>@<instance>`: the same entry, another server, up while that stage runs)."""
    tag = f"@{instance}" if instance else ""
    return f"{RESULTS}/{scale}/serving/{paper}/{name}{tag}.address.json"


def served_spec(scale, paper, spec, instance=None):
    """A config make_llm spec as the step gets it: `serve: <name>` → `base_url_file` (its address)."""
    if isinstance(spec, dict) and spec.get("serve"):
        if spec["serve"] not in serving_entries(scale, paper):
            raise WorkflowError(
                f"invalid config in {config['scales_dir']}/{scale}.yaml: '{paper}': "
                f"serve {spec['serve']!r} is not an entry of {paper}.serving"
            )
        return SERVING.resolve_spec(spec, serving_address(scale, paper, spec["serve"], instance))
    return spec


def served_inputs(scale, paper, specs, instance=None):
    """The address files of the served models that `specs` (make_llm specs) use: inputs of the
    consumer rule, so Snakemake runs the server in the consumer's job group."""
    names = sorted({s["serve"] for s in specs if isinstance(s, dict) and s.get("serve")})
    return [serving_address(scale, paper, n, instance) for n in names]


def serving_entry(wc):
    entries = serving_entries(wc.scale, wc.serve_paper)
    name = wc.serve_name.split("@")[0]
    if name not in entries:
        raise WorkflowError(f"no served model {name!r} in {wc.serve_paper}.serving " f"(entries: {sorted(entries)})")
    return entries[name]


def serving_model_path(wc):
    """The model the server loads: a hub id or directory as given, or dag:<path> → the paper's own
    trained model under its results directory."""
    m = serving_entry(wc)["model"]
    if m.startswith(SERVING.DAG_PREFIX):
        return f"{RESULTS}/{wc.scale}/{wc.serve_paper}/{m[len(SERVING.DAG_PREFIX):]}"
    return m


def serving_model_input(wc):
    """The trained model directory the server needs first (nothing for a hub id)."""
    m = serving_entry(wc)["model"]
    return [serving_model_path(wc)] if m.startswith(SERVING.DAG_PREFIX) else []


# ---- GPU job size
def serving_serve_job(wc):
    """A vLLM server: its weights (+ KV cache room) over the GPUs it needs (or the entry's
    `gpus`); a local server (our llm_server) and a CPU scale take no GPU."""
    e = serving_entry(wc)
    if e["engine"] != "vllm":
        return None
    path = serving_model_path(wc)
    try:
        spec = hub_spec(path)
    except Exception:  # a DAG-trained model not built yet: its size is unknown at parse time
        spec = None
    if spec is None:
        return R.size(gpus=e["gpus"] or 1, label=f"serving_serve {wc.serve_name}")
    w = R.weight_bytes(spec)
    return R.size(sharded=w * SERVE_KV_HEADROOM, load=w, gpus=e["gpus"], label=f"serving_serve {wc.serve_name}")


def serving_gpus(wc):
    """The tensor-parallel size of the server (1 where it gets no GPU)."""
    job = job_size(serving_serve_job, wc) if on_gpu(wc.scale) else None
    return job.gpus if job is not None else (serving_entry(wc)["gpus"] or 1)


def client_threads(served):
    """A consumer step's threads: 0 where it is an HTTP client of a served model (`served(wc)`: its
    address files), else Snakemake's default 1. A server's group runs its consumers at once and
    sums their threads; the clients wait on HTTP while the server's job (threads 1) does the work,
    so a group needs one core, and a dry run or a 1-core run can place it."""
    return lambda wildcards: 0 if served(wildcards) else 1
