"""torch_train: a small real PyTorch training job for the nomad-fft task driver.

It trains a two-layer MLP to fit a fixed random linear map (synthetic data: each step's batch
is drawn from a generator seeded by the seed, the step and the rank, so a resumed run sees
exactly the batches an uninterrupted one would). Deterministic: one thread, seeded, with
torch.use_deterministic_algorithms(True); a run parked and resumed any number of times ends
with the same parameters, bit for bit, as one that ran straight through (same seed, same
number of processes).

With --world-size d > 1 (default: FFT_GPU_COUNT, the job's GPUs) it starts d processes and
trains with DistributedDataParallel over gloo, standing in for GPUs; when CUDA sees a GPU
(the driver sets CUDA_VISIBLE_DEVICES to the allocated ones) each process uses one, with
NCCL. Under torchrun (RANK, WORLD_SIZE, MASTER_ADDR set) it is one worker of torchrun's gang.

The driver's contract is fft_train's: progress lines, the stop signal and SIGUSR1 acted on
at a step boundary by every process alike, an atomic checkpoint then its marker, resume from
the newest complete checkpoint. At the end it writes the final parameters, as exact hex
floats, to <FFT_CHECKPOINT_DIR>/final-params.json.

    python3 torch_train.py --steps 600 --seed 1
"""

import argparse
import io
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fft_train  # noqa: E402

IN, HIDDEN, OUT = 16, 32, 4


def parse_args(argv):
    p = argparse.ArgumentParser(description="Train a small MLP with PyTorch on the fft driver.")
    p.add_argument("--steps", type=int, default=600, help="total training steps (the job's work units)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--batch", type=int, default=64, help="examples per step and process")
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--world-size", type=int, default=None,
                   help="data-parallel processes (default: FFT_GPU_COUNT, at least 1)")
    p.add_argument("--checkpoint-every", type=int, default=0,
                   help="also checkpoint every N steps (0: only on signals and at the end)")
    p.add_argument("--step-seconds", type=float, default=0.0,
                   help="a floor on each step's time, standing in for a larger model (0: none)")
    p.add_argument("--checkpoint-write-seconds", type=float, default=0.0,
                   help="spread each checkpoint write over this long, standing in for a large "
                        "checkpoint on a slow shared file system (0: write at once)")
    a = p.parse_args(argv)
    if a.world_size is None:
        a.world_size = max(1, int(os.environ.get("FFT_GPU_COUNT") or "1"))
    if a.steps < 1 or a.world_size < 1 or a.batch < 1:
        p.error("--steps, --world-size and --batch must be at least 1")
    return a


def main(argv):
    args = parse_args(argv)
    if "RANK" in os.environ:  # a worker (started below, or by torchrun)
        return worker(args)
    if args.world_size == 1:
        os.environ.update(RANK="0", WORLD_SIZE="1", LOCAL_RANK="0")
        return worker(args)
    return launch(args, argv)


def launch(args, argv):
    """Starts world_size workers and waits for them. The driver signals the whole process
    group, so each worker gets the stop and checkpoint signals itself; the launcher passes
    them on too, for a kill aimed at its PID alone (a duplicate only sets a flag again)."""
    rendezvous = tempfile.mkdtemp(prefix="torch-train-", dir=os.environ.get("NOMAD_TASK_DIR") or None)
    env = dict(os.environ, WORLD_SIZE=str(args.world_size),
               FFT_TORCH_INIT="file://" + os.path.join(rendezvous, "store"))
    # gloo picks its interface from the host name; the workers are all on this host.
    env.setdefault("GLOO_SOCKET_IFNAME", "lo")
    children = []

    def forward(signum, frame):
        for c in children:
            if c.poll() is None:
                c.send_signal(signum)

    ckpt_sig = fft_train.signal_number(os.environ.get("FFT_CHECKPOINT_SIGNAL"), signal.SIGUSR1)
    for sig in (signal.SIGINT, signal.SIGTERM, ckpt_sig):
        signal.signal(sig, forward)
    try:
        for rank in range(args.world_size):
            children.append(subprocess.Popen([sys.executable, os.path.abspath(__file__)] + argv,
                                             env=dict(env, RANK=str(rank), LOCAL_RANK=str(rank))))
        return wait_workers(children)
    finally:
        # The store is the rendezvous of this run only; outside a task folder it is in /tmp.
        shutil.rmtree(rendezvous, ignore_errors=True)


def wait_workers(children):
    """Waits for every worker; returns the first failure's exit code (128+N for signal N)."""
    code = 0
    while children:
        for c in list(children):
            rc = c.poll()
            if rc is None:
                continue
            children.remove(c)
            if rc != 0 and code == 0:
                code = rc if rc > 0 else 128 - rc
                # A worker that failed leaves the others blocked in a collective.
                for o in children:
                    o.kill()
        time.sleep(0.05)
    return code


