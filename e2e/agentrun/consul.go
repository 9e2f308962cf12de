package agentrun

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// probeClient gives up on an agent that accepts a connection but does not answer, so that a
// caller polling ConsulReady keeps to its own deadline.
var probeClient = &http.Client{Timeout: 5 * time.Second}

// ConsulReady returns nil once the Consul agent at addr (127.0.0.1:port) has elected a leader
// and serves KV reads, which is what the ledger needs, and keeps its data in dataDir; until then
// it says what is missing. The data folder tells the agent just started from another program's
// that took its port between the choice and the bind: that one is never ready.
func ConsulReady(addr, dataDir string) error { return ConsulReadyToken(addr, "", dataDir) }

// ConsulReadyToken is ConsulReady for an agent with ACLs on, asking with token.
func ConsulReadyToken(addr, token, dataDir string) error {
	return ConsulReadyAt("http://"+addr, probeClient, token, dataDir)
}

// ConsulReadyAt is ConsulReadyToken for the agent at base (http://host:port or
// https://host:port), asked with client (an HTTPS agent's CA and client certificate).
func ConsulReadyAt(base string, client *http.Client, token, dataDir string) error {
	leader, err := probe(client, base+"/v1/status/leader", "", http.StatusOK)
	if err != nil {
		return err
	}
	// The leader's address as a JSON string, "" while there is none.
	if strings.Trim(strings.TrimSpace(leader), `"`) == "" {
		return fmt.Errorf("consul at %s has no leader yet", base)
	}
	if _, err = probe(client, base+"/v1/kv/fft-probe", token, http.StatusOK, http.StatusNotFound); err != nil {
		return err
	}
	self, err := probe(client, base+"/v1/agent/self", token, http.StatusOK)
	if err != nil {
		return err
	}
	var agent struct{ DebugConfig struct{ DataDir string } }
	if err := json.Unmarshal([]byte(self), &agent); err != nil {
		return fmt.Errorf("reading the agent at %s: %w", base, err)
	}
	if agent.DebugConfig.DataDir != dataDir {
		return fmt.Errorf("the Consul agent at %s is another one (its data in %q, not %q)", base, agent.DebugConfig.DataDir, dataDir)
	}
	return nil
}

// probe GETs url and returns the body when the status is one of ok.
func probe(client *http.Client, url, token string, ok ...int) (string, error) {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	if token != "" {
		req.Header.Set("X-Consul-Token", token)
	}
	resp, err := client.Do(req)
	if err != nil {
		return "", fmt.Errorf("probing consul: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", fmt.Errorf("reading %s: %w", url, err)
	}
	for _, code := range ok {
		if resp.StatusCode == code {
			return string(body), nil
		}
	}
	return "", fmt.Errorf("%s answered %s", url, resp.Status)
}
