# torch-train: a real PyTorch training job on the nomad-fft task driver (driver = "fft",
# cmd/nomad-driver-fft/README.md). python/torch_train.py trains a small MLP on synthetic data,
# deterministically (seeded, torch.use_deterministic_algorithms, one thread), on CPU; with
# gpu_count d > 1 it runs DistributedDataParallel over d processes with gloo, standing in for
# the GPUs, and on a machine where CUDA sees the allocated GPUs (CUDA_VISIBLE_DEVICES) it uses
# them with NCCL. Its side of the driver's contract is python/fft_train.py: progress lines, the
# stop signal and SIGUSR1 handled at a step boundary, an atomic checkpoint then its marker,
# resume from the newest complete checkpoint. Parked by a round and resumed on any client
# (with the driver's checkpoint_root on a shared folder), it ends with the same parameters,
# bit for bit, as a run that was never interrupted.
#
# The clients need PyTorch (Debian: apt-get install python3-torch) and the python folder at
# python_dir:
#
#   nomad job run -var python_dir=/opt/nomad-fft/python -var python=/usr/bin/python3 jobspecs/torch-train.nomad.hcl
#   fftctl dev -workload torch      # the same on a local cluster
#
# As fft-train-driver.nomad.hcl, it stays pending in the "default" node pool until an
# fft-allocator round moves it into the GPU pool and picks the model.

variable "python" {
  type        = string
  description = "The Python 3 interpreter that imports torch, on the clients."
  default     = "/usr/bin/python3"
}

variable "python_dir" {
  type        = string
  description = "The folder on the clients holding fft_train.py and torch_train.py (jobspecs/python)."
  default     = "/opt/nomad-fft/python"
}

variable "throughput" {
  type        = string
  description = "fft.throughput: steps per round with all the job's GPUs, per GPU model."
  default     = "NVIDIA A100-SXM4-40GB=4,Tesla V100-SXM2-16GB=1"
}

variable "work" {
  type        = number
  description = "fft.work: total training steps (W_j)."
  default     = 600
}

variable "gpu_count" {
  type        = number
  description = "GPUs the job needs at once, all of one model (d_j): the data-parallel processes."
  default     = 2
}

variable "seed" {
  type        = number
  description = "The seed of the model's initialisation and of the synthetic data."
  default     = 1
}

variable "step_seconds" {
  type        = number
  description = "A floor on each step's time, standing in for a larger model (0: as fast as it goes)."
  default     = 0.05
}

variable "checkpoint_every" {
  type        = number
  description = "Also checkpoint every N steps (0: only on the stop and checkpoint signals)."
  default     = 0
}

variable "checkpoint_write_seconds" {
  type        = number
  description = "Spread each checkpoint write over this long, standing in for a slow shared file system."
  default     = 0
}

job "torch-train" {
  type        = "batch"
  datacenters = ["*"]

  meta = {
    "fft.work"       = "${var.work}"
    "fft.work_unit"  = "steps"
    "fft.throughput" = var.throughput
    "fft.state_size" = "0.001"
    "fft.user"       = "alice"
  }

  group "main" {
    reschedule {
      attempts  = 0
      unlimited = false
    }

    # A task killed in the middle (a crash, an OOM kill) restarts in place and resumes from
    # its newest complete checkpoint.
    restart {
      attempts = 2
      interval = "10m"
      delay    = "1s"
      mode     = "fail"
    }

    task "train" {
      driver = "fft"
      # The stop budget is min(kill_timeout, the client's max_kill_timeout, 30s by default).
      kill_timeout = "20s"

      config {
        command = var.python
        args = [
          "${var.python_dir}/torch_train.py",
          "--steps", "${var.work}",
          "--seed", "${var.seed}",
          "--step-seconds", "${var.step_seconds}",
          "--checkpoint-every", "${var.checkpoint_every}",
          "--checkpoint-write-seconds", "${var.checkpoint_write_seconds}",
        ]
      }

      resources {
        cpu    = 500
        memory = 1024

        device "nvidia/gpu" {
          count = var.gpu_count
        }
      }
    }
  }
}
