#!/usr/bin/env python3
"""Score model outputs with BFCL's own checker, for comparison with plansmith-eval's.

Usage: PYTHONPATH=assets/bfcl-eval python3 scripts/bfcl_crosscheck.py CASES.jsonl > VERDICTS.jsonl

Each input line: {"case": str, "category": str, "function": [...docs],
                  "model_output": [{name: {param: value}}, ...],
                  "possible_answer": [...ground_truth] | null, "underscore_to_dot": bool}
Each output line: {"case": str, "valid": bool, "error_type": str | null}

AST categories go through the same steps as BFCL's runner (`_evaluate_single_ast_entry`):
the output-format check `is_function_calling_format_output`, then `ast_checker` with
Language.PYTHON. Relevance/irrelevance categories go through `is_empty_output`, as in
`_evaluate_single_relevance_entry`.

Imports that are irrelevant to the AST checker are stubbed in memory (the wheel's files are
never modified):
  * `filelock` (used by bfcl_eval.utils for dataset file locks), when not installed;
  * `bfcl_eval.constants.model_config`, which imports every model handler (anthropic, openai,
    ...). The checker only reads `MODEL_CONFIG_MAPPING[name].underscore_to_dot` from it; the
    stub provides two pseudo-models, one with it off (BFCL's default) and one with it on.
"""

import json
import sys
import types


def _stub(name, **attrs):
    module = types.ModuleType(name)
    module.__dict__.update(attrs)
    sys.modules[name] = module


try:
    import filelock  # noqa: F401
except ImportError:

    class _FileLock:
        def __init__(self, *args, **kwargs):
            pass

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

    _stub("filelock", FileLock=_FileLock)


class _ModelConfig:
    def __init__(self, underscore_to_dot):
        self.underscore_to_dot = underscore_to_dot


# convert_func_name looks up model_name.replace("_", "/").
MODEL_DEFAULT = "plansmith_default"
MODEL_UNDERSCORE = "plansmith_underscore"
_stub(
    "bfcl_eval.constants.model_config",
    MODEL_CONFIG_MAPPING={
        "plansmith/default": _ModelConfig(False),
        "plansmith/underscore": _ModelConfig(True),
    },
)

from bfcl_eval.constants.enums import Language  # noqa: E402
from bfcl_eval.eval_checker.ast_eval.ast_checker import ast_checker  # noqa: E402
from bfcl_eval.utils import (  # noqa: E402
    is_empty_output,
    is_function_calling_format_output,
)


def verdict(case):
    category = case["category"]
    output = case["model_output"]
    if "relevance" in category:
        contain_func_call = not is_empty_output(output)
        if "irrelevance" in category:
            ok = not contain_func_call
            return ok, None if ok else "irrelevance_error:decoder_success"
        return contain_func_call, None if contain_func_call else "relevance_error:decoder_failed"
    if not is_function_calling_format_output(output):
        return False, "ast_decoder:decoder_wrong_output_format"
    model = MODEL_UNDERSCORE if case.get("underscore_to_dot") else MODEL_DEFAULT
    result = ast_checker(
        case["function"],
        output,
        case["possible_answer"],
        Language.PYTHON,
        category,
        model,
    )
    return bool(result["valid"]), None if result["valid"] else result.get("error_type")


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    out = sys.stdout
    with open(sys.argv[1]) as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            case = json.loads(line)
            try:
                valid, error_type = verdict(case)
            except Exception as e:  # BFCL's checker crashed: report it, do not hide it
                valid, error_type = False, f"python_exception:{type(e).__name__}: {e}"
            out.write(json.dumps({"case": case["case"], "valid": valid, "error_type": error_type}))
            out.write("\n")


if __name__ == "__main__":
    main()
