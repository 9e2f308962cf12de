module github.com/nomad-fft/nomad-fft/internal/agentrun

go 1.26
