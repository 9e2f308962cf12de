# fft-train: a training job scheduled by FFT. It opts in with fft.* meta and asks for GPUs with
# a device "nvidia/gpu" block whose count is the gang size d_j. It names no node pool, so it
# lands in the "default" pool, while the GPU clients sit in their own pool (client { node_pool =
# "gpu" }, fft-allocator -node-pool): even a plain `nomad job run` leaves it pending ("No nodes
# were eligible for evaluation") until an fft-allocator round selects it, moves it into the GPU
# pool and steers the device block to the chosen model. Do not set node_pool here: a job already
# in the GPU pool can be placed by Nomad before FFT decides.
#
#   nomad job run jobspecs/fft-train.nomad.hcl
#   nomad job run -var 'throughput=NVIDIA A100-SXM4-40GB=4,Tesla V100-SXM2-16GB=1' jobspecs/fft-train.nomad.hcl
#
# The task prints NVIDIA_VISIBLE_DEVICES and sleeps for `seconds`, so it also runs on clients
# whose plugin presents `fake` GPUs. Like a real training task it writes a "checkpoint" when it
# gets its stop signal: a parked (preempted) job is stopped and has kill_timeout to do so; with
# `checkpoint_dir` set the checkpoint is real (the seconds run so far, in a file there) and the
# next run resumes from it. With `fftctl` set it also reports its progress as a training loop
# would, with `fftctl report` (work done = seconds run x work / seconds), every 2 seconds and
# when it ends (that last report is retried for 60 seconds; a report that fails never fails
# the task). With `allocator_addr` the reports go to the fft-allocator's HTTP API with the
# task's workload identity (over HTTPS with `allocator_ca_cert`); else to Consul KV.

variable "throughput" {
  type        = string
  description = "fft.throughput: work units per round with all the job's GPUs, per GPU model."
  default     = "NVIDIA A100-SXM4-40GB=4,Tesla V100-SXM2-16GB=1"
}

variable "work" {
  type        = string
  description = "fft.work: total work units (W_j)."
  default     = "100"
}

variable "gpu_count" {
  type        = number
  description = "GPUs the job needs at once, all of one model (d_j)."
  default     = 2
}

variable "seconds" {
  type        = number
  description = "How long the task runs."
  default     = 5
}

variable "fftctl" {
  type        = string
  description = "Path of fftctl on the clients; when set, the task reports its progress with `fftctl report`."
  default     = ""
}

variable "checkpoint_dir" {
  type        = string
  description = "A folder on the clients where the task keeps its checkpoint across preemptions (empty: it starts over)."
  default     = ""
}

variable "consul_addr" {
  type        = string
  description = "Consul HTTP address for `fftctl report` (empty: CONSUL_HTTP_ADDR as the task inherits it)."
  default     = ""
}

variable "allocator_addr" {
  type        = string
  description = "The fft-allocator's HTTP API (https://host:4650 when it serves TLS): `fftctl report` sends the reports there with the task's workload identity instead of writing Consul (empty: FFT_ALLOCATOR_ADDR as the task inherits it, else Consul)."
  default     = ""
}

variable "allocator_ca_cert" {
  type        = string
  description = "Path on the clients of the PEM CA certificate that verifies an https allocator (empty: FFT_ALLOCATOR_CACERT as the task inherits it, else the system's roots)."
  default     = ""
}

job "fft-train" {
  type        = "batch"
  datacenters = ["*"]

  # The fft. contract (allocator/jobmeta): keys with dots need the attribute form of meta.
  meta = {
    "fft.work"       = var.work
    "fft.work_unit"  = "epochs"
    "fft.throughput" = var.throughput
    "fft.state_size" = "0.5"
    "fft.user"       = "alice"
  }

  # Only for an allocator run without a GPU node pool (-node-pool ""): the gate. No node has
  # meta.fft_gate, so Nomad places nothing until a round lifts it. The allocator adds it itself
  # when it parks (preempts) a job.
  #
  # constraint {
  #   attribute = "${meta.fft_gate}"
  #   value     = "held"
  # }

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
      driver       = "raw_exec"
      kill_timeout = "20s"

      # The task's workload identity in NOMAD_TOKEN: what the allocator's progress endpoint
      # (-progress-auth=nomad) takes as proof that a report comes from this job.
      identity {
        env = true
      }

      config {
        command = "/bin/sh"
        # On its stop signal the "training" writes its checkpoint (here: a line) and exits.
        args = ["-c", <<-EOT
          echo "NVIDIA_VISIBLE_DEVICES=$NVIDIA_VISIBLE_DEVICES"
          ckpt=
          ran=0
          if [ -n "${var.checkpoint_dir}" ]; then
            mkdir -p "${var.checkpoint_dir}"
            ckpt="${var.checkpoint_dir}/$NOMAD_NAMESPACE.$NOMAD_JOB_ID"
            if [ -f "$ckpt" ]; then ran=$(cat "$ckpt"); fi
          fi
          start=$(date +%s)
          seconds_run() { echo $((ran + $(date +%s) - start)); }
          report() {
            "${var.fftctl}" report -quiet -consul-addr "${var.consul_addr}" \
              -allocator-addr "${var.allocator_addr}" -allocator-ca-cert "${var.allocator_ca_cert}" \
              "$(awk -v s="$1" 'BEGIN { if (s > ${var.seconds}) s = ${var.seconds}; print s * ${var.work} / ${var.seconds} }')"
          }
          sleep $((${var.seconds} > ran ? ${var.seconds} - ran : 0)) &
          pid=$!
          reporter=
          trap 'echo "checkpoint written"; [ -z "$ckpt" ] || seconds_run > "$ckpt"; kill $pid $reporter 2>/dev/null; exit 0' INT TERM
          # The periodic reporter stops at its next turn when this file exists; the last report
          # waits for it, so a periodic report still in flight cannot land after it.
          stop="$NOMAD_TASK_DIR/.report-stop"
          rm -f "$stop"
          if [ -n "${var.fftctl}" ]; then
            (while sleep 2 && [ ! -e "$stop" ]; do report "$(seconds_run)"; done) &
            reporter=$!
          fi
          wait $pid
          if [ -n "$reporter" ]; then
            touch "$stop"
            wait $reporter
            # The work is done whether the last report lands or not: retry it for a while
            # (Consul may be restarting and electing a leader) and never fail the task for it.
            tries=0
            until report ${var.seconds} || [ $tries -ge 30 ]; do tries=$((tries + 1)); sleep 2; done
          fi
          exit 0
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
