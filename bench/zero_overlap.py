#!/usr/bin/env python3
"""ZeRO stages and communication overlap on W ranks: step time, state memory, exposed waits.

  bench/zero_overlap.py --bin build/bin [--world-size 2] [--steps 16] [--bucket 200000]
                        [--launcher 'mpirun --oversubscribe -n {W}']

Trains the GPT of step_time.py (~3.4M parameters, d=256, 4 blocks, T=64) on W MPI ranks, one
LibTorch thread per rank, with AdamW, under several ZeRO configurations, all in this one script:
stage 0 (the baseline every ratio is against), stage 2 and stage 3 with overlap_comm off and on
(reduce/all-gather buckets of --bucket elements, so that there are many collectives to overlap:
the 5e8 default makes one bucket; stage 3 with stage3_param_persistence_threshold 0). For each:
  - ms/step: the difference of two `ds-run` runs of N/2 and N steps divided by N/2 (start-up,
    plan loading and the load-time broadcast cancel out);
  - the measured report of the longer run (`ds-run --report`): state bytes per rank (params +
    grads + optimizer state), communication volume per step, and the overlap fields the runtime
    measures (time collectives were in flight, time compute was blocked waiting for them; the
    reduce-scatters' hidden fraction is 1 - blocked / in flight).
Then PyTorch's own data parallelism on the same nn.Module, batch, AdamW and clipping, W
processes with the Gloo backend: DistributedDataParallel with torch.optim.AdamW, and DDP with
torch.distributed.optim.ZeroRedundancyOptimizer (ZeRO stage 1), timed over the same steps after one
warm-up step. Prints a markdown table.
"""

import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import step_time  # noqa: E402


def default_launcher():
    root = " --allow-run-as-root" if hasattr(os, "geteuid") and os.geteuid() == 0 else ""
    return "mpirun" + root + " --oversubscribe -n {W}"


# The optimizer every bench trains with.
ADAMW = {"type": "AdamW", "params": {"lr": 1e-3, "weight_decay": 0.01}}


def zero_section(stage, bucket, overlap=None, prefetch=None):
    """A zero_optimization section: `bucket`-element reduce and all-gather buckets (stages 1-3),
    every stage 3 parameter sharded, `overlap_comm` and stage3_prefetch_bucket_size when given."""
    z = {"stage": stage}
    if stage > 0:
        z["reduce_bucket_size"] = bucket
        z["allgather_bucket_size"] = bucket
    if stage == 3:
        z["stage3_param_persistence_threshold"] = 0
        if prefetch is not None:
            z["stage3_prefetch_bucket_size"] = prefetch
    if overlap is not None:
        z["overlap_comm"] = overlap
    return z


def configs(bucket):
    def zero(stage, overlap=None):
        return zero_section(stage, bucket, overlap, prefetch=2 * bucket)
    return [("stage 0", zero(0)),
            ("stage 2, overlap off", zero(2, False)),
            ("stage 2, overlap on", zero(2, True)),
            ("stage 3, overlap off", zero(3, False)),
            ("stage 3, overlap on", zero(3, True))]


