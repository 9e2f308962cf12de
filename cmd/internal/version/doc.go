// Package version says which build of nomad-fft a binary is: its version and commit.
package version
