# fft-allocator: the FFT allocator service as a Nomad job. Two replicas on distinct hosts; one
# leads (a Consul lock) and runs the rounds, the other takes over within -leader-ttl when the
# leader's allocation dies, while Nomad restarts or reschedules the dead one. Each replica
# registers the Consul service "fft-allocator" with an HTTP check on /v1/health (HTTPS with
# tls_cert_file and tls_key_file, the API's certificate on every client).
#
# Tokens come from Nomad Variables, never from the jobspec: put them at the job's own path,
# which only this job's tasks can read (workload identity), before running the job. The job
# runs in its own namespace, fft-system: in a namespace users may submit jobs to, any of them
# could register a job with the ID fft-allocator and read the tokens from its tasks. Let
# only the operators submit jobs in fft-system (cmd/fft-allocator/README.md, "ACLs"):
#
#   nomad namespace apply -description "nomad-fft allocator" fft-system
#   nomad var put -namespace fft-system nomad/jobs/fft-allocator nomad_token=<secret ID> consul_token=<secret ID>
#   nomad job run -var version=0.1.0 jobspecs/fft-allocator.nomad.hcl
#
# The Nomad token needs to read nodes and to read and submit the managed jobs in every
# namespace; the Consul token to write keys under consul_prefix, sessions and the service.
# On a cluster without ACLs store empty values: the template waits until the variable exists.
#
# The binary is `command` on every client (go install, or unzipped from a release), or, with
# artifact_url set, the release archive (make release) each client downloads from there:
#
#   nomad job run -var artifact_url=https://releases.example.com/nomad-fft -var version=0.1.0 \
#     jobspecs/fft-allocator.nomad.hcl

variable "version" {
  type        = string
  description = "Release to run: the archive fft-allocator_<version>_linux_<arch>.zip."
  default     = "0.1.0"
}

variable "artifact_url" {
  type        = string
  description = "Where the release archives are, a go-getter source prefix; \"\" runs `command` instead."
  default     = ""
}

variable "command" {
  type        = string
  description = "The fft-allocator binary on every client, when artifact_url is \"\"."
  default     = "/usr/local/bin/fft-allocator"
}

variable "driver" {
  type        = string
  description = "Task driver: exec (isolated, the default) or raw_exec (dev clusters)."
  default     = "exec"
}

variable "namespace" {
  type        = string
  description = "The allocator's own namespace, where only operators may submit jobs: its tokens are at nomad/jobs/fft-allocator there."
  default     = "fft-system"
}

variable "datacenters" {
  type        = list(string)
  description = "Datacenters the replicas may run in."
  default     = ["*"]
}

variable "node_pool" {
  type        = string
  description = "Node pool of the replicas: not the GPU clients' pool, so they never take a GPU node's place."
  default     = "default"
}

variable "count" {
  type        = number
  description = "Replicas; one leads, the rest stand by."
  default     = 2
}

variable "http_port" {
  type        = number
  description = "A static port for the HTTP API (the task drivers' allocator_address); 0 lets Nomad pick one."
  default     = 0
}

variable "round" {
  type        = string
  description = "Round length R (fft-allocator -round)."
  default     = "300s"
}

variable "gpu_node_pool" {
  type        = string
  description = "Node pool of the GPU clients (fft-allocator -node-pool)."
  default     = "gpu"
}

variable "consul_prefix" {
  type        = string
  description = "Consul KV prefix of the ledger, the audit log and the leader lock."
  default     = "nomad-fft/v2"
}

variable "nomad_addr" {
  type        = string
  description = "Nomad's HTTP API as a task reaches it: the client's agent."
  default     = "http://127.0.0.1:4646"
}

variable "consul_addr" {
  type        = string
  description = "Consul's HTTP API as a task reaches it: the client's agent."
  default     = "127.0.0.1:8500"
}

variable "tls_cert_file" {
  type        = string
  description = "PEM certificate of the HTTP API on every client (fft-allocator -tls-cert-file): set with tls_key_file, the API serves HTTPS only and the Consul check of it uses https; \"\" serves plain HTTP."
  default     = ""
}

