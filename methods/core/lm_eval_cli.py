"""`icml26-lm-eval`: lm-eval's own command line, with the project's architectures registered.

The model directories of SiameseNorm and DAG-MoE hold custom architectures
(`model_type: icml26_siamesenorm`, `icml26_dag_moe`) that transformers knows only once their
module is imported (`methods.core.models.register_all`; no `trust_remote_code`). This script
registers them and then runs lm-eval's CLI entry point (`lm_eval.__main__.cli_evaluate`, the
function behind the `lm_eval` / `lm-eval` console scripts) on the same argv, unchanged:

    icml26-lm-eval --model hf --model_args pretrained=results/tiny/siamesenorm/runs/<run> \\
        --include_path results/tiny/siamesenorm/lm_eval_tasks --tasks <task> --output_path out/

Every argument, subcommand (`run`, `ls`, `validate`) and exit status is lm-eval's.
"""
from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    """Register the architectures, then run lm-eval's CLI on `argv` (default: sys.argv[1:])."""
    from methods.core.models import register_all

    register_all()
    from lm_eval.__main__ import cli_evaluate

    if argv is not None:
        sys.argv = [sys.argv[0], *argv]
    cli_evaluate()
    return 0


if __name__ == "__main__":
    sys.exit(main())
