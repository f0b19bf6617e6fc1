#!/usr/bin/env python3
"""A sweep of transformers' architectures through dsopt, against eager PyTorch.

    .venv/bin/python test/sweep/transformers_sweep.py --results /tmp/sweep [--shard 0/4]
    .venv/bin/python test/sweep/transformers_sweep.py --results /tmp/sweep --table docs/sweep.md
    .venv/bin/python test/sweep/transformers_sweep.py --family seqcls --results /tmp/sweep-seqcls
    .venv/bin/python test/sweep/transformers_sweep.py --only gpt2,llama --results DIR --check

--family picks the auto class: causal (*ForCausalLM, the default), seq2seq (encoder-decoder
*ForConditionalGeneration), seqcls (*ForSequenceClassification, 3 labels) or imagecls
(*ForImageClassification, 32x32 images, 3 labels); each feeds the model its own labels.

For each model type of the family's auto mapping: its default config shrunk
(2 layers, hidden 64, 4 heads, vocabulary 128, ...; no download), dropout off so that eager and
compiled draw nothing, no key/value cache. The model is exported with torch.export on
(input_ids, labels) [2, 8] (an architecture eager PyTorch cannot export is left out of the
denominator, with the reason), then trained 4 steps of SGD with momentum (several models have
key biases whose true gradient is zero) by dsopt.initialize (the ExportedProgram, no wrapper: the
engine returns the model's ModelOutput; `.loss.backward()`) and by eager PyTorch from the same
weights. It passes when every step's loss agrees within 1e-4 relative and every final parameter
within 1e-4 + 1e-4 * |eager| (the oracle's design tolerance, docs/oracle.md); otherwise the first
error or the largest difference is recorded. Each architecture runs in a process of its own
(a crash or a timeout is its result), one JSON file per architecture in --results, so a run
resumes where it stopped; --shard i/n takes every n-th architecture. --table writes the Markdown
table of every architecture from the results (docs/transformers-sweep.md).
"""

import argparse
import copy
import json
import os
import subprocess
import sys
import time
import traceback

STEPS = 4
BATCH, SEQ = 2, 8
LR, MOMENTUM = 0.01, 0.9