variable "tls_key_file" {
  type        = string
  description = "PEM private key of tls_cert_file on every client (fft-allocator -tls-key-file)."
  default     = ""
}

variable "check_tls_skip_verify" {
  type        = bool
  description = "With tls_cert_file: the Consul check skips verifying the API's certificate (a check's tls_skip_verify). Leave it off and give the Consul agents the allocator's CA (their tls ca_file) instead."
  default     = false
}

variable "extra_args" {
  type        = list(string)
  description = "More fft-allocator flags, such as [\"-min-round-gap\", \"10s\"]."
  default     = []
}

job "fft-allocator" {
  namespace   = var.namespace
  type        = "service"
  datacenters = var.datacenters
  node_pool   = var.node_pool

  group "allocator" {
    count = var.count

    # Two replicas on one host would fail together.
    constraint {
      operator = "distinct_hosts"
      value    = "true"
    }

    # One replica at a time, healthy by its Consul check before the next; a bad version rolls
    # back on its own.
    update {
      max_parallel      = 1
      health_check      = "checks"
      min_healthy_time  = "10s"
      healthy_deadline  = "3m"
      progress_deadline = "10m"
      auto_revert       = true
    }

    # A crashed replica restarts in place a few times, then Nomad reschedules it elsewhere.
    restart {
      attempts = 3
      interval = "5m"
      delay    = "15s"
      mode     = "fail"
    }

    reschedule {
      delay          = "30s"
      delay_function = "exponential"
      max_delay      = "5m"
      unlimited      = true
    }

    # A dynamic port unless http_port is set: the task drivers need an address that stays
    # (allocator_address), such as fft-allocator.service.consul with a static port.
    network {
      port "http" {
        static = var.http_port
      }
    }

    service {
      name     = "fft-allocator"
      provider = "consul"
      port     = "http"
      tags     = ["nomad-fft", "metrics"]
      meta {
        metrics_path = "/v1/metrics"
      }

      # With the API over TLS (tls_cert_file) the check speaks HTTPS: over plain HTTP it would
      # fail and every deployment with it.
      check {
        name            = "fft-allocator health"
        type            = "http"
        protocol        = var.tls_cert_file == "" ? "http" : "https"
        tls_skip_verify = var.tls_cert_file != "" && var.check_tls_skip_verify
        path            = "/v1/health"
        interval        = "10s"
        timeout         = "2s"
      }
    }

    task "fft-allocator" {
      driver = var.driver

      dynamic "artifact" {
        for_each = var.artifact_url == "" ? [] : [var.artifact_url]
        content {
          source      = "${artifact.value}/fft-allocator_${var.version}_${attr.kernel.name}_${attr.cpu.arch}.zip"
          destination = "local/"
        }
      }

      config {
        command = var.artifact_url == "" ? var.command : "local/fft-allocator"
        args = concat([
          "-http-addr", "${NOMAD_ADDR_http}",
          "-id", "${NOMAD_ALLOC_ID}",
          "-round", var.round,
          "-node-pool", var.gpu_node_pool,
          "-consul-prefix", var.consul_prefix,
          "-log-json",
          ], var.tls_cert_file == "" ? [] : ["-tls-cert-file", var.tls_cert_file, "-tls-key-file", var.tls_key_file],
        var.extra_args)
      }

      env {
        NOMAD_ADDR       = var.nomad_addr
        CONSUL_HTTP_ADDR = var.consul_addr
      }

      # The tokens, from the job's Nomad Variable, as environment variables only this task sees;
      # a changed token restarts the task with it.
      template {
        data        = <<-EOT
        {{- with nomadVar "nomad/jobs/fft-allocator" }}
        NOMAD_TOKEN={{ .nomad_token }}
        CONSUL_HTTP_TOKEN={{ .consul_token }}
        {{- end }}
        EOT
        destination = "secrets/tokens.env"
        env         = true
        change_mode = "restart"
      }

      # The last round's Consul writes finish within it (SIGTERM ends the round loop).
      kill_timeout = "30s"

      resources {
        cpu    = 500
        memory = 256
      }
    }
  }
}
