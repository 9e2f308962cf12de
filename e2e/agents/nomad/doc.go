// Package nomad pins the Nomad 1.6.1 agent that the end-to-end tests run, and holds those tests.
package nomad