def worker(args):
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    # Before importing torch (seconds): a stop signal from then on is a flag, not a traceback.
    job = fft_train.Job(rank=rank)
    import torch
    import torch.distributed as dist
    import torch.nn as nn

    local_rank = int(os.environ.get("LOCAL_RANK", rank))
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(1)  # results must not depend on the host's core count

    cuda = torch.cuda.is_available() and os.environ.get("CUDA_VISIBLE_DEVICES", "") != ""
    device = torch.device("cuda", local_rank) if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(device)
    if world > 1:
        init = os.environ.get("FFT_TORCH_INIT", "env://")
        dist.init_process_group("nccl" if cuda else "gloo", init_method=init, rank=rank, world_size=world)

    torch.manual_seed(args.seed)
    model = nn.Sequential(nn.Linear(IN, HIDDEN), nn.Tanh(), nn.Linear(HIDDEN, OUT)).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    teacher = torch.randn(IN, OUT, generator=torch.Generator().manual_seed(args.seed + 1)).to(device)

    def load(path):
        state = torch.load(path, map_location=device)
        if state["seed"] != args.seed or state["world_size"] != world:
            raise ValueError("checkpoint of seed %s on %s processes, this run is seed %d on %d"
                             % (state["seed"], state["world_size"], args.seed, world))
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["optimizer"])

    step = job.resume(load)
    saved = [step]  # the step of the newest checkpoint, alike on every rank
    if world > 1:
        # Every rank must go on from the same step: rank 0 may have written since another read.
        t = torch.tensor([step, -step], device=device)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        if t[0].item() != -t[1].item():
            raise RuntimeError("ranks resumed from different steps (%d to %d)" % (-t[1].item(), t[0].item()))
    net = nn.parallel.DistributedDataParallel(model) if world > 1 else model

    def agree(stop, ckpt):
        if world == 1:
            return stop, ckpt
        t = torch.tensor([int(stop), int(ckpt)], device=device)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        return t[0].item(), t[1].item()

    def save():
        def write(f):
            buf = io.BytesIO()
            torch.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "step": step,
                        "seed": args.seed, "world_size": world}, buf)
            data = buf.getvalue()
            chunks = 16 if args.checkpoint_write_seconds > 0 else 1
            n = -(-len(data) // chunks)
            for i in range(0, len(data), n):
                f.write(data[i:i + n])
                if args.checkpoint_write_seconds > 0:
                    f.flush()
                    time.sleep(args.checkpoint_write_seconds / chunks)

        job.save(step, write)
        saved[0] = step
        if world > 1:
            dist.barrier()

    if rank == 0:
        print("training from step %d to %d on %d process(es), %s; CUDA_VISIBLE_DEVICES=%s" % (
            step, args.steps, world, device, os.environ.get("CUDA_VISIBLE_DEVICES", "")), flush=True)
    loss_fn = nn.MSELoss()
    last_loss = float("nan")
    while step < args.steps:
        started = time.monotonic()
        g = torch.Generator().manual_seed((args.seed * 1000003 + step) * 1009 + rank)
        x = torch.randn(args.batch, IN, generator=g)
        y = x @ teacher.cpu() + 0.01 * torch.randn(args.batch, OUT, generator=g)
        loss = loss_fn(net(x.to(device)), y.to(device))
        opt.zero_grad()
        loss.backward()
        opt.step()
        step += 1
        last_loss = loss.item()
        rest = args.step_seconds - (time.monotonic() - started)
        if rest > 0:
            time.sleep(rest)
        job.progress(step, loss=last_loss)
        if rank == 0:
            print("step %d loss %.6f t %.6f" % (step, last_loss, time.time()), flush=True)
        action = job.at_step_boundary(agree)
        if action == fft_train.CONTINUE and args.checkpoint_every and step % args.checkpoint_every == 0:
            action = fft_train.CHECKPOINT
        if action != fft_train.CONTINUE:
            save()
        if action == fft_train.STOP:
            if rank == 0:
                print("stopped at step %d" % step, flush=True)
            return 0

    if saved[0] != step:
        save()
    if rank == 0:
        write_params(model, step, args, world, job.checkpoint_dir)
        print("finished at step %d, loss %.6f" % (step, last_loss), flush=True)
    return 0


def write_params(model, step, args, world, folder):
    """The final parameters as exact hex floats, for comparing runs bit for bit."""
    params = {name: [float(v).hex() for v in t.detach().cpu().double().flatten().tolist()]
              for name, t in model.state_dict().items()}
    out = {"step": step, "seed": args.seed, "world_size": world, "params": params}
    path = os.path.join(folder, "final-params.json")
    tmp = path + ".tmp.%d" % os.getpid()
    with open(tmp, "w") as f:
        json.dump(out, f, sort_keys=True)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
