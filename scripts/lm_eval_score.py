"""lm-evaluation-harness, run by its own interpreter (.venv-eval, made by `make setup` from requirements-eval.txt):
the engines' environment never imports it, nor scikit-learn, scipy and pyarrow, which it brings and which
transformers then imports in every process that builds a model config (0.6 s each).

    python scripts/lm_eval_score.py tasks INCLUDE_PATH|- NAME...        # the task names lm-eval knows, as JSON
    python scripts/lm_eval_score.py run SPEC.json OUT.json              # scores through a server, lm-eval's JSON

Called by backends/openai_compat/lm_eval.py; standard library and lm_eval only.
"""

import json
import sys


def task_manager(names, include_path):
    """lm-eval's index of the tasks named: of the include folder alone where it holds them all, else of lm-eval's
    own tasks too (some 15,000 YAMLs: seven seconds here)."""
    from lm_eval.tasks import TaskManager

    if include_path:
        own = TaskManager(include_path=include_path, include_defaults=False)
        if set(names) <= set(own.all_tasks):
            return own
    return TaskManager(include_path=include_path or None)


def main(argv):
    if argv[:1] == ["tasks"]:
        include, names = (None if argv[1] == "-" else argv[1]), argv[2:]
        print(json.dumps(list(task_manager(names, include).all_tasks)))
        return 0
    if argv[:1] == ["run"]:
        import lm_eval

        with open(argv[1]) as f:
            spec = json.load(f)
        results = lm_eval.simple_evaluate(model="local-completions", model_args=spec["model_args"],
                                          tasks=spec["tasks"], num_fewshot=spec["num_fewshot"], limit=spec["limit"],
                                          task_manager=task_manager(spec["tasks"], spec["include_path"]),
                                          apply_chat_template=spec["chat_template"], log_samples=False)
        if results is None:  # lm-eval returns None on ranks other than its first; there is one here
            print("lm-evaluation-harness returned no results", file=sys.stderr)
            return 1
        results["lm_eval_version"] = lm_eval.__version__
        with open(argv[2], "w") as f:
            json.dump(results, f, default=str)
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
