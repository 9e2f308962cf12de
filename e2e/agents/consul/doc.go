// Package consul pins the Consul 1.16.1 agent that the end-to-end tests run.
package consul
