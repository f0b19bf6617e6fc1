"""The optimizer and LR scheduler dsopt.initialize returns next to the engine.

The engine owns both, as a DeepSpeed engine owns the optimizer and scheduler
its config builds: its step() updates on the accumulation boundary, advances
the schedule and zeroes the gradients. These views let loops written for
DeepSpeed or Accelerate run unchanged:

    optimizer.param_groups[0]["lr"]   # the LR of the next update (read-only)
    optimizer.step()                  # engine.step() unless the engine stepped
    lr_scheduler.step()               # nothing: the engine's step advances it
    optimizer.zero_grad()             # nothing: the updating step zeroed them
"""


class OptimizerView:
    """The engine's optimizer(s): one param group per trainable plan engine."""

    def __init__(self, engine, described):
        self._engine = engine
        self._groups = [e for e in described if not e["frozen"]]

    @property
    def param_groups(self):
        """One dict per trainable plan engine: ``lr`` (the next update's),
        ``weight_decay``, ``name``, ``type``; changing them changes nothing."""
        lrs = self._engine.get_lr()
        return [{"name": e["name"], "type": e["optimizer"]["type"], "lr": lr,
                 "weight_decay": e["optimizer"]["weight_decay"]}
                for e, lr in zip(self._groups, lrs)]

    def step(self, closure=None):
        """Ends the micro-step as ``engine.step()`` when its backward has run
        and the engine has not stepped since (Accelerate's loop: backward,
        optimizer.step()); otherwise nothing (DeepSpeed's loop stepped the
        engine already)."""
        if closure is not None:
            raise ValueError("optimizer.step(closure): closures are not supported")
        if self._engine._awaiting_step:
            self._engine.step()

    def zero_grad(self, set_to_none=True):
        """Nothing to do: the engine zeroes the gradients when it updates, and
        keeps them across the micro-steps of an accumulation window."""

    @property
    def cur_scale(self):
        """The fp16 loss scale of the first trainable engine (None without)."""
        scales = self._engine.loss_scale
        return scales[0] if scales else None

    def __repr__(self):
        return "OptimizerView(%s)" % ", ".join(
            "%s: %s lr=%g" % (g["name"] or "root", g["type"], g["lr"])
            for g in self.param_groups)


class LRSchedulerView:
    """The engine's LR schedule (the config's ``scheduler``)."""

    def __init__(self, engine):
        self._engine = engine

    def step(self, *args, **kwargs):
        """Nothing: the engine advances the schedule at each update, as
        DeepSpeed's engine.step() does for a scheduler it owns (Accelerate's
        scheduler wrapper skips the call under DeepSpeed alike)."""

    def get_last_lr(self):
        """The LR of the next update, per trainable plan engine."""
        return self._engine.get_lr()

    get_lr = get_last_lr

    @property
    def last_batch_iteration(self):
        """DeepSpeed's counter: updates taken minus one."""
        return self._engine.global_steps - 1
