module github.com/nomad-fft/nomad-fft/e2e/agentrun

go 1.26
