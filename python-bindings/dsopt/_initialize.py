"""dsopt.initialize: DeepSpeed's deepspeed.initialize over dsopt.compile.

    engine, optimizer, _, lr_scheduler = dsopt.initialize(
        model=model, config=ds_config, example_inputs=(x, y))

Each call compiles one plan for one model, so several models (a student and
a teacher, models trained side by side) are several calls, each with its
own config, as with DeepSpeed. Under mpirun every engine trains
data-parallel over the launched ranks.
"""

from . import _distributed
from ._engine import Engine
from ._plan import compile as _compile


def initialize(args=None, model=None, optimizer=None, model_parameters=None,
               training_data=None, lr_scheduler=None, mpu=None,
               dist_init_required=None, collate_fn=None, config=None,
               config_params=None, *, example_inputs=None, unbatched=(),
               mixed_precision=None, overrides=None, seed=None, weights=None,
               check_results=True, device="cpu"):
    """Compiles `model` with `config` and returns DeepSpeed's 4-tuple
    ``(engine, optimizer, training_dataloader, lr_scheduler)``.

    model: an nn.Module (scripted, else exported with torch.export), a
        ScriptModule, a torch.export.ExportedProgram or the path of a model
        file (a TorchScript archive or a .pt2).
    config (or config_params, or args.deepspeed_config): a DeepSpeed config
        dict or JSON path, the {"engines": {...}} form, or per-engine configs
        keyed by submodule path (dsopt.compile).
    example_inputs: one micro-batch of THIS rank (required: the training
        step is compiled ahead of time for these shapes).
    unbatched, mixed_precision, overrides: as dsopt.compile (what the HF
        Trainer's TrainingArguments fill into "auto" values).
    seed, weights, check_results: as dsopt.Engine.
    device: where the engine trains, "cpu", "cuda" (cuda:LOCAL_RANK), "cuda:N"
        or a torch.device: the plan is compiled for its kind (dsopt.compile's
        device) and runs on it (dsopt.Engine's device).

    The world size is the number of ranks mpirun launched (1 without a
    launcher). optimizer is the engine's (OptimizerView; None when every
    engine is frozen), lr_scheduler its schedule (LRSchedulerView; None
    without a "scheduler"), training_dataloader always None. Client
    optimizers, schedulers and data loaders are not supported (TypeError):
    they come from the config.
    """
    if model is None:
        hint = ""
        if args is not None and not hasattr(args, "deepspeed_config"):
            hint = " (the first positional argument is DeepSpeed's args; pass model=...)"
        raise TypeError("initialize: model is required" + hint)
    for name, value in (("optimizer", optimizer), ("lr_scheduler", lr_scheduler),
                        ("training_data", training_data), ("mpu", mpu),
                        ("collate_fn", collate_fn)):
        if value is not None:
            raise TypeError(
                "initialize(%s=...): not supported; the optimizer and scheduler come "
                "from the config's \"optimizer\" and \"scheduler\", and batches are "
                "passed to the engine by the loop" % name)
    if config is None:
        config = config_params
    if config is None and args is not None:
        config = getattr(args, "deepspeed_config", None)
    if config is None:
        raise TypeError("initialize: pass config= (a DeepSpeed config dict or path)")
    if example_inputs is None:
        raise TypeError("initialize: pass example_inputs= (one micro-batch of this "
                        "rank): dsopt compiles the training step for its shapes")
    plan = _compile(model, config, example_inputs, _distributed.get_world_size(),
                    unbatched=unbatched, keep_ir=False, mixed_precision=mixed_precision,
                    overrides=overrides, device=device)
    engine = Engine(plan, weights=weights, seed=seed, check_results=check_results,
                    device=str(device))
    return engine, engine.optimizer, None, engine.lr_scheduler
