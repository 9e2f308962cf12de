# gpu-model: a batch job that runs on GPUs of one model, picked by the nomad-device-fft plugin.
#
#   nomad job run -var 'gpu_model=Tesla V100-SXM2-16GB' jobspecs/gpu-model.nomad.hcl
#
# The device block asks Nomad for gpu_count GPUs whose model (the plugin's device name) is
# gpu_model; Nomad places the task only on a client that has that many healthy GPUs of the
# model, and the plugin hands their UUIDs to the task in NVIDIA_VISIBLE_DEVICES. The task
# prints them and exits, so the job also runs on clients whose plugin presents `fake` GPUs.
# A model no client has leaves the job pending; `nomad job status gpu-model` then shows
# Nomad's placement failure ("Constraint \"missing devices\" filtered N nodes").

variable "gpu_model" {
  type        = string
  description = "GPU model to run on, as NVML names it (the device name in nomad node status -verbose)."
  default     = "Tesla V100-SXM2-16GB"
}

variable "gpu_count" {
  type        = number
  description = "How many GPUs of the model the task needs."
  default     = 2
}

job "gpu-model" {
  type        = "batch"
  datacenters = ["*"]

  group "main" {
    # Fail fast and visibly: this job is a probe, not a workload.
    reschedule {
      attempts  = 0
      unlimited = false
    }

    restart {
      attempts = 0
      mode     = "fail"
    }

    task "show-gpus" {
      driver = "raw_exec"

      config {
        command = "/bin/sh"
        args    = ["-c", "echo \"NVIDIA_VISIBLE_DEVICES=$NVIDIA_VISIBLE_DEVICES\""]
      }

      resources {
        cpu    = 100
        memory = 64

        device "nvidia/gpu" {
          count = var.gpu_count

          # Never use "=" with a purely numeric model name: Nomad would compare numbers.
          constraint {
            attribute = "${device.model}"
            operator  = "="
            value     = var.gpu_model
          }
        }
      }
    }
  }
}