# Config attributes shrunk where a config has them (names vary by family).
SMALL = {
    "num_hidden_layers": 2, "n_layer": 2, "num_layers": 2, "n_layers": 2,
    "hidden_size": 64, "n_embd": 64, "d_model": 64, "dim": 64,
    "num_attention_heads": 4, "n_head": 4, "n_heads": 4, "num_heads": 4,
    "num_key_value_heads": 2, "n_kv_heads": 2, "multi_query_group_num": 2,
    "intermediate_size": 128, "ffn_dim": 128, "n_inner": 128, "ffn_hidden_size": 128,
    "vocab_size": 128, "max_position_embeddings": 64, "n_positions": 64, "n_ctx": 64,
    "head_dim": 16, "kv_channels": 16,
    "num_experts": 4, "num_local_experts": 4, "n_routed_experts": 4, "moe_num_experts": 4,
    "num_experts_per_tok": 2, "moe_topk": 2, "top_k": 2, "moe_intermediate_size": 32,
    "shared_expert_intermediate_size": 32, "n_shared_experts": 1,
    "first_k_dense_replace": 1,
    "sliding_window": 16, "attention_window": 16,
}
TOKEN_IDS = {"pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2, "decoder_start_token_id": 1}


# The families swept: transformers' auto mapping and class, and what one step feeds the model
# (the loss comes from the model's own `labels`).
FAMILIES = {
    "causal": ("MODEL_FOR_CAUSAL_LM_MAPPING_NAMES", "AutoModelForCausalLM", "*ForCausalLM"),
    "seq2seq": ("MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES", "AutoModelForSeq2SeqLM",
                "encoder-decoder *ForConditionalGeneration"),
    "seqcls": ("MODEL_FOR_SEQUENCE_CLASSIFICATION_MAPPING_NAMES",
               "AutoModelForSequenceClassification", "*ForSequenceClassification"),
    "imagecls": ("MODEL_FOR_IMAGE_CLASSIFICATION_MAPPING_NAMES",
                 "AutoModelForImageClassification", "*ForImageClassification"),
}
NUM_LABELS = 3
IMAGE = 32  # pixels a side


def model_types(family="causal"):
    from transformers.models.auto import modeling_auto
    return sorted(getattr(modeling_auto, FAMILIES[family][0]))


# Fallbacks when the full shrink gives an inconsistent config (a family whose head or rotary
# dims are set apart from the hidden size): fewer attributes shrunk, larger models.
KEEP_HEADS = ("head_dim", "kv_channels", "num_key_value_heads", "n_kv_heads",
              "multi_query_group_num", "sliding_window", "attention_window")
SHRINKS = [SMALL,
           {k: v for k, v in SMALL.items() if k not in KEEP_HEADS},
           {k: v for k, v in SMALL.items()
            if k in ("num_hidden_layers", "n_layer", "num_layers", "n_layers", "vocab_size",
                     "num_experts", "num_local_experts", "n_routed_experts", "moe_num_experts",
                     "num_experts_per_tok", "moe_topk", "top_k", "first_k_dense_replace")}]


def shrink(config, small=SMALL):
    for name, value in small.items():
        if hasattr(config, name) and isinstance(getattr(config, name), int) \
                and not isinstance(getattr(config, name), bool):
            setattr(config, name, value)
    for name, value in TOKEN_IDS.items():
        if getattr(config, name, None) is not None:
            setattr(config, name, value)
    for name in list(vars(config)):
        value = getattr(config, name)
        # Dropout, stochastic depth (drop path) and LayerDrop: all draw at random.
        if any(w in name for w in ("dropout", "pdrop", "drop_path", "layerdrop")):
            if isinstance(value, float):
                setattr(config, name, 0.0)
            elif isinstance(value, (list, tuple)) and all(isinstance(v, float) for v in value):
                setattr(config, name, type(value)(0.0 for _ in value))  # per stage (CvT)
    if hasattr(config, "use_cache"):
        config.use_cache = False
    if hasattr(config, "_experts_implementation"):
        # The experts as one batched matmul of the weights each token picked: static shapes
        # that export (transformers' default, its grouped_mm custom op, is no ATen operator;
        # its "eager" loop over experts is data-dependent and does not export).
        config._experts_implementation = "batched_mm"
    for sub in ("text_config", "vision_config", "decoder", "encoder"):
        inner = getattr(config, sub, None)
        if inner is not None and hasattr(inner, "to_dict"):
            shrink(inner, small)
    return config


def build(model_type, small=SMALL, family="causal"):
    import torch
    import transformers
    config = shrink(transformers.AutoConfig.for_model(model_type), small)
    if family == "seqcls":
        config.num_labels = NUM_LABELS
        if getattr(config, "pad_token_id", None) is None:
            config.pad_token_id = 0  # a batch of 2 needs one (inputs hold no padding)
    if family in ("seq2seq", "seqcls"):
        # The decoder's inputs are the labels (an encoder-decoder classifier: the inputs)
        # shifted right by this token.
        for name, value in (("decoder_start_token_id", 1), ("pad_token_id", 0)):
            if getattr(config, name, None) is None:
                setattr(config, name, value)
    if family == "imagecls":
        config.num_labels = NUM_LABELS
        for part in (config, getattr(config, "vision_config", None)):
            for name in ("image_size", "img_size", "input_size"):
                if isinstance(getattr(part, name, None), int):
                    setattr(part, name, IMAGE)
    torch.manual_seed(0)
    model = getattr(transformers, FAMILIES[family][1]).from_config(config)
    return model.float().train(), config


def batches(config, family="causal"):
    """One dict of model inputs per step, labels included."""
    import torch
    g = torch.Generator().manual_seed(1)
    steps = []
    for _ in range(STEPS):
        if family == "imagecls":
            channels = getattr(config, "num_channels", 3)
            steps.append({"pixel_values": torch.randn(BATCH, channels, IMAGE, IMAGE, generator=g),
                          "labels": torch.randint(0, NUM_LABELS, (BATCH,), generator=g)})
            continue
        vocab = getattr(config, "vocab_size", None) or getattr(
            getattr(config, "text_config", None), "vocab_size", 128)
        ids = torch.randint(3, min(int(vocab), 128), (BATCH, SEQ), generator=g)
        labels = torch.randint(0, NUM_LABELS, (BATCH,), generator=g) if family == "seqcls" \
            else ids
        eos = getattr(config, "eos_token_id", None)
        if family == "seqcls" and isinstance(eos, int):
            ids[:, -1] = eos  # as a tokenizer ends a sentence (BART's heads pool on it)
        steps.append({"input_ids": ids, "labels": labels})
    return steps


def first_line(error):
    text = "%s: %s" % (type(error).__name__, str(error).strip())
    return text.splitlines()[0][:300]


def run_one(model_type, family="causal"):
    """The result of one architecture: {"type", "status": pass | fail | excluded, ...}."""
    import torch
    import dsopt
    result = {"type": model_type}
    # The first shrink that builds and exports; the last one's error otherwise.
    for level, small in enumerate(SHRINKS):
        try:
            model, config = build(model_type, small, family)
            result["class"] = type(model).__name__
            data = batches(config, family)
            reference = copy.deepcopy(model)
            initial = copy.deepcopy(model)  # for the float64 arbiter
        except Exception as error:  # noqa: BLE001 - the harness cannot shrink it
            failure = dict(result, status="excluded", stage="build", error=first_line(error))
            continue
        try:
            program = torch.export.export(model, (), data[0])
        except Exception as error:  # noqa: BLE001 - eager PyTorch cannot export it
            failure = dict(result, status="excluded", stage="export", error=first_line(error))
            continue
        spec = program.call_spec.out_spec
        if "loss" not in (spec.context if spec is not None and
                          isinstance(spec.context, list) else []):
            # The auto class gave a model without a head (a backbone): nothing to train.
            return dict(result, status="excluded", stage="export",
                        error="the model returns no loss (%s)" % getattr(
                            getattr(spec, "type", None), "__name__", "not a ModelOutput"))
        result["shrink"] = level
        break
    else:
        return failure
    ds_config = {"train_micro_batch_size_per_gpu": BATCH, "gradient_clipping": 0.0,
                 "optimizer": {"type": "SGD", "params": {"lr": LR, "momentum": MOMENTUM}}}
    stage = "compile"
    try:
        engine, _, _, _ = dsopt.initialize(model=program, config=ds_config,
                                           example_inputs=data[0])
        stage = "train"
        ours = []
        for batch in data:
            out = engine(**batch)
            out.loss.backward()
            engine.step()
            ours.append(float(out.loss))
    except Exception as error:  # noqa: BLE001 - the first error is the result
        return dict(result, status="fail", stage=stage, error=first_line(error))

    eager = train_eager(reference, data)
    result.update(losses=ours, eager_losses=eager)
    state = engine.state_dict()
    params = dict(reference.named_parameters())
    missing = [name for name in params if name not in state]
    if missing:
        return dict(result, status="fail", stage="compare",
                    error="the engine has no parameter %s" % missing[0])
    result["largest_update"] = max(
        float((state[name].float() - program.state_dict[name]).abs().max()) for name in params)
    error = None
    for step, (a, b) in enumerate(zip(ours, eager)):
        if not abs(a - b) <= 1e-4 * abs(b):
            error = "step %d: loss %.7g, eager %.7g" % (step + 1, a, b)
            break
    worst, where = 0.0, None
    for name, param in params.items():
        diff = (state[name].float() - param.detach()).abs()
        use = float((diff / (1e-4 + 1e-4 * param.detach().abs())).max()) if diff.numel() else 0
        if use > worst:
            worst, where = use, name
    result["tolerance_used"] = worst
    if error is None and worst > 1.0:
        error = "parameter %s differs: %.2fx the tolerance" % (where, worst)
    if error is None:
        return dict(result, status="pass")
    # Where eager and ours differ in float32, the same training in float64 decides: a model
    # whose float32 result is ill-conditioned (BatchNorm over 2 values of a 1x1 map) passes
    # when every parameter of ours is as near the float64 result as eager's float32 one.
    verdict = float64_arbiter(initial, data, state, params)
    if verdict is not None and verdict["ratio"] <= 2.0:
        return dict(result, status="pass", arbiter=verdict)
    return dict(result, status="fail", stage="compare", error=error,
                **({"arbiter": verdict} if verdict else {}))


def train_eager(model, data):
    """SGD with momentum on `data`, as run_one's engine trains; the losses."""
    import torch
    optimizer = torch.optim.SGD(model.parameters(), lr=LR, momentum=MOMENTUM)
    losses = []
    for batch in data:
        loss = model(**batch).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        losses.append(float(loss))
    return losses


def float64_arbiter(initial, data, ours, eager):
    """The eager training again in float64 from the same weights: per parameter, how far ours
    and eager's float32 result land from it. `ratio`: the largest over parameters of
    |ours - f64| / (|eager - f64| + 1e-4 + 1e-4 |f64|) (max over elements); None where the
    model does not run in float64."""
    import torch
    try:
        model = initial.double()
        wide = [{k: (v.double() if v.is_floating_point() else v) for k, v in b.items()}
                for b in data]
        train_eager(model, wide)
    except Exception:  # noqa: BLE001 - no arbiter for this model
        return None
    ratio, where, ours_off, eager_off = 0.0, None, 0.0, 0.0
    for name, truth in model.named_parameters():
        truth = truth.detach()
        a = (ours[name].double() - truth).abs().max().item() if truth.numel() else 0.0
        b = (eager[name].detach().double() - truth).abs().max().item() if truth.numel() else 0.0
        scale = truth.abs().max().item() if truth.numel() else 0.0
        r = a / (b + 1e-4 + 1e-4 * scale)
        if r > ratio:
            ratio, where, ours_off, eager_off = r, name, a, b
    return {"ratio": round(ratio, 3), "parameter": where, "ours_from_f64": ours_off,
            "eager_from_f64": eager_off}


def run_isolated(model_type, results, timeout, family="causal", memory_gib=10):
    path = os.path.join(results, model_type + ".json")
    start = time.time()

    def limit_memory():
        # An architecture the shrink leaves too large fails with an allocation error at its
        # stage (build, export, compile, train) instead of the kernel's OOM killer taking it,
        # or the other process, down.
        import resource
        size = int(memory_gib * 2**30)
        resource.setrlimit(resource.RLIMIT_AS, (size, size))

    try:
        proc = subprocess.run([sys.executable, os.path.abspath(__file__), "--one", model_type,
                               "--family", family, "--out", path],
                              capture_output=True, text=True, timeout=timeout,
                              env=dict(os.environ, OMP_NUM_THREADS="1"),
                              preexec_fn=limit_memory if memory_gib else None)
        if not os.path.exists(path):
            tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
            result = {"type": model_type, "status": "fail", "stage": "crash",
                      "error": "exit %d: %s" % (proc.returncode, tail[0][:300])}
            write_json(path, result)
    except subprocess.TimeoutExpired:
        write_json(path, {"type": model_type, "status": "fail", "stage": "timeout",
                          "error": "no result within %d s" % timeout})
    with open(path) as f:
        result = json.load(f)
    result["seconds"] = round(time.time() - start, 1)
    result["commit"] = _commit()
    write_json(path, result)
    return result


def _commit():
    """The checkout's commit, `+` when its working tree differs (what built dsopt)."""
    here = os.path.dirname(os.path.abspath(__file__))
    try:
        return subprocess.run(["git", "describe", "--always", "--dirty=+"], cwd=here,
                              capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def write_json(path, value):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(value, f, indent=1)
    os.replace(tmp, path)


def table(results, path, family="causal"):
    current = _commit()
    rows = []
    for name in model_types(family):
        file = os.path.join(results, name + ".json")
        if os.path.exists(file):
            with open(file) as f:
                rows.append(json.load(f))
        else:
            rows.append({"type": name, "status": "not run"})
    counted = [r for r in rows if r["status"] in ("pass", "fail")]
    passed = [r for r in counted if r["status"] == "pass"]
    lines = ["| architecture | class | result | stage | first error / largest difference |",
             "|---|---|---|---|---|"]
    for r in rows:
        detail = r.get("error", "")
        if r["status"] == "pass":
            detail = "largest parameter difference %.2fx the tolerance" % r.get("tolerance_used", 0)
            if r.get("arbiter"):
                a = r["arbiter"]
                detail += (" of eager's float32; the float64 run decides: %s is %.2g from it, "
                           "eager float32 %.2g" % (a["parameter"], a["ours_from_f64"],
                                                   a["eager_from_f64"]))
        if r.get("note"):  # how a run differed from the command above
            detail += " (%s)" % r["note"]
        # A result carried over from an earlier run, at that commit.
        ran_at = r.get("run") or r.get("commit")
        if ran_at and ran_at != current:
            detail += " (run at %s)" % ran_at
        lines.append("| %s | %s | %s | %s | %s |" % (
            r["type"], r.get("class", ""), r["status"], r.get("stage", ""),
            detail.replace("|", "\\|")))
    summary = ("%d architectures: %d ran (shrinkable and exportable), %d pass (%.0f%%), "
               "%d excluded (the harness cannot shrink or eager PyTorch cannot export them), "
               "%d not run." % (len(rows), len(counted), len(passed),
                                100.0 * len(passed) / max(1, len(counted)),
                                sum(r["status"] == "excluded" for r in rows),
                                sum(r["status"] == "not run" for r in rows)))
    inputs = {"causal": "`(input_ids, labels)` [2, 8]", "seq2seq": "`(input_ids, labels)` [2, 8]",
              "seqcls": "`input_ids` [2, 8] and `labels` [2] of %d classes" % NUM_LABELS,
              "imagecls": "`pixel_values` [2, C, %d, %d] (image size %d) and `labels` [2] of %d "
                          "classes" % (IMAGE, IMAGE, IMAGE, NUM_LABELS)}[family]
    title = "# The transformers sweep" + ("" if family == "causal" else ": " + FAMILIES[family][2])
    header = [
        title,
        "",
        "Every %s of the pinned transformers (%s), built from its default config shrunk"
        % (FAMILIES[family][2].replace("encoder-decoder ", "encoder-decoder `").replace(
            "*For", "`*For" if family != "seq2seq" else "*For") + "`", _transformers_version()),
        "(`test/sweep/transformers_sweep.py --family %s`: 2 layers, hidden 64, 4 heads, vocabulary"
        % family,
        "128, no download; when that shrink gives an inconsistent config, fewer attributes are",
        "shrunk), dropout off and no key/value cache, exported with `torch.export` on",
        "%s and trained 4 steps of SGD with momentum by `dsopt.initialize` (the ExportedProgram" % inputs,
        "as it is; the engine returns the model's `ModelOutput`, `out.loss.backward()`) and by eager",
        "PyTorch from the same weights (dropout, drop path and LayerDrop off). *pass*: every step's",
        "loss within 1e-4 relative and every final parameter within 1e-4 + 1e-4 |eager| of eager's;",
        "where they differ, the same training in float64 decides: ours passes when every parameter is",
        "as near the float64 result as eager's float32 one (per tensor, within twice its distance",
        "plus the tolerance, 2 (d + tol); the row names the parameter and both distances). *excluded*:",
        "the harness cannot",
        "shrink the config (within --memory-gib, 10 GiB of address space per architecture) or eager",
        "PyTorch cannot export the model (not in the denominator). *fail*: the first error (compile,",
        "train, crash, no result within --timeout seconds) or the largest difference. Made with",
        "",
        "```sh",
        "PYTHONPATH=build/python .venv/bin/python test/sweep/transformers_sweep.py --family %s "
        "--results /tmp/sweep-%s --timeout 600" % (family, family),
        "PYTHONPATH=build/python .venv/bin/python test/sweep/transformers_sweep.py --family %s "
        "--results /tmp/sweep-%s --table %s" % (family, family, path),
        "```",
        "",
        "on the CPU of the build machine (2 cores, two processes; `--shard 0/2` and `1/2`). CI runs",
        "six causal LMs (`transformers-sweep-six`). The other families: %s. A row marked" % ", ".join(
            "[%s](%s)" % (f, sweep_page(f)) for f in sorted(FAMILIES) if f != family),
        "*run at COMMIT* is a result carried over from an",
        "earlier run at that commit (`+`: with changes not yet committed); every other row ran at",
        "the commit that wrote this table.",
        "",
    ]
    with open(path, "w") as f:
        f.write("\n".join(header) + "\n" + summary + "\n\n" + "\n".join(lines) + "\n")
    return summary


def sweep_page(family):
    """The docs/ page of a family's table."""
    return "transformers-sweep.md" if family == "causal" else "transformers-sweep-%s.md" % family


def _transformers_version():
    import transformers
    return transformers.__version__


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--results", help="folder of per-architecture results (resumed)")
    p.add_argument("--shard", default="0/1", help="i/n: every n-th architecture from i")
    p.add_argument("--only", help="comma-separated model types")
    p.add_argument("--rerun", action="store_true", help="run architectures that have a result")
    p.add_argument("--reverse", action="store_true",
                   help="last architecture first (a second process meets the first midway)")
    p.add_argument("--timeout", type=int, default=600, help="seconds per architecture")
    p.add_argument("--memory-gib", type=float, default=10,
                   help="address space per architecture (0: no limit)")
    p.add_argument("--check", action="store_true", help="exit 1 unless every one passes")
    p.add_argument("--table", help="write the Markdown table of the results here")
    p.add_argument("--family", default="causal", choices=sorted(FAMILIES),
                   help="which auto class to sweep (default: causal)")
    p.add_argument("--one", help=argparse.SUPPRESS)
    p.add_argument("--out", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.one:
        try:
            result = run_one(args.one, args.family)
        except Exception as error:  # noqa: BLE001
            traceback.print_exc()
            result = {"type": args.one, "status": "fail", "stage": "harness",
                      "error": first_line(error)}
        write_json(args.out, result)
        return 0
    if not args.results:
        p.error("--results is required")
    os.makedirs(args.results, exist_ok=True)
    if args.table:
        print(table(args.results, args.table, args.family))
        return 0
    names = args.only.split(",") if args.only else model_types(args.family)
    index, count = (int(x) for x in args.shard.split("/"))
    names = names[index::count]
    if args.reverse:
        names.reverse()
    failed = []
    for n, name in enumerate(names):
        path = os.path.join(args.results, name + ".json")
        if os.path.exists(path) and not args.rerun:
            continue
        result = run_isolated(name, args.results, args.timeout, args.family, args.memory_gib)
        print("[%d/%d] %s: %s %s %s" % (n + 1, len(names), name, result["status"],
                                        result.get("stage", ""), result.get("error", "")),
              flush=True)
        if result["status"] != "pass":
            failed.append(name)
    if args.check and failed:
        print("not passing: " + ", ".join(failed))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
