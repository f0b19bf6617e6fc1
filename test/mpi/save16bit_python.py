#!/usr/bin/env python3
"""dsopt's save_16bit_model on every rank of `mpirun -n 2 python save16bit_python.py`.

  save16bit_python.py --bin BUILD/bin --dir DIR

DIR holds the plans checkpoint_check.py (case save-16bit) compiled for W = 2: mlp-z3g.plan (ZeRO
stage 3 with stage3_gather_16bit_weights_on_model_save), mlp-z3n.plan (without it) and
two.plan (two_models: student ZeRO-2, frozen teacher ZeRO-3 gathering); the data is next to
the models (--models). Each plan trains 2 steps on this rank's rows, then every rank calls
save_16bit_model: the file equals Engine.state_dict() bitwise (names relative to the engine
in a multi-engine plan, DIR/<engine>/); without the gather every rank gets False and a
warning naming the key and nothing is written; exclude_frozen_parameters leaves the frozen
teacher's parameters out. Exits 1 (the MPI job ends) on the first failure.
"""

import argparse
import os
import sys
import warnings

import torch


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--bin", required=True)
    p.add_argument("--models", required=True)
    p.add_argument("--dir", required=True)
    args = p.parse_args()
    sys.path.insert(0, os.path.join(args.bin, "..", "python"))
    import dsopt

    def trained(plan, model):
        engine = dsopt.Engine(dsopt.load_plan(os.path.join(args.dir, plan)))
        data = torch.load(os.path.join(args.models, model + ".data.pt"))
        rank, world = engine.global_rank, engine.world_size
        for micro in range(2 * engine.gradient_accumulation_steps()):
            rows = {k: v[micro].chunk(world)[rank] for k, v in data.items()}
            loss = engine(**rows)
            engine.backward(loss)
            engine.step()
        return engine

    def check_file(path, want, what):
        got = torch.load(path)
        assert list(got) == list(want), f"{what}: keys {list(got)} vs {list(want)}"
        for name, tensor in want.items():
            assert got[name].dtype == tensor.dtype and torch.equal(got[name], tensor), \
                f"{what}: {name} differs"

    engine = trained("mlp-z3g.plan", "mlp")
    out = os.path.join(args.dir, "out-z3g")
    assert engine.save_16bit_model(out), "stage 3 with the gather returned False"
    check_file(os.path.join(out, "pytorch_model.bin"), engine.state_dict(), "mlp stage 3")

    engine = trained("mlp-z3n.plan", "mlp")
    out = os.path.join(args.dir, "out-z3n")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert not engine.save_16bit_model(out), "stage 3 without the gather returned True"
    assert any("stage3_gather_16bit_weights_on_model_save" in str(w.message) for w in caught), \
        [str(w.message) for w in caught]
    assert not os.path.exists(out), f"{out} written without the gather"

    engine = trained("two.plan", "two_models")
    whole = engine.state_dict()
    for exclude in (False, True):
        out = os.path.join(args.dir, "out-two" + ("-exclude" if exclude else ""))
        assert engine.save_16bit_model(out, exclude_frozen_parameters=exclude)
        for name in ("student", "teacher"):
            local = {k[len(name) + 1:]: v for k, v in whole.items() if k.startswith(name + ".")}
            if exclude and name == "teacher":
                local = {}  # Frozen, without buffers.
            check_file(os.path.join(out, name, "pytorch_model.bin"), local,
                       f"two_models {name} exclude={exclude}")
    if engine.global_rank == 0:
        print("save16bit_python: OK")


if __name__ == "__main__":
    main()
