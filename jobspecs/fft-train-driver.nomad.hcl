# fft-train-driver: the training job of fft-train.nomad.hcl on the nomad-fft task driver
# (driver = "fft", cmd/nomad-driver-fft/README.md) instead of raw_exec. The task needs no
# reporting code: it appends a progress line to the file the driver names in
# FFT_PROGRESS_FILE, and on its stop signal writes its checkpoint under FFT_CHECKPOINT_DIR and
# then the marker FFT_CHECKPOINT_MARKER ({"step": N, "bytes": B}). The driver sees only the
# GPUs Nomad allocated (CUDA_VISIBLE_DEVICES), measures throughput, restart time and
# checkpoint size and time, reports them to the fft-allocator, and emits a "Checkpoint saved"
# task event on each stop. With the driver's checkpoint_root on a folder the clients share,
# the next run of the job, on any client, resumes from the last checkpoint.
#
#   nomad job run jobspecs/fft-train-driver.nomad.hcl
#   nomad alloc status <alloc-id>      # Recent Events: Checkpoint saved: 1.0 MB in 120ms at step 37
#
# As fft-train.nomad.hcl, it stays pending in the "default" node pool until an fft-allocator
# round moves it into the GPU pool and picks the model.

variable "throughput" {
  type        = string
  description = "fft.throughput: work units per round with all the job's GPUs, per GPU model."
  default     = "NVIDIA A100-SXM4-40GB=4,Tesla V100-SXM2-16GB=1"
}

variable "work" {
  type        = string
  description = "fft.work: total work units (W_j); the task does one unit per step."
  default     = "100"
}

variable "gpu_count" {
  type        = number
  description = "GPUs the job needs at once, all of one model (d_j)."
  default     = 2
}

variable "step_seconds" {
  type        = number
  description = "How long one work unit takes (the fake training step)."
  default     = 0.2
}

variable "checkpoint_kb" {
  type        = number
  description = "Size of the fake checkpoint the task writes, KiB."
  default     = 1024
}

job "fft-train-driver" {
  type        = "batch"
  datacenters = ["*"]

  meta = {
    "fft.work"       = var.work
    "fft.work_unit"  = "steps"
    "fft.throughput" = var.throughput
    # Declared as fft-train's (GB); the driver reports the checkpoint's real size.
    "fft.state_size" = "0.5"
    "fft.user"       = "alice"
  }

  group "main" {
    reschedule {
      attempts  = 0
      unlimited = false
    }

    restart {
      attempts = 0
      mode     = "fail"
    }

    task "train" {
      driver = "fft"
      # The stop budget is min(kill_timeout, the client's max_kill_timeout, 30s by default):
      # raise both for large checkpoints.
      kill_timeout = "20s"

      # The task's workload identity in secrets/nomad_token: the driver sends it with each
      # report, and the allocator's default -progress-auth=nomad has Nomad verify it, so
      # a report counts only for this job. A file, not env = true: the environment of a
      # process can be read by other processes of the same user (/proc/<pid>/environ).
      identity {
        file = true
      }

      config {
        command = "/bin/sh"
        # A training loop in sh: resume from the marker's step, one progress line per step,
        # checkpoint on the stop signal (SIGINT, Nomad's default kill_signal) and on SIGUSR1.
        args = ["-c", <<-EOT
          step=0
          if [ -f "$FFT_CHECKPOINT_MARKER" ]; then
            step=$(sed -n 's/.*"step": *\([0-9]*\).*/\1/p' "$FFT_CHECKPOINT_MARKER")
            echo "resuming from step $step"
          fi
          echo "CUDA_VISIBLE_DEVICES=$CUDA_VISIBLE_DEVICES FFT_GPU_MODEL=$FFT_GPU_MODEL FFT_GPU_COUNT=$FFT_GPU_COUNT"
          checkpoint() {
            head -c $((${var.checkpoint_kb} * 1024)) /dev/zero > "$FFT_CHECKPOINT_DIR/model.ckpt"
            printf '{"step": %d, "bytes": %d}\n' "$step" $((${var.checkpoint_kb} * 1024)) > "$FFT_CHECKPOINT_MARKER.tmp"
            mv "$FFT_CHECKPOINT_MARKER.tmp" "$FFT_CHECKPOINT_MARKER"
          }
          trap 'checkpoint; echo "checkpoint at step $step"; exit 0' INT TERM
          trap 'checkpoint' USR1
          while [ "$step" -lt ${var.work} ]; do
            sleep ${var.step_seconds} &
            wait $! || continue
            step=$((step + 1))
            echo "{\"t\": $(date +%s.%N), \"done\": $step}" >> "$FFT_PROGRESS_FILE"
          done
          checkpoint
        EOT
        ]
      }

      resources {
        cpu    = 100
        memory = 64

        device "nvidia/gpu" {
          count = var.gpu_count
        }
      }
    }
  }
}