def run(prefix, cmd, env):
    start = time.perf_counter()
    subprocess.run(prefix + cmd, check=True, env=env, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def compile_and_time(bin_dir, prefix, tmp, model, data, config, world, steps, env):
    """ds-compile `model` with the `config` dict for `world` ranks, then time `ds-run` over
    steps // 2 and `steps` steps (the difference cancels start-up). Returns (ms per step, rank
    0's measured report of the longer run)."""
    cfg = os.path.join(tmp, "cfg.json")
    with open(cfg, "w") as f:
        json.dump(config, f)
    plan = os.path.join(tmp, "model.plan")
    subprocess.run([os.path.join(bin_dir, "ds-compile"), model, "--config", cfg,
                    "--example-inputs", data, "--world-size", str(world), "-o", plan],
                   check=True, env=env, stderr=subprocess.DEVNULL)
    base = [os.path.join(bin_dir, "ds-run"), plan, "--data", data, "--steps"]
    report = os.path.join(tmp, "report.json")
    short = run(prefix, base + [str(steps // 2)], env)
    long = run(prefix, base + [str(steps), "--report", report], env)
    with open(report) as f:
        rank0 = json.load(f)["ranks"][0]
    return (long - short) / (steps - steps // 2) * 1e3, rank0


def torch_worker(rank, world, variant, steps, batch, data_path, port, queue):
    """One rank of PyTorch's DDP (Gloo) baseline; rank 0 puts ms/step into `queue`."""
    torch.set_num_threads(1)
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.manual_seed(0)
    model = torch.nn.parallel.DistributedDataParallel(step_time.GPT())
    if variant == "zero":
        from torch.distributed.optim import ZeroRedundancyOptimizer
        opt = ZeroRedundancyOptimizer(model.parameters(), optimizer_class=torch.optim.AdamW,
                                      lr=1e-3, weight_decay=0.01)
    else:
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
    data = torch.load(data_path)
    rows = slice(rank * batch, (rank + 1) * batch)

    def step(s):
        loss = model(data["idx"][s][rows], data["targets"][s][rows])
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()

    step(0)
    dist.barrier()
    start = time.perf_counter()
    for s in range(1, steps + 1):
        step(s)
    dist.barrier()
    if rank == 0:
        queue.put((time.perf_counter() - start) / steps * 1e3)
    dist.destroy_process_group()


def torch_baseline(variant, world, steps, batch, data_path, port):
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    procs = [ctx.Process(target=torch_worker,
                         args=(r, world, variant, steps, batch, data_path, port, queue))
             for r in range(world)]
    for p in procs:
        p.start()
    ms = queue.get()
    for p in procs:
        p.join()
    return ms


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--bin", required=True)
    p.add_argument("--world-size", type=int, default=2)
    p.add_argument("--steps", type=int, default=16)
    p.add_argument("--batch", type=int, default=4, help="micro-batch per rank")
    p.add_argument("--bucket", type=int, default=200000)
    p.add_argument("--launcher", default=default_launcher())
    args = p.parse_args()
    w = args.world_size
    prefix = shlex.split(args.launcher.replace("{W}", str(w)))
    env = dict(os.environ, OMP_NUM_THREADS="1")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        model, data = step_time.make_gpt(tmp, args.steps + 2, args.batch * w)
        params = sum(t.numel() for t in torch.jit.load(model).parameters())
        for name, zero in configs(args.bucket):
            config = {"train_micro_batch_size_per_gpu": args.batch,
                      "gradient_accumulation_steps": 1, "gradient_clipping": 1.0,
                      "zero_optimization": zero, "optimizer": ADAMW}
            ms, r0 = compile_and_time(args.bin, prefix, tmp, model, data, config, w,
                                      args.steps, env)
            state = r0["param_bytes"] + r0["grad_bytes"] + r0["optimizer_state_bytes"]
            overlap = r0.get("overlap", {}).get("total", {})
            rs = r0.get("overlap", {}).get("reduce_scatter", {})
            hidden = (min(1.0, max(0.0, 1 - rs["wait_seconds"] / rs["collective_seconds"]))
                      if rs.get("collective_seconds") else None)
            rows.append((name, ms, state, r0["peak_bytes"], r0["comm_volume_elements"]["total"],
                         overlap, hidden))
        baselines = [(name, torch_baseline(variant, w, args.steps, args.batch, data, 29500 + i))
                     for i, (name, variant) in enumerate(
                         [("PyTorch DDP (Gloo) + AdamW", "ddp"),
                          ("PyTorch DDP (Gloo) + ZeroRedundancyOptimizer(AdamW)", "zero")])]
    base_ms, base_state = rows[0][1], rows[0][2]
    print(f"GPT with {params} parameters (Psi), W = {w}, micro-batch {args.batch} per rank, "
          f"buckets {args.bucket} elements, {args.steps} steps, OMP_NUM_THREADS=1")
    print("| config | ms/step | vs stage 0 | state bytes/rank | vs stage 0 | peak bytes/rank "
          "| comm elements/step (Psi) | collectives in flight s | compute blocked in wait s "
          "| reduce-scatter time hidden |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name, ms, state, peak, comm, overlap, hidden in rows:
        inflight = overlap.get("collective_seconds")
        waited = overlap.get("wait_seconds")
        print("| ds-run %s | %.1f | %.2f | %d | %.3f | %d | %d (%.2f) | %s | %s | %s |" % (
            name, ms, ms / base_ms, state, state / base_state, peak, comm, comm / params,
            "%.3f" % inflight if inflight is not None else "n/a",
            "%.3f" % waited if waited is not None else "n/a",
            "%.0f%%" % (100 * hidden) if hidden is not None else "n/a"))
    for name, ms in baselines:
        print("| %s | %.1f | %.2f | | | | | | | |" % (name, ms, ms / base_ms))


if __name__ == "__main__":
    main()
