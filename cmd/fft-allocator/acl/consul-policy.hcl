# Consul ACL policy of the fft-allocator: exactly the keys and sessions it uses (README.md,
# "ACLs"). Replace nomad-fft/v2/ with -consul-prefix if you changed it.
#   consul acl policy create -name fft-allocator -rules @consul-policy.hcl
#   consul acl token create -description fft-allocator -policy-name fft-allocator
#
# Under the prefix: ledger (CAS), jobs/ and rounds/ (transactions), leader (the lock),
# overrides/ (read each round),
# progress/ (read each round; written by PUT /v1/progress). No other token should write the
# prefix: a task with write access to progress/ could report for any job.
key_prefix "nomad-fft/v2/" {
  policy = "write"
}

# Operators' overrides (fftctl park, pin, resume): the allocator only reads them; write
# access there is for operators' tokens (consul-operator-policy.hcl).
key_prefix "nomad-fft/v2/overrides/" {
  policy = "read"
}

# The leader lock's session, created on the Consul agent the allocator talks to: write on
# the sessions of that agent's node only, not of every node (session_prefix "" would let the
# token destroy any session in the datacenter, other services' locks included). Replace
# allocator-node with the node name of the Consul agent of each replica (`consul members`),
# one block per node; with the jobspec's client-local agents, the nodes of its node pool.
session "allocator-node" {
  policy = "write"
}
