# Open models served as part of the DAG (methods/core/serving/): one server per entry of a paper's
# `serving:` sub-section, `vllm serve <model>` (OpenAI-compatible; `engine: local` = our
# methods.core.llm_server on CPU, tests). The address file is a Snakemake service() output: the
# server runs in one job group with the steps whose make_llm specs say `serve: <name>` (on their
# node), they read its address (make_llm's base_url_file), and Snakemake terminates it when the
# last of them is done; the serving process takes the server's whole process group down with it.
include: "helpers/serving.smk"  # entries, address files, served specs, GPU job sizes


rule serving_serve:
    """One served model of a paper: started, its address published, stopped after its consumers."""
    input:
        model=serving_model_input,
        code=code("core.serving"),
    output:
        service(f"{RESULTS}/{{scale}}/serving/{{serve_paper}}/{{serve_name}}.address.json"),
    log:
        f"{RESULTS}/{{scale}}/serving/{{serve_paper}}/logs/{{serve_name}}.log",
    wildcard_constraints:
        serve_paper=r"[a-z][a-z0-9_]*",
        serve_name=r"[A-Za-z0-9_.\-]+(@[a-z_]+)?",
    threads: 1  # its consumers take 0 (helpers/serving.smk client_threads): a group needs one core
    resources:
        **sized(serving_serve_job),
    params:
        model=serving_model_path,
        served_name=lambda wc: SERVING.served_model_name(serving_entry(wc)),
        engine=lambda wc: serving_entry(wc)["engine"],
        gpus=serving_gpus,
        args=lambda wc: as_json(serving_entry(wc)["args"]),
        ready=lambda wc: serving_entry(wc)["ready_timeout_s"],
        runtime=runtime_of(serving_serve_job),
    shell:
        # the address file exists at once (status starting: consumers wait for ready), then the
        # serving process replaces this shell, so Snakemake's terminate/kill reach it directly
        'echo \'{{"status": "starting"}}\' > {output:q}; '
        "exec python -m methods.core.serving serve --name {wildcards.serve_name:q} --model {params.model:q} "
        "--served-name {params.served_name:q} --engine {params.engine:q} --gpus {params.gpus} "
        "--args {params.args:q} --ready-timeout-s {params.ready} --runtime {params.runtime:q} --address {output:q} > {log:q} 2>&1"
